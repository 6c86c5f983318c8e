"""Streamed payloads: hand-encoded chunk messages parse as protobuf builds them; end to end over
the socket (no shared memory, as between two hosts)."""

from __future__ import annotations

import asyncio
import pickle

import numpy as np
import pytest

import actorrt
from actorrt.host import failures
from actorrt.host.calls import CallStream
from actorrt.host.failures import failure_of
from actorrt.transport import wire as _wire
from actorrt.transport.outbox import BATCH_MAX_BYTES, Outbox
from actorrt.v1 import actor_host_pb2 as pb
from tests.conftest import ProcCluster


def _parts(value: object) -> tuple[bytes, list[memoryview]]:
    buffers: list[pickle.PickleBuffer] = []
    data = pickle.dumps(value, protocol=5, buffer_callback=buffers.append)
    return data, [b.raw() for b in buffers]


@pytest.mark.parametrize("tag,batch", [(_wire.CALL_CHUNK, pb.CallBatch), (_wire.REPLY_CHUNK, pb.ReplyBatch)])
def test_chunks_parse_as_protobuf_chunk_batches_and_decode_without_copy(
    tag: int, batch: type[pb.CallBatch] | type[pb.ReplyBatch]
) -> None:
    _, raws = _parts((np.arange(300_000, dtype=np.float32), np.zeros(5, np.uint8), np.zeros(0, np.uint8)))
    messages = list(_wire.chunks(tag, raws, size=100_000))
    assert len(messages) == 12 + 1  # 1.2 MB in 100 kB pieces, 5 bytes, nothing for the empty one
    joined = b""
    for m in messages:
        view = _wire.chunk_data(m, tag)
        assert view is not None and view.obj is m  # a view into the message: no copy
        assert batch.FromString(m) == batch(chunk=pb.Chunk(data=bytes(view)))
        joined += bytes(view)
    assert joined == b"".join(r.tobytes() for r in raws)
    empty = _wire.chunk_data(batch(chunk=pb.Chunk()).SerializeToString(), tag)
    assert empty is not None and empty.nbytes == 0


def test_chunk_data_tells_chunks_from_batches_and_refuses_malformed_ones() -> None:
    call = pb.CallBatch(calls=[pb.Call(seq=1, method="f")]).SerializeToString()
    assert _wire.chunk_data(call, _wire.CALL_CHUNK) is None
    assert _wire.chunk_data(b"", _wire.CALL_CHUNK) is None
    good = next(_wire.chunks(_wire.CALL_CHUNK, [memoryview(b"abc")]))
    for bad in (good[:-1], good + b"\x01", good[:2], bytes([_wire.CALL_CHUNK]) + b"\xff" * 12):
        with pytest.raises(ValueError, match="malformed"):
            _wire.chunk_data(bad, _wire.CALL_CHUNK)
    both = pb.CallBatch(chunk=pb.Chunk(data=b"x"), released=["s"]).SerializeToString()
    assert _wire.chunk_data(both, _wire.CALL_CHUNK) is None  # protobuf writes `released` first


def test_incoming_fills_buffers_in_order_and_refuses_extra_bytes() -> None:
    incoming = _wire.Incoming([3, 0, 4])
    assert not incoming.add(memoryview(b"ab"))
    assert not incoming.add(memoryview(b"cde"))  # crosses into the third buffer
    assert incoming.add(memoryview(b"fg"))
    assert incoming.buffers == [bytearray(b"abc"), bytearray(), bytearray(b"defg")]
    with pytest.raises(ValueError, match="more chunk data"):
        incoming.add(memoryview(b"h"))
    counting = _wire.Incoming([5], keep=False)
    assert counting.add(memoryview(b"12345")) and counting.buffers == []


def test_passthrough() -> None:
    msg = pb.ReplyBatch(replies=[pb.Reply(seq=7)])
    assert _wire.passthrough(b"x") == b"x"
    assert _wire.passthrough(msg) == msg.SerializeToString()


async def test_an_outbox_batch_leaves_as_it_stands_past_its_byte_bound() -> None:
    """Entries added while a write waits (a slow peer) went into one batch however large: past
    2 GiB protobuf cannot encode it (the client's calls never settled, the host lost its
    stream). Past BATCH_MAX_BYTES the batch is queued and the next entries start another."""
    written: list[pb.ReplyBatch] = []
    gate = asyncio.Event()

    async def write(message: pb.ReplyBatch) -> None:
        written.append(message)
        await gate.wait()

    box: Outbox[pb.ReplyBatch] = Outbox(write, pb.ReplyBatch, "replies")
    box.batch.replies.add(seq=1)
    box.flush()  # in flight until the gate opens
    third = BATCH_MAX_BYTES // 2 - 1
    for seq in range(2, 6):
        box.batch.replies.add(seq=seq)
        box.added(third)
    gate.set()
    await box.drain()
    assert [[r.seq for r in m.replies] for m in written] == [[1], [2, 3, 4], [5]]


class CarryingError(Exception):
    """An exception that keeps what it was raised with (a large array)."""

    def __init__(self, data: np.ndarray) -> None:
        super().__init__(data)
        self.data = data

    def __str__(self) -> str:
        return f"carrying {self.data.nbytes} bytes"


class _GatedContext:
    """A stream's write that waits on a gate, as a slow peer makes it."""

    def __init__(self) -> None:
        self.written: list[pb.ReplyBatch | bytes] = []
        self.gate = asyncio.Event()

    async def write(self, message: pb.ReplyBatch | bytes) -> None:
        self.written.append(message)
        await self.gate.wait()


async def test_error_replies_count_toward_the_batch_bound_and_large_ones_leave_alone() -> None:
    """Error replies (an exception carrying an array) went into the batch uncounted: hundreds
    added while a write waited could pass what protobuf encodes (2 GiB), as values did."""
    ctx = _GatedContext()
    stream = CallStream(None, ctx)  # type: ignore[arg-type]  # replies only: no actor needed
    stream.reply_value(1, "m", None)
    stream.outbox.flush()  # in flight until the gate opens
    for seq in range(2, 32):
        stream.reply_error(seq, CarryingError(np.zeros(3 * MIB, np.uint8)), skip_frames=0)
    stream.reply_error(32, CarryingError(np.zeros(5 * MIB, np.uint8)), skip_frames=0)  # over 4 MiB: alone
    stream.reply_value(33, "m", None)
    ctx.gate.set()
    await stream.outbox.drain()
    batches = [m if isinstance(m, pb.ReplyBatch) else pb.ReplyBatch.FromString(m) for m in ctx.written]
    seqs = [[r.seq for r in b.replies] for b in batches]
    assert [s for b in seqs for s in b] == list(range(1, 34)) and seqs[0] == [1]  # all, in order
    assert [32] in seqs  # alone
    assert len(seqs) >= 4 and all(b.ByteSize() < BATCH_MAX_BYTES + 4 * MIB for b in batches)
    assert all(r.error.exception.ByteSize() > 3 * MIB for b in batches for r in b.replies if r.seq not in (1, 33))


def test_an_error_reply_cuts_what_one_message_cannot_carry(monkeypatch: pytest.MonkeyPatch) -> None:
    """A pickled exception over what one message carries is dropped (type, message and traceback
    still travel, saying so); texts are cut; a ``__str__`` that raises, or text protobuf cannot
    encode, is reported, not raised. The size comes from adding up, never from protobuf: asked
    the size of a 2 GiB message it encodes it to tell, and fails."""
    huge, size = failure_of(CarryingError(np.zeros(2**31 + 1, np.uint8)), skip_frames=0)  # calloc: no pages touched
    assert huge.exception.ByteSize() == 0 and huge.type_name.endswith("CarryingError")
    assert "[the exception pickled to 2048.0 MiB, over what one message carries" in huge.message
    assert size < 2**20 and huge.ByteSize() <= size  # a bound on what it encodes to
    kept, size = failure_of(CarryingError(np.arange(3 * MIB, dtype=np.uint8)), skip_frames=0)
    assert kept.exception.ByteSize() > 3 * MIB and "pickled to" not in kept.message
    assert kept.ByteSize() <= size < kept.ByteSize() + 2**16
    many = CarryingError(np.zeros(1, np.uint8))
    many.parts = [np.full(8, i % 256, np.uint8) for i in range(5000)]  # type: ignore[attr-defined]  # 5000 buffers
    fits, bound = failure_of(many, skip_frames=0)
    assert fits.exception.ByteSize() > 40_000 and fits.ByteSize() <= bound  # each buffer's framing counted
    monkeypatch.setattr(failures, "MAX_IN_MESSAGE", bound - 1)  # its bytes fit, with their framing not
    framed, _ = failure_of(many, skip_frames=0)
    assert framed.exception.ByteSize() == 0 and "over what one message carries" in framed.message
    monkeypatch.setattr(failures, "MAX_IN_MESSAGE", 2 * MIB)
    dropped, _ = failure_of(CarryingError(np.zeros(3 * MIB, np.uint8)), skip_frames=0)
    assert dropped.exception.ByteSize() == 0 and "pickled to 3.0 MiB" in dropped.message
    long, _ = failure_of(ValueError("x" * (3 * failures.FAILURE_TEXT_MAX)), skip_frames=0)
    assert len(long.message) < failures.FAILURE_TEXT_MAX + 300 and "characters cut" in long.message

    class UnprintableError(Exception):
        def __str__(self) -> str:
            raise RuntimeError("no text")

    odd, _ = failure_of(UnprintableError(), skip_frames=0)
    assert "could not be made: RuntimeError: no text" in odd.message
    name = b"caf\xe9.txt".decode("utf-8", "surrogateescape")  # a file name as os.listdir gives it
    lone, _ = failure_of(FileNotFoundError(2, "No such file", name), skip_frames=0)
    assert "caf\\udce9.txt" in lone.message and lone.SerializeToString()


# ---- end to end, without shared memory (as between two hosts) ---------------------------------

MIB = 2**20


@actorrt.remote_class
class Log:
    def __init__(self) -> None:
        self.seen: list[object] = []

    def note(self, x: object) -> int:
        self.seen.append(x if not isinstance(x, np.ndarray) else ("array", int(x.nbytes), int(x[0])))
        return len(self.seen)

    def bump(self, x: np.ndarray) -> np.ndarray:
        x[0] += 1
        return x

    def make(self, n: int) -> np.ndarray:
        return np.arange(n, dtype=np.uint8)

    def echo(self, x: object) -> object:
        return x

    def history(self) -> list[object]:
        return self.seen

    def fail_with(self, n: int) -> None:
        raise CarryingError(np.arange(n, dtype=np.uint8))


async def test_large_buffers_over_the_socket_keep_order_limits_and_writability(
    cluster: ProcCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ACTORRT_SHM", "0")
    async with cluster.connect(max_payload_mb=8) as c:
        log = await Log.remote()
        assert not log._conn.shm
        big = np.zeros(3 * MIB, dtype=np.uint8)
        futures = [log.note("before"), log.note(big), log.note("after")]
        big[0] = 9  # after the call was made: not seen by the actor
        assert await asyncio.gather(*futures) == [1, 2, 3]
        assert await log.history() == ["before", ("array", 3 * MIB, 0), "after"]
        y = await log.bump(np.ones(2 * MIB, dtype=np.uint8))
        assert y[0] == 2 and y.flags.writeable and int(y.sum()) == 2 * MIB + 1
        got = await log.make(5 * MIB)  # two chunks
        assert got.nbytes == 5 * MIB and got[300] == 300 % 256 and got.flags.writeable
        assert np.array_equal(got, np.arange(5 * MIB, dtype=np.uint8))
        mixed = (np.arange(5 * MIB // 8, dtype=np.int64), b"small", np.zeros(0), np.ones(MIB // 4, np.float32))
        back = await log.echo(mixed)  # several buffers, chunked both ways, order kept
        assert all(np.array_equal(a, b) for a, b in zip(back[::2], mixed[::2], strict=True)) and back[1] == b"small"
        assert np.array_equal(back[3], mixed[3])
        with pytest.raises(actorrt.SerializationError, match="over the limit"):
            log.note(np.zeros(9 * MIB, dtype=np.uint8))
        with pytest.raises(actorrt.RemoteError, match="over the limit"):
            await log.make(9 * MIB)
        assert await log.note("still fine") == 4
        with pytest.raises(CarryingError, match="carrying 6291456 bytes") as info:  # an error over 4 MiB leaves alone
            await log.fail_with(6 * MIB)
        assert np.array_equal(info.value.data, np.arange(6 * MIB, dtype=np.uint8))
        assert await log.note("and after") == 5
        await c.kill(log)


async def test_a_chunk_without_its_call_is_refused_and_the_actor_lives_on(cluster: ProcCluster) -> None:
    import grpc

    from actorrt.transport import rpc as _rpc

    async with cluster.connect() as c:
        log = await Log.remote()
        channel = _rpc.open_channel(log._conn.endpoint, c.tls)
        call = channel.stream_stream(
            "/actorrt.v1.ActorHost/Calls",
            request_serializer=_wire.passthrough,
            response_deserializer=pb.ReplyBatch.FromString,
        )(metadata=_rpc.auth_metadata(c.token))
        await call.write(pb.CallBatch(attach=pb.AttachActor(version=_rpc.PROTOCOL_VERSION, actor_id=log.actor_id)))
        answer = await call.read()  # attaching is answered (reply seq 0)
        assert isinstance(answer, pb.ReplyBatch) and answer.replies[0].seq == 0
        await call.write(next(_wire.chunks(_wire.CALL_CHUNK, [memoryview(b"stray")])))
        with pytest.raises(grpc.aio.AioRpcError) as info:
            await call.read()
        assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "no streamed call" in (info.value.details() or "")
        await channel.close()
        assert await log.note("alive") == 1
        await c.kill(log)
