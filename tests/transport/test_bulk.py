"""The bulk side channel (``actorrt.transport.bulk``): large payloads between processes that do not
share /dev/shm (``ACTORRT_SHM=0`` here) travel on a TCP connection beside the Calls stream.
Strangers on its port are refused and the actor lives on; a payload over the actor's limit is
read off and refused; a broken connection falls back to chunks on the stream; TLS clusters
use one TLS connection per direction. Integrity across sizes, dtypes, cancellation and a peer
killed mid-transfer is tests/transport/test_payload_paths.py's, run on both paths."""

from __future__ import annotations

import asyncio
import contextlib
import os
import pickle
import select
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import actorrt
from actorrt.client import bulk_links as _bulk_links
from actorrt.transport import bulk as _bulk
from tests.conftest import ProcCluster

MIB = 1 << 20


@actorrt.remote_class
class Store:
    def __init__(self) -> None:
        self.kept: list[Any] = []

    @property
    def mode(self) -> str:
        return "plain"

    @mode.setter
    def mode(self, value: str) -> None:
        raise ValueError(f"no mode {value!r}")

    def keep(self, x: np.ndarray) -> int:
        self.kept.append(x)
        return int(x.nbytes)

    def make(self, n: int) -> np.ndarray:
        return np.arange(n, dtype=np.uint8)

    def echo(self, x: Any) -> Any:
        return x

    def ping(self) -> str:
        return "pong"

    def pid(self) -> int:
        return os.getpid()

    def slowly(self, x: np.ndarray, seconds: float) -> int:
        time.sleep(seconds)
        return int(x.nbytes)


@pytest.fixture(autouse=True)
def no_shared_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    """As between two machines: large payloads take the socket, here the bulk connection."""
    monkeypatch.setenv("ACTORRT_SHM", "0")


async def bulk_up(handle: Any, timeout_s: float = 10.0) -> _bulk.Link:
    """The handle's bulk connection, once the client opened it (it opens beside the stream)."""
    deadline = time.monotonic() + timeout_s
    while (link := handle._conn.bulk_links.latest) is None:
        assert time.monotonic() < deadline, "the bulk connection did not open"
        await asyncio.sleep(0.01)
    return link


async def test_large_payloads_take_the_bulk_connection_both_ways(cluster: ProcCluster) -> None:
    async with cluster.connect() as c:
        s = await Store.remote()
        link = await bulk_up(s)
        assert link.send_sock is link.recv_sock  # plaintext: one socket both ways
        out0, in0 = link.bytes_out, link.bytes_in
        big = np.arange(24 * MIB // 8, dtype=np.int64)
        assert await s.keep(big) == 24 * MIB
        assert link.bytes_out - out0 >= 24 * MIB  # the buffer went beside the stream
        got = await s.make(20 * MIB + 7)
        assert link.bytes_in - in0 >= 20 * MIB and got.flags.writeable
        assert np.array_equal(got, np.arange(20 * MIB + 7, dtype=np.uint8))
        # many at once, both ways, answered in any order: each frame finds its call
        sizes = [MIB + i * 4099 for i in range(12)]
        back = await asyncio.gather(*(s.echo(np.full(n, i, np.uint8)) for i, n in enumerate(sizes)))
        for i, (n, b) in enumerate(zip(sizes, back, strict=True)):
            assert b.nbytes == n and int(b[0]) == i and int(b[-1]) == i
        # small calls are untouched by it
        assert await s.ping() == "pong"
        await c.kill(s)


def _memory(pid: int, field: str = "VmRSS") -> int:
    """The process's resident set (``VmRSS``), or its peak so far (``VmHWM``), in bytes."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no {field} for {pid}")


async def test_large_calls_pipelined_to_a_slow_actor_wait_in_the_client_not_the_actor(
    cluster: ProcCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The host reads its bulk connection as fast as frames come and keeps those its actor has
    not run yet: 24 calls of 64 MiB made at once to an actor that takes 0.2 s each put 1.5 GiB
    in the actor's process, which a memory limit would kill. Past ``BULK_UNANSWERED_MAX``
    unanswered on the bulk connection, arguments stream on the Calls stream instead, whose flow
    control keeps them in the caller until the host reads them."""
    monkeypatch.setattr(_bulk_links, "BULK_UNANSWERED_MAX", 256 * MIB)
    async with cluster.connect(max_payload_mb=128) as c:
        s = await Store.remote()
        link = await bulk_up(s)
        pid = await s.pid()
        before, out0 = _memory(pid, "VmHWM"), link.bytes_out
        x = np.ones(64 * MIB, np.uint8)
        futures = [s.slowly(x, 0.2) for _ in range(24)]
        assert s._conn.bulk_links.unanswered <= (256 + 64) * MIB
        assert await asyncio.gather(*futures) == [64 * MIB] * 24
        grew = _memory(pid, "VmHWM") - before
        on_bulk = link.bytes_out - out0
        print(
            f"\nthe actor's peak RSS grew {grew / MIB:.0f} MiB; {on_bulk / MIB:.0f} MiB of 1536 went on the bulk link"
        )
        assert grew < 700 * MIB, grew  # 1.5 GiB before
        assert 4 * 64 * MIB <= on_bulk < 24 * 64 * MIB  # the first on it, the rest on the stream
        assert s._conn.bulk_links.unanswered == 0 and not s._conn.bulk_links.waiting
        assert await s.keep(x) == 64 * MIB and link.bytes_out - out0 - on_bulk >= 64 * MIB  # on it again
        await c.kill(s)


async def test_a_frame_whose_call_failed_before_leaving_is_let_go_by_the_host(cluster: ProcCluster) -> None:
    """A call whose buffers were already on the bulk connection, then failed in the client (a
    failed attribute assignment fails the next call there) never sent its header: the host kept
    its 256 MiB frame until the stream ended. The client now tells it to let the frame go. And
    the host's reader thread kept the last frame it read (its locals) until the next came."""

    async def back_to(before: int) -> None:
        deadline = time.monotonic() + 10
        while _memory(pid) - before > 64 * MIB:
            assert time.monotonic() < deadline, f"the host still holds {(_memory(pid) - before) / MIB:.0f} MiB"
            await asyncio.sleep(0.05)

    async with cluster.connect(max_payload_mb=512) as c:
        s = await Store.remote()
        link = await bulk_up(s)
        pid = await s.pid()
        before = _memory(pid)
        assert await s.slowly(np.ones(256 * MIB, np.uint8), 0.0) == 256 * MIB  # used, not kept
        await back_to(before)
        s.mode = "fast"  # the setter raises there: the handle's next call fails with it
        deadline = time.monotonic() + 10
        while s._conn.set_attr_error is None:
            assert time.monotonic() < deadline, "the failed assignment was never answered"
            await asyncio.sleep(0.01)
        before, out0 = _memory(pid), link.bytes_out
        with pytest.raises(actorrt.RemoteError, match="no mode 'fast'"):
            await s.keep(np.ones(256 * MIB, np.uint8))
        assert link.bytes_out - out0 >= 256 * MIB  # its buffers had gone on the bulk connection
        assert s._conn.bulk_links.unanswered == 0
        await back_to(before)
        assert await s.keep(np.ones(MIB, np.uint8)) == MIB  # the stream and its link go on
        await c.kill(s)


async def test_a_frame_dropped_before_its_connection_opened_is_let_go_once_it_is_open() -> None:
    """The client may send a frame, and then ``dropped_frames`` for it, before the host's loop
    has handed it the connection (the handshake answers first): the drop was ignored and the
    frame kept until the stream ended."""
    loop = asyncio.get_running_loop()
    server = _bulk.Server("127.0.0.1", loop, None)
    links = _bulk.StreamLinks(server, loop, 0, "test")
    offer = links.offer()
    assert offer is not None
    links.drop(1, 7)  # connection 1 is not open yet
    send_sock, recv_sock = await loop.run_in_executor(None, _bulk.connect, "127.0.0.1:0", offer[0], offer[1], None)
    client = _bulk.Link(send_sock, recv_sock, loop, 0, "client")
    try:
        assert client.send(7, [memoryview(b"x" * 4096)]) and client.send(8, [memoryview(b"y" * 16)])
        got = await asyncio.wait_for(links.take(1, 8), 10)  # frames come in order: 7 came first
        assert got is not None and [bytes(b) for b in got] == [b"y" * 16]
        host = links.current
        assert host is not None and host._arrived == {} and host._dropped == set()
    finally:
        client.close()
        links.close()
        server.close()


async def test_with_bulk_off_large_payloads_stream_in_chunks(
    cluster: ProcCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ACTORRT_BULK", "0")
    async with cluster.connect() as c:
        s = await Store.remote()
        got = await s.echo(np.arange(3 * MIB, dtype=np.uint8))
        assert np.array_equal(got, np.arange(3 * MIB, dtype=np.uint8))
        assert s._conn.bulk_links.latest is None and s._conn.bulk_links.port  # offered, not taken
        await c.kill(s)


def _refused(port: int, hello: bytes) -> bool:
    """Whether the host closes a connection that says ``hello`` without answering OK."""
    with socket.create_connection(("127.0.0.1", port), timeout=15) as sock:
        sock.sendall(hello)
        try:
            return sock.recv(1) == b""
        except ConnectionResetError:
            return True


async def test_strangers_on_the_bulk_port_are_refused_and_the_actor_lives_on(cluster: ProcCluster) -> None:
    async with cluster.connect() as c:
        s = await Store.remote()
        await bulk_up(s)
        port = s._conn.bulk_links.port
        hellos = [
            b"GET / HTTP/1.1\r\nHost: x\r\n\r\n" + b"x" * 64,  # not ours
            _bulk.MAGIC + b"\0" * _bulk.KEY_BYTES + _bulk.BOTH,  # a key never offered
            _bulk.MAGIC + b"k" * (_bulk.KEY_BYTES - 1),  # cut short, then closed below
        ]
        for hello in hellos[:2]:
            assert await asyncio.to_thread(_refused, port, hello)
        with socket.create_connection(("127.0.0.1", port)) as sock:
            sock.sendall(hellos[2])
        # a silent connection holds one handshake slot for HANDSHAKE_S at most, nothing else
        silent = socket.create_connection(("127.0.0.1", port))
        try:
            big = np.ones(8 * MIB, np.uint8)
            assert await s.keep(big) == 8 * MIB
            assert (await s.make(8 * MIB)).nbytes == 8 * MIB
            assert s._conn.bulk_links.latest is not None and not s._conn.bulk_links.latest.closed
        finally:
            silent.close()
        await c.kill(s)


class _SlowHellos:
    """``n`` connections to a bulk port that each send the hello one byte every ``every_s``
    (a thread), noting when the host closed each one."""

    def __init__(self, port: int, n: int, every_s: float) -> None:
        self.socks = [socket.create_connection(("127.0.0.1", port), timeout=5) for _ in range(n)]
        self.opened = time.monotonic()
        self.closed_at: dict[int, float] = {}
        self.every_s = every_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._dribble, name="slow-hellos", daemon=True)
        self._thread.start()

    def _dribble(self) -> None:
        hello = _bulk.MAGIC + b"k" * _bulk.KEY_BYTES + _bulk.BOTH
        sent = 0
        next_byte = time.monotonic()
        while not self._stop.is_set():
            now = time.monotonic()
            if now >= next_byte and sent < len(hello):
                for i, sock in enumerate(self.socks):
                    if i not in self.closed_at:
                        with contextlib.suppress(OSError):
                            sock.sendall(hello[sent : sent + 1])
                sent, next_byte = sent + 1, now + self.every_s
            open_ = [sock for i, sock in enumerate(self.socks) if i not in self.closed_at]
            readable, _, _ = select.select(open_, [], [], 0.05) if open_ else ([], [], [])
            for sock in readable:
                try:
                    ended = sock.recv(1) == b""
                except OSError:
                    ended = True
                if ended:
                    self.closed_at[self.socks.index(sock)] = time.monotonic() - self.opened

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)
        for sock in self.socks:
            sock.close()


async def test_slow_hellos_are_cut_at_the_handshake_deadline_and_a_stream_attaching_meanwhile_gets_its_channel(
    cluster: ProcCluster,
) -> None:
    """64 connections that send the hello one byte every 3 s: the 10 s bound was per read, so
    all 64 handshake slots were still held at 18 s (a 32-byte hello could last ~5 minutes), and
    a stream that attached meanwhile was refused its bulk connection (closed at once) and never
    asked again. Each handshake now has 10 s from its accept; one more than 64 cuts the oldest."""
    async with cluster.connect() as c:
        s = await Store.options(name="bulk-under-attack").remote()
        await bulk_up(s)
        port = s._conn.bulk_links.port
        attack = _SlowHellos(port, _bulk.MAX_HANDSHAKES, every_s=3.0)
        try:
            await asyncio.sleep(1.0)  # every handshake slot is taken by then
            async with cluster.connect() as other:
                theirs = await other.get_actor("bulk-under-attack")
                assert await theirs.ping() == "pong"
                link = await bulk_up(theirs, timeout_s=_bulk.HANDSHAKE_S + 8)
                assert await theirs.keep(np.ones(8 * MIB, np.uint8)) == 8 * MIB
                assert link.bytes_out >= 8 * MIB  # on its bulk connection
                opened_at = time.monotonic() - attack.opened
                deadline = time.monotonic() + _bulk.HANDSHAKE_S + 5
                while len(attack.closed_at) < len(attack.socks) and time.monotonic() < deadline:
                    await asyncio.sleep(0.1)
                late = sorted(attack.closed_at.values())
                print(
                    f"\nthe attaching stream's bulk connection opened {opened_at:.1f} s into the attack; "
                    f"{len(late)} of {len(attack.socks)} slow hellos closed, the last at {late[-1] if late else -1:.1f} s"
                )
                assert len(late) == len(attack.socks), f"{len(attack.socks) - len(late)} slow hellos still held"
                assert late[-1] < _bulk.HANDSHAKE_S + 2, late[-5:]
        finally:
            attack.close()
        assert await s.keep(np.ones(8 * MIB, np.uint8)) == 8 * MIB  # the first stream's link lives on
        await c.kill(s)


async def test_a_bulk_connection_that_could_not_be_opened_is_asked_for_again(
    cluster: ProcCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first open fails as one refused by a full listener does (a reset): before, the
    stream never asked again, and its large payloads went in chunks on gRPC for its life."""
    real = _bulk.connect
    tries: list[float] = []

    def flaky(*args: Any, **kwargs: Any) -> tuple[socket.socket, socket.socket]:
        tries.append(time.monotonic())
        if len(tries) == 1:
            raise ConnectionResetError(104, "Connection reset by peer")
        return real(*args, **kwargs)

    monkeypatch.setattr(_bulk, "connect", flaky)
    async with cluster.connect() as c:
        s = await Store.remote()
        link = await bulk_up(s)
        assert len(tries) == 2 and tries[1] - tries[0] >= _bulk_links.REOPEN_FIRST_S * 0.9
        assert link.epoch == 2 and s._conn.bulk_links.reopens == 1  # a second offer, taken
        assert await s.keep(np.ones(8 * MIB, np.uint8)) == 8 * MIB and link.bytes_out >= 8 * MIB
        await c.kill(s)


async def test_arguments_over_the_actors_limit_are_read_off_and_refused(cluster: ProcCluster) -> None:
    """The creator's limit (4 MiB) is the actor's. A client speaking the protocol by hand sends
    16 MiB on the bulk connection anyway: the host reads the frame off, refuses that call with
    the size error, and serves the next ones on the same stream and connection."""
    from actorrt.transport import codec as _codec
    from actorrt.transport import rpc as _rpc
    from actorrt.transport import wire as _wire
    from actorrt.v1 import actor_host_pb2 as pb

    async with cluster.connect(max_payload_mb=4) as c:
        s = await Store.remote()
        channel = _rpc.open_channel(s._conn.endpoint, c.tls)
        call = channel.stream_stream(
            "/actorrt.v1.ActorHost/Calls",
            request_serializer=_wire.passthrough,
            response_deserializer=pb.ReplyBatch.FromString,
        )(metadata=_rpc.auth_metadata(c.token))
        await call.write(pb.CallBatch(attach=pb.AttachActor(version=_rpc.PROTOCOL_VERSION, actor_id=s.actor_id)))
        answer = await call.read()
        assert isinstance(answer, pb.ReplyBatch) and answer.bulk_port and len(answer.bulk_key) == _bulk.KEY_BYTES
        send_sock, recv_sock = await asyncio.to_thread(
            _bulk.connect, s._conn.endpoint, answer.bulk_port, answer.bulk_key, None
        )
        link = _bulk.Link(send_sock, recv_sock, asyncio.get_running_loop(), 0, "test")
        try:
            for seq, nbytes in [(1, 16 * MIB), (2, 2 * MIB)]:
                encoded = _codec.encode(((np.ones(nbytes, np.uint8),), {}))
                assert link.send(seq, encoded.streamed)
                encoded.payload.bulk = 1  # the first bulk connection of the stream
                batch = pb.CallBatch()
                batch.calls.add(seq=seq, method="keep", kind=pb.CALL_KIND_METHOD, args=encoded.payload)
                await call.write(batch)
                answered = await call.read()
                assert isinstance(answered, pb.ReplyBatch)
                reply = answered.replies[0]
                if seq == 1:
                    assert "over the limit of 4.0 MiB" in reply.error.message
                else:
                    assert pickle.loads(reply.value.pickle) == 2 * MIB
            assert not link.closed  # the refused frame was read off: the next one was found
        finally:
            link.close()
            call.cancel()
            await channel.close()
        # the key worked once: it opens no second connection
        assert await asyncio.to_thread(_refused, answer.bulk_port, _bulk.MAGIC + answer.bulk_key + _bulk.BOTH)
        assert await s.keep(np.ones(3 * MIB, np.uint8)) == 3 * MIB
        await c.kill(s)


async def test_a_broken_bulk_connection_falls_back_to_chunks_then_opens_again(cluster: ProcCluster) -> None:
    async with cluster.connect() as c:
        s = await Store.remote()
        first = await bulk_up(s)
        assert first.epoch == 1
        first.close()  # as if the network cut it
        name = f"actorrt-bulk-{s.actor_id}"
        deadline = time.monotonic() + 10
        while first._reader.is_alive():  # its reader thread ends
            assert time.monotonic() < deadline
            await asyncio.sleep(0.01)
        outcomes = []
        for i in range(4):  # at once: before the client asks for another connection (0.5 s)
            try:
                got = await s.echo(np.full(3 * MIB, i, np.uint8))
                outcomes.append(got.nbytes == 3 * MIB and int(got[-1]) == i)
            except actorrt.ActorDiedError as e:  # a reply that raced the break is lost, and says so
                assert "lost" in str(e)
                outcomes.append(False)
        assert all(outcomes[2:]), outcomes  # the host noticed by then: chunks both ways
        # the client asks for a new connection; the host offers one (number 2) and it opens
        deadline = time.monotonic() + 10
        while (second := s._conn.bulk_links.latest) is first or second is None:
            assert time.monotonic() < deadline, "no second bulk connection"
            await asyncio.sleep(0.05)
        assert second.epoch == 2 and not second.closed
        got = await s.echo(np.full(5 * MIB, 9, np.uint8))
        assert got.nbytes == 5 * MIB and int(got[0]) == 9
        assert second.bytes_out >= 5 * MIB and second.bytes_in >= 5 * MIB  # on it, both ways
        assert sum(t.name == name and t.is_alive() for t in threading.enumerate()) == 1
        assert await s.ping() == "pong"
        await c.kill(s)


async def test_a_payload_of_more_buffers_than_a_frame_carries_goes_in_chunks(cluster: ProcCluster) -> None:
    """Every numpy array is an out-of-band buffer: 70,000 small ones made a frame the reader
    refuses (over 65,536 buffers), which broke the connection and lost the call, every time."""
    async with cluster.connect() as c:
        s = await Store.remote()
        link = await bulk_up(s)
        many = [np.full(16, i % 251, np.uint8) for i in range(_bulk.MAX_BUFFERS + 4_464)]  # 1.1 MB in all
        back = await s.echo(many)
        assert len(back) == len(many) and all(int(b[0]) == i % 251 for i, b in enumerate(back))
        assert s._conn.bulk_links.latest is link and not link.closed  # sent in chunks; the connection lives on
        got = await s.echo(np.full(3 * MIB, 7, np.uint8))
        assert int(got[-1]) == 7 and link.bytes_out >= 3 * MIB
        await c.kill(s)


def _link_pair(loop: asyncio.AbstractEventLoop) -> tuple[_bulk.Link, _bulk.Link]:
    a, b = socket.socketpair()
    for sock in (a, b):
        sock.settimeout(_bulk.SEND_STALL_S)
    return _bulk.Link(a, a, loop, 0, "a"), _bulk.Link(b, b, loop, 0, "b")


async def test_a_frame_there_is_no_memory_for_fails_alone_and_the_link_lives_on(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A MemoryError making a frame's buffers escaped the reader thread: the link never said it
    ended, so every call waiting on it (and the host's whole stream) waited forever."""
    fresh = _bulk._fresh

    def no_memory_for_big(n: int) -> Any:
        if n >= 2 * MIB:
            raise MemoryError
        return fresh(n)

    monkeypatch.setattr(_bulk, "_fresh", no_memory_for_big)
    sender, receiver = _link_pair(asyncio.get_running_loop())
    try:
        big, small = np.full(3 * MIB, 1, np.uint8), np.full(MIB, 2, np.uint8)
        assert await asyncio.to_thread(sender.send, 1, [big.data])
        assert await asyncio.to_thread(sender.send, 2, [small.data])
        with pytest.raises(_bulk.BulkError, match="no memory for a bulk payload of 3145728 bytes"):
            await asyncio.wait_for(receiver.take(1), 10)
        [got] = await asyncio.wait_for(receiver.take(2), 10) or [None]
        assert bytes(got) == small.tobytes() and not receiver.closed
    finally:
        sender.close()
        receiver.close()


_NO_DESCRIPTORS = """
import asyncio, resource, socket, sys
from actorrt.transport import bulk as _bulk

async def main() -> None:
    server = _bulk.Server("127.0.0.1", asyncio.get_running_loop(), None)
    resource.setrlimit(resource.RLIMIT_NOFILE, (64, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
    hog = []
    try:
        while True:
            hog.append(socket.socket())
    except OSError:
        pass
    print(server.port, flush=True)  # every descriptor taken: accepting fails (EMFILE)
    sys.stdin.readline()  # the test connected meanwhile
    for sock in hog:
        sock.close()
    print("freed", flush=True)
    sys.stdin.readline()
    server.close()

asyncio.run(main())
"""


def test_a_failed_accept_leaves_the_bulk_listener_listening() -> None:
    """An accept that fails (no file descriptor left; a connection reset before it was
    accepted) ended the listener's thread and closed its port: the host's bulk channel was off
    for the rest of its life. It tries again; only ``close`` ends it."""
    proc = subprocess.Popen(
        [sys.executable, "-c", _NO_DESCRIPTORS],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])},
    )
    assert proc.stdin is not None and proc.stdout is not None
    try:
        port = int(proc.stdout.readline())
        first = socket.create_connection(("127.0.0.1", port), timeout=5)  # the kernel's backlog takes it
        time.sleep(0.5)  # the listener's accept fails meanwhile, again and again
        proc.stdin.write("\n")
        proc.stdin.flush()
        assert proc.stdout.readline().strip() == "freed"
        first.close()
        second = socket.create_connection(("127.0.0.1", port), timeout=5)  # refused before: the port was closed
        second.sendall(b"not the handshake" + bytes(64))
        try:
            assert second.recv(16) == b""  # accepted, read and refused: the listener lives
        except ConnectionResetError:  # refused with its bytes unread: the same
            pass
        second.close()
        proc.stdin.write("\n")
        proc.stdin.flush()
        assert proc.wait(10) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_a_slow_but_moving_send_is_not_cut_off_by_the_stall_timeout() -> None:
    """The socket's timeout is meant as "no progress for that long"; a plain socket's sendall
    applies it to the whole call, so a transfer slower than 60 s broke the link while its bytes
    still flowed. Here: a 1 s timeout, a reader that takes ~2.4 s to drain 6 MiB."""
    a, b = socket.socketpair()
    a.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 64 * 1024)
    b.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
    a.settimeout(1.0)
    got = bytearray()

    def slow_reader() -> None:
        while len(got) < 6 * MIB:
            chunk = b.recv(256 * 1024)
            if not chunk:
                return
            got.extend(chunk)
            time.sleep(0.1)

    reader = threading.Thread(target=slow_reader)
    reader.start()
    try:
        data = np.arange(6 * MIB, dtype=np.uint8)
        t0 = time.monotonic()
        _bulk._send_all(a, data.data)
        took = time.monotonic() - t0
        reader.join(10)
        assert bytes(got) == data.tobytes()
        assert took > 1.5, took  # longer than the timeout: sendall would have raised
    finally:
        a.close()
        b.close()


async def test_the_bulk_connection_keeps_mutual_tls(tmp_path: Path) -> None:
    from tests.transport.test_security import make_pki, mutual_tls_client, start_mutual_tls

    pki = make_pki(tmp_path / "pki")
    c = start_mutual_tls(tmp_path / "home", pki)
    try:
        async with actorrt.connect(c.address, token=c.token, **mutual_tls_client(pki)):
            s = await Store.remote()
            link = await bulk_up(s)
            assert link.send_sock is not link.recv_sock  # TLS: one connection per direction
            assert await s.keep(np.ones(12 * MIB, np.uint8)) == 12 * MIB
            got = await s.make(12 * MIB)
            assert np.array_equal(got, np.arange(12 * MIB, dtype=np.uint8))
            assert link.bytes_out >= 12 * MIB and link.bytes_in >= 12 * MIB
            # plaintext on its port is not served: the TLS handshake fails, the actor lives on
            assert await asyncio.to_thread(_refused, s._conn.bulk_links.port, _bulk.MAGIC + b"\0" * 17)
            assert await s.ping() == "pong"
            await actorrt.kill(s)
    finally:
        c.stop()


_SENDER = """
import sys, numpy as np, actorrt
with actorrt.connect(sys.argv[1], token=sys.argv[2]) as c:
    sink = actorrt.get_actor(sys.argv[3]).result()
    big = np.ones(256 << 20, np.uint8)
    while True:
        print("sending", flush=True)
        sink.keep(big).result()
"""


def _threads(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/task"))


async def test_a_client_killed_while_it_sends_leaves_the_host_as_it_was(cluster: ProcCluster) -> None:
    """Another client attaches to a named actor and sends 256 MiB payloads on its own bulk
    connection; it is SIGKILLed mid-frame. The host fails that call, ends the stream, closes the
    connection (its reader thread ends: the host's thread count comes back) and serves on."""
    async with cluster.connect() as c:
        s = await Store.options(name="bulk-sink").remote()
        host_pid = await s.pid()
        await bulk_up(s)
        await s.keep(np.ones(2 * MIB, np.uint8))  # its own connection is up and used
        before = _threads(host_pid)
        env = dict(cluster.env, PYTHONPATH=os.getcwd(), ACTORRT_SHM="0")
        proc = subprocess.Popen(
            [sys.executable, "-c", _SENDER, cluster.address, cluster.token, "bulk-sink"],
            stdout=subprocess.PIPE,
            env=env,
        )
        try:
            assert proc.stdout is not None
            for _ in range(2):  # the second frame is on its way once the first was answered
                line = await asyncio.to_thread(proc.stdout.readline)
                assert line == b"sending\n", line
            await asyncio.sleep(0.03)
            assert _threads(host_pid) > before  # its stream and bulk connection are here
        finally:
            proc.kill()
            proc.wait()
        deadline = time.monotonic() + 15
        while _threads(host_pid) > before:
            assert time.monotonic() < deadline, f"the host kept {_threads(host_pid) - before} thread(s)"
            await asyncio.sleep(0.05)
        assert await s.keep(np.ones(8 * MIB, np.uint8)) == 8 * MIB  # on its own connection, as before
        await c.kill(s)
