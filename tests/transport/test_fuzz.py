"""Fuzzing every gRPC endpoint (hypothesis): garbage, truncated messages, wrong types, huge
lengths, steps out of order. The server answers with an error status (or ignores what it
cannot use), never hangs, and goes on serving everybody else."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import grpc
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import actorrt
from actorrt.transport import rpc as _rpc
from actorrt.v1 import actor_host_pb2, common_pb2, master_pb2, master_pb2_grpc
from tests.conftest import ProcCluster

pytestmark = pytest.mark.timeout(300)

FUZZ = settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
EVERY_STEP_S = 3.0  # no answer within this = a hang


@actorrt.remote_class
class Probe:
    def ping(self) -> str:
        return "pong"


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        b, n = n & 0x7F, n >> 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


# Valid messages of each stream, to truncate, corrupt, reorder and combine.
VALID_CLIENT = [
    master_pb2.ClientEvent(open_session=master_pb2.OpenSession(version=_rpc.PROTOCOL_VERSION, client_id="fuzz")),
    master_pb2.ClientEvent(place_actor=master_pb2.PlaceActor(request_id=1, resources=common_pb2.Resources(num_cpus=1))),
    master_pb2.ClientEvent(place_actor=master_pb2.PlaceActor(request_id=2, resources=common_pb2.Resources(num_cpus=0))),
    master_pb2.ClientEvent(
        place_actor=master_pb2.PlaceActor(request_id=3, resources=common_pb2.Resources(num_cpus=10**9))
    ),
    master_pb2.ClientEvent(release_actor=master_pb2.ReleaseActor(actor_id="nope")),
    master_pb2.ClientEvent(close_session=master_pb2.CloseSession()),
]
VALID_WORKER = [
    master_pb2.WorkerEvent(
        register_worker=master_pb2.RegisterWorker(version=_rpc.PROTOCOL_VERSION, node="fuzz", cpus=1)
    ),
    master_pb2.WorkerEvent(
        register_worker=master_pb2.RegisterWorker(version=_rpc.PROTOCOL_VERSION, node="fuzz", cpus=0)
    ),
    master_pb2.WorkerEvent(heartbeat=master_pb2.Heartbeat(load=1.0, actor_rss_bytes={"x": 5})),
    master_pb2.WorkerEvent(slot_ready=master_pb2.SlotReady(slot=10**6, endpoint="127.0.0.1:1")),
    master_pb2.WorkerEvent(actor_exited=master_pb2.ActorExited(actor_id="nope", cause="fuzz")),
]
VALID_CALLS = [
    actor_host_pb2.CallBatch(attach=actor_host_pb2.AttachActor(version=_rpc.PROTOCOL_VERSION, actor_id="nope")),
    actor_host_pb2.CallBatch(calls=[actor_host_pb2.Call(seq=1, method="ping")]),
    actor_host_pb2.CallBatch(
        construct=actor_host_pb2.ConstructActor(
            version=_rpc.PROTOCOL_VERSION, actor_id="a", spec=common_pb2.Payload(pickle=b"\x80\x05junk")
        )
    ),
]


def messages(valid: list[Any]) -> st.SearchStrategy[bytes]:
    encoded = [m.SerializeToString() for m in valid]
    return st.one_of(
        st.binary(max_size=64),  # garbage
        st.sampled_from(encoded),  # valid, out of order
        st.sampled_from(encoded).flatmap(
            lambda b: st.integers(0, max(0, len(b) - 1)).map(lambda n: b[:n])
        ),  # truncated
        st.tuples(st.integers(1, 20), st.integers(2**20, 2**31)).map(  # a field claiming a huge length
            lambda t: bytes([(t[0] << 3) | 2]) + _varint(t[1]) + b"x" * 8
        ),
        st.tuples(st.integers(1, 20), st.integers(0, 2**63)).map(  # a varint where a message belongs
            lambda t: bytes([(t[0] << 3) | 0]) + _varint(t[1])
        ),
    )


class Raw:
    """Streams of raw bytes to one method, with bounded waits."""

    def __init__(self, loop: asyncio.AbstractEventLoop, address: str, token: str) -> None:
        self.loop = loop
        self.channel = loop.run_until_complete(self._open(address))
        self.metadata = _rpc.auth_metadata(token)

    @staticmethod
    async def _open(address: str) -> grpc.aio.Channel:
        return grpc.aio.insecure_channel(address, options=_rpc.channel_options())

    def exchange(self, method: str, frames: list[bytes]) -> str:
        return self.loop.run_until_complete(asyncio.wait_for(self._exchange(method, frames), EVERY_STEP_S * 3))

    async def _exchange(self, method: str, frames: list[bytes]) -> str:
        call: grpc.aio.StreamStreamCall[bytes, bytes] = self.channel.stream_stream(method)(metadata=self.metadata)
        try:
            for frame in frames:
                await call.write(frame)
            await call.done_writing()
            while True:  # read until the server ends the call, or stays quiet (a live session)
                try:
                    reply = await asyncio.wait_for(call.read(), EVERY_STEP_S)
                except TimeoutError:
                    return "open"
                if reply is grpc.aio.EOF:
                    return "ended"
        except grpc.RpcError as e:
            return e.code().name
        except asyncio.InvalidStateError:  # the server already ended the call: why?
            return (await call.code()).name
        finally:
            call.cancel()

    def serving(self, address: str) -> bool:
        async def status() -> bool:
            stub = master_pb2_grpc.MasterStub(self.channel)
            reply = await stub.GetClusterStatus(master_pb2.GetClusterStatusRequest(), metadata=self.metadata, timeout=5)
            return len(reply.nodes) >= 2

        return self.loop.run_until_complete(status())

    def close(self) -> None:
        self.loop.run_until_complete(self.channel.close())


@pytest.fixture
def raw(cluster: ProcCluster) -> Iterator[Raw]:
    loop = asyncio.new_event_loop()
    r = Raw(loop, cluster.address, cluster.token)
    yield r
    r.close()
    loop.close()


def test_fuzz_client_session(cluster: ProcCluster, raw: Raw) -> None:
    outcomes: set[str] = set()

    @FUZZ
    @given(st.lists(messages(VALID_CLIENT), min_size=1, max_size=4))
    def run(frames: list[bytes]) -> None:
        outcomes.add(raw.exchange("/actorrt.v1.Master/ClientSession", frames))
        assert raw.serving(cluster.address)

    run()
    assert outcomes & {"INTERNAL", "INVALID_ARGUMENT", "FAILED_PRECONDITION"}, outcomes


def test_fuzz_worker_session(cluster: ProcCluster, raw: Raw) -> None:
    @FUZZ
    @given(st.lists(messages(VALID_WORKER), min_size=1, max_size=4))
    def run(frames: list[bytes]) -> None:
        raw.exchange("/actorrt.v1.Master/WorkerSession", frames)
        assert raw.serving(cluster.address)

    run()


def test_fuzz_cluster_status(cluster: ProcCluster, raw: Raw) -> None:
    async def unary(frame: bytes) -> str:
        try:
            status: grpc.aio.UnaryUnaryMultiCallable[bytes, bytes] = raw.channel.unary_unary(
                "/actorrt.v1.Master/GetClusterStatus"
            )
            await status(frame, metadata=raw.metadata, timeout=EVERY_STEP_S)
            return "OK"
        except grpc.RpcError as e:
            return e.code().name

    @FUZZ
    @given(st.binary(max_size=64))
    def run(frame: bytes) -> None:
        # an answer (the request parsed) or an error status; never a hang
        assert raw.loop.run_until_complete(unary(frame)) not in {"DEADLINE_EXCEEDED", "UNAVAILABLE"}
        assert raw.serving(cluster.address)

    run()


def test_fuzz_actor_host(cluster: ProcCluster) -> None:
    """Garbage to a live actor's host: the bad streams fail, the actor keeps answering."""
    with cluster.connect() as c:
        probe = Probe.remote().result()
        endpoint = next(a["endpoint"] for a in c.status().result().actors if a["actor_id"] == probe.actor_id)
        loop = asyncio.new_event_loop()
        raw = Raw(loop, endpoint, cluster.token)
        outcomes: set[str] = set()
        try:

            @settings(FUZZ, max_examples=40)
            @given(st.lists(messages(VALID_CALLS), min_size=1, max_size=3))
            def run(frames: list[bytes]) -> None:
                outcomes.add(raw.exchange("/actorrt.v1.ActorHost/Calls", frames))
                assert probe.ping().result(EVERY_STEP_S) == "pong"

            run()
        finally:
            raw.close()
            loop.close()
        assert outcomes & {"INTERNAL", "INVALID_ARGUMENT", "FAILED_PRECONDITION", "NOT_FOUND"}, outcomes
        actorrt.kill(probe).result()
