"""Hand-encoded batches parse into the same messages protobuf builds."""

from __future__ import annotations

import asyncio
import pickle

import numpy as np

from actorrt import _wire
from actorrt.v1 import actor_host_pb2 as pb
from actorrt.v1 import common_pb2


def _parts(value: object) -> tuple[bytes, list[memoryview]]:
    buffers: list[pickle.PickleBuffer] = []
    data = pickle.dumps(value, protocol=5, buffer_callback=buffers.append)
    return data, [b.raw() for b in buffers]


def test_call_batch_matches_protobuf() -> None:
    data, raws = _parts(((np.arange(300_000, dtype=np.float32), np.zeros(5, np.uint8)), {}))
    for seq in (1, 127, 128, 2**40):
        encoded = _wire.call_batch(seq, "méthode", pb.CALL_KIND_METHOD, data, raws)
        expected = pb.CallBatch(calls=[pb.Call(seq=seq, method="méthode", kind=pb.CALL_KIND_METHOD,
                                               args=common_pb2.Payload(pickle=data, buffers=[r.tobytes() for r in raws]))])
        assert pb.CallBatch.FromString(encoded) == expected
        assert encoded == expected.SerializeToString()


def test_reply_batch_matches_protobuf() -> None:
    data, raws = _parts(np.ones(2**20, dtype=np.uint8))
    encoded = _wire.reply_batch(7, data, raws)
    expected = pb.ReplyBatch(replies=[pb.Reply(seq=7, value=common_pb2.Payload(pickle=data, buffers=[r.tobytes() for r in raws]))])
    assert pb.ReplyBatch.FromString(encoded) == expected
    assert _wire.passthrough(encoded) is encoded
    assert _wire.passthrough(expected) == expected.SerializeToString()


# ---- end to end, without shared memory (as between two hosts) ---------------------------------

import pytest  # noqa: E402

import actorrt  # noqa: E402
from tests.conftest import ProcCluster  # noqa: E402

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

    def history(self) -> list[object]:
        return self.seen


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
        got = await log.make(5 * MIB)
        assert got.nbytes == 5 * MIB and got[300] == 300 % 256 and got.flags.writeable
        with pytest.raises(actorrt.SerializationError, match="over the limit"):
            log.note(np.zeros(9 * MIB, dtype=np.uint8))
        with pytest.raises(actorrt.RemoteError, match="over the limit"):
            await log.make(9 * MIB)
        assert await log.note("still fine") == 4
        await c.kill(log)
