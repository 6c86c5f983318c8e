"""The servers' bounds on what they receive: a peer without the token costs them almost nothing,
a token holder cannot send one message over a server's bound, and larger messages still get
through, split into chunks (refused, and the actor lives on, when the chunks are cut short or
garbled). Real master, workers and hosts on 127.0.0.1."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Sized
from pathlib import Path

import grpc
import numpy as np
import pytest

import actorrt
from actorrt.transport import rpc as _rpc
from actorrt.transport import wire as _wire
from actorrt.v1 import actor_host_pb2 as pb
from tests.conftest import ProcCluster

MIB = 1 << 20


@actorrt.remote_class
class Sink:
    def __init__(self, blob: bytes = b"", files: tuple[str, ...] = ()) -> None:
        self.blob_len = len(blob)
        self.file_sizes = {f: os.path.getsize(f) for f in files}

    def pid(self) -> int:
        return os.getpid()

    def sizes(self) -> tuple[int, dict[str, int]]:
        return self.blob_len, self.file_sizes

    def length(self, x: Sized) -> int:
        return len(x)

    def echo(self, x: object) -> object:
        return x


def _rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise AssertionError(f"no VmRSS for {pid}")


def _ident(b: bytes) -> bytes:
    """A gRPC (de)serializer for raw bytes."""
    return b


def _master_pid(cluster: ProcCluster) -> int:
    return cluster.procs[0].pid


async def _send_raw(address: str, method: str, body: bytes, token: str | None, unary: bool) -> grpc.aio.AioRpcError:
    """Send one message of ``body`` to ``method``; return the error the server answers with."""
    options = [("grpc.max_send_message_length", -1), ("grpc.max_receive_message_length", -1)]
    async with grpc.aio.insecure_channel(address, options=options) as channel:
        try:
            if unary:
                await channel.unary_unary(method, request_serializer=_ident, response_deserializer=_ident)(
                    body, metadata=_rpc.auth_metadata(token), timeout=60
                )
            else:
                call = channel.stream_stream(method, request_serializer=_ident, response_deserializer=_ident)(
                    metadata=_rpc.auth_metadata(token), timeout=60
                )
                await call.write(body)
                await call.read()
        except grpc.aio.AioRpcError as e:
            return e
    raise AssertionError(f"{method} accepted a message of {len(body)} bytes")


@pytest.mark.timeout(120)
async def test_huge_messages_without_a_token_cost_the_servers_almost_nothing(cluster: ProcCluster) -> None:
    """512 MiB sent with no token to the master and to an actor host (known and unknown methods,
    unary and streaming) is refused without being read: each server's RSS grows by < 40 MB
    (it grew by ~850 MB per message before)."""
    body = b"\x0a" + bytes(512 * MIB)
    async with cluster.connect() as c:
        sink = await Sink.remote()
        host_pid = await sink.pid()
        targets = [
            (cluster.address, _master_pid(cluster), "/actorrt.v1.Master/GetClusterStatus", True),
            (cluster.address, _master_pid(cluster), "/actorrt.v1.Master/NoSuchMethod", True),
            (cluster.address, _master_pid(cluster), "/actorrt.v1.Master/ClientSession", False),
            (sink._conn.endpoint, host_pid, "/actorrt.v1.ActorHost/Calls", False),
            (sink._conn.endpoint, host_pid, "/actorrt.v1.ActorHost/Calls", True),
            (sink._conn.endpoint, host_pid, "/actorrt.v1.ActorHost/Nope", True),
        ]
        for address, pid, method, unary in targets:
            before = _rss_mb(pid)
            err = await _send_raw(address, method, body, None, unary)
            grown = _rss_mb(pid) - before
            print(f"{method} unary={unary}: {err.code().name}, server RSS {grown:+.1f} MB")
            # A stream's write that loses the race with the refusal reads INTERNAL on the client.
            refused = {grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.RESOURCE_EXHAUSTED}
            assert err.code() in refused | (set() if unary else {grpc.StatusCode.INTERNAL}), (method, err)
            assert grown < 40, f"{method}: the server grew by {grown:.0f} MB for a refused message"
        assert await sink.length(b"still serving") == 13
        await c.kill(sink)


async def test_a_token_holder_cannot_send_one_message_over_the_servers_bound(cluster: ProcCluster) -> None:
    """With the token, a single message over the bound is refused with RESOURCE_EXHAUSTED at
    the master (4 MiB) and at a host (one chunk plus headroom); both keep serving."""
    async with cluster.connect() as c:
        sink = await Sink.remote()
        err = await _send_raw(
            cluster.address, "/actorrt.v1.Master/GetClusterStatus", bytes(_rpc.MASTER_MAX_RECEIVE + 1), c.token, True
        )
        assert err.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        big = pb.CallBatch(calls=[pb.Call(seq=1, method="length")]).SerializeToString() + bytes(_rpc.HOST_MAX_RECEIVE)
        err = await _send_raw(sink._conn.endpoint, "/actorrt.v1.ActorHost/Calls", big, c.token, False)
        assert err.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert await sink.length(b"abc") == 3
        assert (await c.status()).address == cluster.address
        await c.kill(sink)


@pytest.mark.parametrize("shm", ["1", "0"])
async def test_messages_larger_than_a_hosts_bound_arrive_split(
    cluster: ProcCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, shm: str
) -> None:
    """What used to go as one large message still works, split in chunks: a 24 MB constructor
    argument with 10 MB of shipped files, a 20 MB pickle with no out-of-band buffer, many small
    out-of-band buffers, and a burst of calls that batch beyond the bound."""
    monkeypatch.setenv("ACTORRT_SHM", shm)
    monkeypatch.chdir(tmp_path)
    Path("weights.bin").write_bytes(os.urandom(10 * MIB))
    blob = os.urandom(24 * MIB)
    async with cluster.connect(files=["weights.bin"]) as c:
        sink = await Sink.remote(blob, ("weights.bin",))
        assert sink._conn.shm == (shm == "1")
        assert await sink.sizes() == (24 * MIB, {"weights.bin": 10 * MIB})
        pickled = bytes(20 * MIB)  # bytes pickle inline: no out-of-band buffer
        assert await sink.length(pickled) == 20 * MIB
        assert len(await sink.echo(pickled)) == 20 * MIB
        small = [np.full(900_000, i % 256, dtype=np.uint8) for i in range(12)]  # each under the shm threshold
        back = await sink.echo(small)
        assert all(np.array_equal(a, b) for a, b in zip(back, small, strict=True))
        burst = [sink.length(bytes(300_000)) for _ in range(60)]  # ~18 MB queued behind each other
        assert await asyncio.gather(*burst) == [300_000] * 60
        await c.kill(sink)


async def test_a_split_message_interrupted_or_garbled_is_refused_and_the_actor_lives_on(cluster: ProcCluster) -> None:
    async with cluster.connect() as c:
        sink = await Sink.remote()
        for tail in (
            [pb.CallBatch(calls=[pb.Call(seq=1, method="length")]).SerializeToString()],  # not a chunk
            list(_wire.chunks(_wire.CALL_CHUNK, [memoryview(b"\xff" * 10)])),  # does not parse
        ):
            channel = _rpc.open_channel(sink._conn.endpoint, c.tls)
            call = channel.stream_stream(
                "/actorrt.v1.ActorHost/Calls",
                request_serializer=_wire.passthrough,
                response_deserializer=pb.ReplyBatch.FromString,
            )(metadata=_rpc.auth_metadata(c.token))
            await call.write(pb.CallBatch(attach=pb.AttachActor(version=_rpc.PROTOCOL_VERSION, actor_id=sink.actor_id)))
            answer = await call.read()  # attaching is answered (reply seq 0), as constructing is
            assert isinstance(answer, pb.ReplyBatch) and answer.replies[0].seq == 0
            await call.write(_wire.split(b"x" * 10)[0])
            for message in tail:
                await call.write(message)
            with pytest.raises(grpc.aio.AioRpcError) as info:
                await call.read()
            assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
            assert "split message" in (info.value.details() or "")
            await channel.close()
        assert await sink.length(b"alive") == 5
        await c.kill(sink)


def test_split_and_joiner_round_trip() -> None:
    batch = pb.CallBatch(calls=[pb.Call(seq=i, method="m", args={"pickle": bytes(1000)}) for i in range(50)])
    encoded = batch.SerializeToString()
    messages = _wire.split(encoded, size=4096)
    assert len(messages) == 1 + -(-len(encoded) // 4096)
    assert pb.CallBatch.FromString(messages[0]).split_bytes == len(encoded)
    joiner = _wire.Joiner(pb.CallBatch.FromString)
    fed = [joiner.feed(pb.CallBatch.FromString(messages[0]))]
    fed += [joiner.feed(_wire.chunk_data(m, _wire.CALL_CHUNK)) for m in messages[1:]]
    assert fed[:-1] == [None] * (len(messages) - 1) and fed[-1] == batch
    chunk = _wire.chunk_data(next(_wire.chunks(_wire.CALL_CHUNK, [memoryview(b"ab")])), _wire.CALL_CHUNK)
    assert joiner.feed(chunk) is chunk  # no split open: a streamed payload's chunk passes through
    assert _wire.bounded(b"small", 10) == [b"small"]
