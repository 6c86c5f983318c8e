"""The payload codec alone: which transport each value takes, the size limit, round trips."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from actorrt.transport import codec as _codec
from actorrt.transport import shm as _shm

MIB = 1 << 20


def _round_trip(encoded: _codec.Encoded) -> Any:
    if encoded.streamed:
        return _codec.decode_streamed(encoded.payload.pickle, [bytearray(r) for r in encoded.streamed])
    return _codec.decode(encoded.payload)


def test_small_values_travel_as_a_pickle_alone() -> None:
    encoded = _codec.encode({"a": 1})
    assert encoded.payload.pickle and not encoded.payload.buffers and not encoded.streamed
    assert _round_trip(encoded) == {"a": 1}


def test_buffers_go_inline_below_the_stream_threshold_and_streamed_from_it() -> None:
    small = np.arange(1000, dtype=np.int64)
    inline = _codec.encode(small)
    assert len(inline.payload.buffers) == 1 and not inline.streamed
    assert np.array_equal(_round_trip(inline), small)
    big = (np.ones(_codec.STREAM_MIN // 2, np.uint8), np.zeros(_codec.STREAM_MIN // 2, np.uint8))
    streamed = _codec.encode(big)
    assert list(streamed.payload.streamed) == [_codec.STREAM_MIN // 2] * 2 and not streamed.payload.buffers
    back = _round_trip(streamed)
    assert all(np.array_equal(a, b) for a, b in zip(back, big, strict=True)) and back[0].flags.writeable


def test_the_limit_counts_pickle_and_buffers() -> None:
    with pytest.raises(_codec.PayloadTooLargeError, match="over the limit of 1000 bytes"):
        _codec.encode(b"x" * 2000, limit=1000)
    with pytest.raises(_codec.PayloadTooLargeError) as info:
        _codec.encode(np.zeros(5000, np.uint8), limit=1000)
    assert info.value.size > 5000 and info.value.limit == 1000


@pytest.mark.skipif(not _shm.available(), reason="no /dev/shm")
def test_large_buffers_go_through_the_pool_and_a_refusal_keeps_no_segment() -> None:
    pool = _shm.Pool()
    try:
        value = (np.ones(2 * MIB, np.uint8), np.zeros(100, np.uint8))
        encoded = _codec.encode(value, pool=pool)
        assert [s.index for s in encoded.payload.shared] == [0] and len(encoded.payload.buffers) == 1
        released: list[str] = []
        back = _codec.decode(encoded.payload, released.append)
        assert np.array_equal(back[0], value[0]) and np.array_equal(back[1], value[1])
        assert encoded.segments() == pool.names()
        with pytest.raises(_codec.PayloadTooLargeError):
            _codec.encode(np.ones(3 * MIB, np.uint8), pool=pool, limit=MIB)
        assert pool.names() == encoded.segments()  # the refused one took no segment
        del back
    finally:
        pool.close()


def test_a_pickle_over_what_one_message_carries_is_refused_saying_why(monkeypatch: pytest.MonkeyPatch) -> None:
    # The real limit is 2 GiB - 16 MiB (tests/transport/test_security.py sends that much end to end).
    monkeypatch.setattr(_codec, "MAX_IN_MESSAGE", 4 * MIB)
    assert _codec.encode(b"x" * MIB).in_message > MIB
    for value in (b"x" * 5 * MIB, (b"x" * 5 * MIB, np.zeros(10, np.uint8))):
        with pytest.raises(_codec.PayloadTooLargeError, match=r"pickled in band, over the 4.0 MiB one message can"):
            _codec.encode(value, limit=100 * MIB)
    # Out-of-band buffers are streamed beyond it: only the pickle counts.
    streamed = _codec.encode((b"x" * 3 * MIB, np.zeros(5 * MIB, np.uint8)))
    assert list(streamed.payload.streamed) == [5 * MIB] and streamed.in_message < 4 * MIB


class _FillsUp(_shm.Pool):
    """A pool whose /dev/shm is full after its first segment (put raises OSError then, as it
    does when fallocate finds no room)."""

    def __init__(self) -> None:
        super().__init__()
        self.puts = 0

    def put(self, data: memoryview) -> str:
        self.puts += 1
        if self.puts > 1:
            raise OSError(28, "No space left on device")
        return super().put(data)


@pytest.mark.skipif(not _shm.available(), reason="no /dev/shm")
def test_inline_buffers_that_would_pass_the_message_limit_stream_and_free_the_shared_ones(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    pool = _FillsUp()
    try:
        mixed = _codec.encode((np.ones(2 * MIB, np.uint8), np.zeros(2 * MIB, np.uint8)), pool=pool)
        assert len(mixed.payload.shared) == 1 and len(mixed.payload.buffers) == 1  # under the limit: both ways
    finally:
        pool.close()
    monkeypatch.setattr(_codec, "MAX_IN_MESSAGE", 3 * MIB)
    pool = _FillsUp()
    try:
        big = (np.ones(2 * MIB, np.uint8), np.full(4 * MIB, 7, np.uint8))
        encoded = _codec.encode(big, pool=pool)
        assert list(encoded.payload.streamed) == [2 * MIB, 4 * MIB] and not encoded.payload.shared
        assert pool.puts == 2 and len(pool.names()) == 1 and not pool._busy  # its segment was taken, then freed
        back = _round_trip(encoded)
        assert all(np.array_equal(a, b) for a, b in zip(back, big, strict=True))
    finally:
        pool.close()


def test_large_cpu_tensors_travel_out_of_band_and_come_back_whole() -> None:
    """torch pickles a tensor's bytes into the pickle (a copy, and in band: no shared memory, no
    bulk connection, under the 2 GiB message limit). Large CPU tensors now go out of band."""
    torch = pytest.importorskip("torch")
    out_of_band = {
        "float32": torch.arange(1 << 20, dtype=torch.float32),
        "bfloat16, transposed": torch.randn(512, 300).to(torch.bfloat16).T,
        "complex, conjugated": torch.randn(200, 100, dtype=torch.complex64).conj(),
        "bool": torch.rand(300_000) > 0.5,
        "a view at an offset": torch.arange(200_000, dtype=torch.int64)[50_000:],
        "a Parameter's data": torch.nn.Parameter(torch.ones(100_000)),
    }
    in_band = {
        "small": torch.arange(10),
        "0-d": torch.tensor(3.5),
        "requires grad": torch.zeros(100_000, requires_grad=True),
    }
    for cases, oob in ((out_of_band, True), (in_band, False)):
        for what, value in cases.items():
            encoded = _codec.encode(value)
            assert bool(encoded.streamed or encoded.payload.buffers) == oob, what
            assert (len(encoded.payload.pickle) < value.nbytes) == oob, what  # its bytes in the pickle, or not
            back = _round_trip(encoded)
            assert type(back) is type(value) and back.dtype == value.dtype and back.shape == value.shape, what
            assert back.requires_grad == value.requires_grad, what
            assert torch.equal(back.detach(), value.detach().resolve_conj()), what
    # Kept as they were: strides of a dense tensor (channels-last), attributes (torch pickles
    # them: this one goes as torch pickles it), the same tensor twice (one buffer, one object).
    nchw = torch.randn(8, 64, 16, 16).to(memory_format=torch.channels_last)
    assert _round_trip(_codec.encode(nchw)).stride() == nchw.stride()
    tagged = torch.ones(100_000)
    tagged.note = "kept"
    assert _round_trip(_codec.encode(tagged)).note == "kept"
    twice = _codec.encode([nchw, nchw])
    assert len(twice.streamed) + len(twice.payload.buffers) == 1
    again = _round_trip(twice)
    assert again[0] is again[1]
    # Broadcast and overlapping views: torch sends their (small) storage, so they stay in band.
    for view in (torch.zeros(1).expand(1 << 22), torch.arange(300_000.0).unfold(0, 100, 1)):
        encoded = _codec.encode(view)
        assert not (encoded.streamed or encoded.payload.buffers) and len(encoded.payload.pickle) < view.nbytes
        assert torch.equal(_round_trip(encoded), view)
    state = {"w": torch.randn(256, 256), "b": torch.zeros(256)}
    back = _round_trip(_codec.encode(state))
    assert back.keys() == state.keys() and all(torch.equal(back[k], state[k]) for k in state)
    back["w"] += 1  # writable, and its own memory
    assert not torch.equal(back["w"], state["w"])
