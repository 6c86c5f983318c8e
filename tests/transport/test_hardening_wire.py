"""Hardening of the servers' boundary: bounded receives, refusals that read nothing and log
little, and large messages that still get through as chunks. Real master, workers and hosts."""

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


async def test_refusals_are_logged_rarely_short_and_escaped(cluster: ProcCluster) -> None:
    """300 refused RPCs whose method paths carry ~7 KB with terminal escapes leave at most the
    rate limit's lines in the master's log, each short, with the escapes escaped."""
    log_path = cluster.home / "proc-0.log"
    before = log_path.stat().st_size
    path = "/actorrt.v1.Master/\x1b[2J\x1b]0;owned\x07" + "A" * 7000
    options = [("grpc.max_send_message_length", -1)]
    async with grpc.aio.insecure_channel(cluster.address, options=options) as channel:
        for _ in range(300):
            with pytest.raises(grpc.aio.AioRpcError) as info:
                await channel.unary_unary(path, request_serializer=_ident, response_deserializer=_ident)(
                    b"", timeout=10
                )
            assert info.value.code() == grpc.StatusCode.UNAUTHENTICATED
    await asyncio.sleep(0.5)
    with open(log_path, "rb") as f:
        f.seek(before)
        new = f.read()
    refusals = [line for line in new.splitlines() if b"refused" in line]
    assert 1 <= len(refusals) <= _rpc.REFUSALS_LOGGED_PER_MIN, refusals[:3]
    assert len(new) < 10_000, f"{len(new)} bytes of log for 300 refusals"
    assert b"\x1b" not in new and b"\x07" not in new
    assert all(len(line) < 600 for line in refusals)
    assert b"\\x1b[2J" in refusals[0] and b"more characters" in refusals[0]


def test_printable_escapes_controls_and_cuts() -> None:
    assert _rpc.printable("/a\nb\x1b[0m") == "/a\\nb\\x1b[0m"
    assert _rpc.printable("x" * 250, limit=10) == "x" * 10 + "...[240 more characters]"
    assert _rpc.printable(b"\xff/m") == "\\\\xff/m"


def test_the_refusal_log_counts_what_it_suppressed(caplog: pytest.LogCaptureFixture) -> None:
    now = [0.0]
    limited = _rpc.RateLimitedLog(burst=2, period_s=60, clock=lambda: now[0])
    with caplog.at_level("WARNING", logger="actorrt"):
        assert [limited.warning("refused %s", i) for i in range(5)] == [True, True, False, False, False]
        now[0] = 61
        assert limited.warning("refused %s", 5)
    assert [r.getMessage() for r in caplog.records] == [
        "refused 0",
        "refused 1",
        "refused 5 (3 similar lines suppressed before this one)",
    ]


_EXITING_SCRIPT = """
import sys, actorrt
@actorrt.remote_class
class Quitter:
    def ok(self): return 1
    def quit(self, code): sys.exit(code)
    async def aquit(self): sys.exit()
with actorrt.connect(num_cpus=1) as c:
    a = Quitter.remote().result()
    first, quitting, after = a.ok(), a.quit(3), a.ok()
    print("first", first.result())
    for f in (quitting, after):
        try:
            f.result()
        except actorrt.ActorDiedError as e:
            print("died:", e.cause)
    b = Quitter.remote().result()
    try:
        b.aquit().result()
    except actorrt.ActorDiedError as e:
        print("died:", e.cause)
    print("free", c.status().result().slots_free)
"""


def test_sys_exit_in_a_method_ends_the_actor_with_its_exit_code_as_the_cause(tmp_path: Path) -> None:
    """The call made before is answered; the exiting call and the one after fail with
    ActorDiedError naming the method and the exit code; the driver prints no asyncio noise."""
    import subprocess
    import sys

    script = tmp_path / "quit.py"
    script.write_text(_EXITING_SCRIPT)
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == "first 1"
    assert lines[1] == lines[2] == "died: Quitter.quit called sys.exit(3): the actor exited with code 3"
    assert lines[3] == "died: Quitter.aquit called sys.exit(None): the actor exited with code 0"
    assert lines[4] == "free 1"
    assert "never retrieved" not in out.stderr and "Traceback" not in out.stderr, out.stderr


_QUEUEING_CLIENT = """
import sys, time, numpy as np, actorrt
@actorrt.remote_class
class Slow:
    def nap(self, s):
        time.sleep(s)
    def take(self, x):
        return x.nbytes
with actorrt.connect(sys.argv[1], token=sys.argv[2]) as c:
    s = Slow.remote().result()
    s.nap(3)  # the host reads nothing more while this runs
    pending = [s.take(np.ones(4 << 20, dtype=np.uint8)) for _ in range(48)]
    time.sleep(0.5)
    print("queued", flush=True)
    time.sleep(60)
"""


@pytest.mark.timeout(90)
def test_a_client_killed_with_large_calls_queued_leaves_no_shared_memory(cluster: ProcCluster, tmp_path: Path) -> None:
    """48 calls of 4 MiB each are written into the client's /dev/shm segments, most never read by
    the busy host; the client is SIGKILLed. Its segments are gone within seconds of the host
    seeing its stream end (they stayed forever before)."""
    import signal
    import subprocess
    import sys
    import time

    from tests.conftest import wait_until

    script = tmp_path / "client.py"
    script.write_text(_QUEUEING_CLIENT)
    proc = subprocess.Popen(
        [sys.executable, str(script), cluster.address, cluster.token], stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "queued"

        def files() -> list[Path]:
            return list(Path("/dev/shm").glob(f"actorrt-{proc.pid}-*"))

        assert len(files()) >= 40, "the client should have its calls' segments written"
        killed = time.monotonic()
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        assert wait_until(lambda: not files(), 20), f"{len(files())} segments of the dead client left"
        print(f"segments gone {time.monotonic() - killed:.1f}s after the kill")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_probe_owner_and_alive_tell_a_dead_client_from_a_live_one() -> None:
    import subprocess
    import sys

    from actorrt.transport import shm as _shm

    probe = _shm.make_probe()
    assert probe is not None
    try:
        assert _shm.probe_owner(probe) == os.getpid()
    finally:
        _shm.unlink([probe])
    other = _shm.write(memoryview(b"actorrt shared memory probe pid:[1]"))  # another pid namespace
    try:
        assert _shm.check_probe(other) and _shm.probe_owner(other) is None
    finally:
        _shm.unlink([other])
    assert _shm.alive(os.getpid())
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    from tests.conftest import wait_until

    assert wait_until(lambda: not _shm.alive(child.pid), 10)  # a zombie is gone already
    child.wait()
    assert not _shm.alive(child.pid)
