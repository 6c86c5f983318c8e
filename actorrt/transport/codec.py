"""The payload codec: how a call's arguments and a reply's value travel. Both ends use it.

The rules, in one place:

- Values are pickled with cloudpickle, protocol 5 (``dumps``); numpy arrays' buffers go out of
  band, and so do those of CPU torch tensors of at least ``TENSOR_OUT_OF_BAND`` bytes (torch's
  own pickling copies them into the pickle; see ``_reduce_tensor`` for which), rebuilt on the
  buffers as received (``tensor_from_buffer``: not resizable). Like numpy arrays, two such
  tensors that shared memory arrive as two copies.
- **Shared memory**, once the stream proved both ends share /dev/shm (``_shm``): out-of-band
  buffers of at least ``_shm.THRESHOLD`` bytes are copied into the sender's pool of segments
  and travel by name (``Payload.shared``); smaller ones travel inline.
- **The socket**: when the buffers that travel inline add up to at least ``STREAM_MIN``, they are
  streamed after the message as chunks (``_wire``), and the payload names their sizes
  (``Payload.streamed``): one copy on each side instead of four. Smaller ones go inline in the
  payload (``Payload.buffers``).
- **The size limit** (``connect(max_payload_mb=...)``) counts the pickle and every buffer,
  shared ones included; over it, ``encode`` raises ``PayloadTooLargeError`` and keeps no segment.
- **What one message carries** (the pickle and the inline buffers) stays under
  ``MAX_IN_MESSAGE``, as protobuf encodes nothing of 2 GiB or more: when the inline buffers would
  take it over, they are streamed (shared ones too, when /dev/shm filled up half way); a pickle
  over it (data pickled in band: bytes, lists, ...) is refused with ``PayloadTooLargeError``
  saying so, whatever ``max_payload_mb`` allows. ``Encoded.in_message`` is that size, so that a
  large one can leave in a message of its own.
- Decoding gives writable buffers: inline ones copied, streamed ones as received, shared ones
  mapped (no copy); ``on_release(name)`` tells the sender's pool when a mapped segment is free.

Functions are synchronous and thread-safe (``encode`` runs on the caller's thread, so pickling
errors come at the call site).
"""

from __future__ import annotations

import copyreg
import io
import pickle
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import cloudpickle

from actorrt.transport import shm as _shm
from actorrt.v1 import common_pb2

__all__ = [
    "MAX_IN_MESSAGE",
    "STREAM_MIN",
    "TENSOR_OUT_OF_BAND",
    "Encoded",
    "PayloadTooLargeError",
    "decode",
    "decode_streamed",
    "describe_size",
    "dumps",
    "encode",
    "tensor_from_buffer",
]

# Inline buffers adding up to at least this much are streamed in chunks after the message.
STREAM_MIN = 1 << 20
# The most a payload carries inside its message: protobuf encodes messages under 2 GiB, and the
# batch around the payload takes a little more.
MAX_IN_MESSAGE = (1 << 31) - (1 << 24)


# CPU torch tensors at least this large travel out of band; smaller ones as torch pickles them.
TENSOR_OUT_OF_BAND = 64 << 10


def tensor_from_buffer(buffer: Any, dtype: str, shape: tuple[int, ...], strides: tuple[int, ...] | None) -> Any:
    """A tensor of ``dtype`` (``"float32"``, ...), ``shape`` and ``strides`` (None: contiguous)
    on ``buffer`` (its elements as they lie in memory), sharing its memory: how ``dumps``
    sends large CPU tensors."""
    import torch

    flat = torch.frombuffer(buffer, dtype=torch.uint8).view(getattr(torch, dtype))
    return flat.reshape(shape) if strides is None else flat.as_strided(shape, strides)


def _dense(shape: tuple[int, ...], strides: tuple[int, ...]) -> bool:
    """Whether a tensor's elements fill a block of memory exactly once (torch's "non-overlapping
    and dense"), in any order of dimensions: contiguous, transposed, channels-last."""
    expected = 1
    for stride, size in sorted((st, n) for n, st in zip(shape, strides, strict=True) if n != 1):
        if stride != expected:
            return False
        expected *= size
    return True


def _reduce_tensor(t: Any) -> Any:
    """``t`` as ``tensor_from_buffer`` with its bytes out of band, or as torch pickles it: when
    small, not a dense CPU tensor (sparse, quantized, on a device), requiring grad, carrying
    Python attributes, or a broadcast or overlapping view (whose storage, which torch sends,
    is smaller than its elements). A dense tensor keeps its strides; a view with gaps arrives
    contiguous (torch would send its whole storage)."""
    import torch

    if (
        t.device.type != "cpu"
        or t.layout is not torch.strided
        or t.requires_grad
        or t.is_quantized
        or t.__dict__
        or t.nbytes < TENSOR_OUT_OF_BAND
    ):
        return t.__reduce_ex__(5)
    if t.is_conj() or t.is_neg():
        t = t.resolve_conj().resolve_neg()  # a copy with the same strides
    shape, strides = tuple(t.shape), tuple(t.stride())
    kept: tuple[int, ...] | None = strides
    if _dense(shape, strides):
        block = torch.as_strided(t, (t.numel(),), (1,), t.storage_offset())
    elif t.untyped_storage().nbytes() < t.nbytes or 0 in strides:
        return t.__reduce_ex__(5)
    else:
        block, kept = t.contiguous().reshape(-1), None
    try:
        raw = block.view(torch.uint8).numpy()
    except (RuntimeError, TypeError):  # a dtype numpy cannot hold even as bytes
        return t.__reduce_ex__(5)
    dtype = str(t.dtype).removeprefix("torch.")
    return tensor_from_buffer, (pickle.PickleBuffer(raw.data), dtype, shape, kept)


_torch_pickler: tuple[int, type] | None = None  # (copyreg's reducers counted, the class)


def _pickler() -> type:
    """cloudpickle's pickler; once torch is imported, with large CPU tensors out of band: an
    entry for ``torch.Tensor`` in a plain-dict copy of its ``dispatch_table`` (C looks a dict
    up directly; its own is a ChainMap), made again if a reducer is registered with copyreg."""
    global _torch_pickler
    made, registered = _torch_pickler, len(copyreg.dispatch_table)
    if made is not None and made[0] == registered:
        return made[1]
    torch = sys.modules.get("torch")  # no tensor exists before torch is imported
    if torch is None:
        plain: type = cloudpickle.Pickler
        return plain
    table = {**cloudpickle.Pickler.dispatch_table, torch.Tensor: _reduce_tensor}
    pickler: type = type("_TensorPickler", (cloudpickle.Pickler,), {"dispatch_table": table})
    _torch_pickler = (registered, pickler)
    return pickler


def dumps(value: Any, buffer_callback: Callable[[pickle.PickleBuffer], Any]) -> bytes:
    """``value`` pickled (cloudpickle, protocol 5), its out-of-band buffers given to
    ``buffer_callback``. Raises what pickling raises."""
    with io.BytesIO() as file:
        _pickler()(file, protocol=5, buffer_callback=buffer_callback).dump(value)
        return file.getvalue()


class PayloadTooLargeError(ValueError):
    """The value is over the size limit (``in_band``: its pickle is over what one message
    carries, ``MAX_IN_MESSAGE``); nothing of it was kept. The message says what to change."""

    def __init__(self, size: int, limit: int, in_band: bool = False) -> None:
        if in_band:
            text = (
                f"{describe_size(size)} pickled in band, over the {describe_size(limit)} one message can carry "
                "(only numpy arrays, CPU torch tensors of 64 KiB or more and pickle.PickleBuffer travel out "
                "of band, without that limit; bytes, str and lists are pickled in band)"
            )
        else:
            text = f"{describe_size(size)}, over the limit of {describe_size(limit)} (connect(max_payload_mb=...))"
        super().__init__(text)
        self.size = size
        self.limit = limit


@dataclass
class Encoded:
    """A payload ready to send: ``payload`` goes in the Call or Reply; ``streamed`` (the
    buffers' own memory, not copied: send them before the value can change) follows it in chunks
    when not empty."""

    payload: common_pb2.Payload
    streamed: list[memoryview] = field(default_factory=list)
    in_message: int = 0
    """Bytes the payload carries inside its message: the pickle and the inline buffers."""

    def segments(self) -> list[str]:
        """The shared-memory segments it holds busy in the sender's pool."""
        return [s.name for s in self.payload.shared]


def encode(value: Any, *, pool: _shm.Pool | None = None, limit: int = 0) -> Encoded:
    """Pickle ``value`` for the wire. ``pool``: the sender's shared-memory pool, when the stream
    has one. ``limit``: the largest payload in bytes (0: none). Raises what pickling raises, or
    ``PayloadTooLargeError``."""
    buffers: list[pickle.PickleBuffer] = []
    data = dumps(value, buffers.append)
    if not buffers:  # the common case: a small value with nothing out of band
        if limit and len(data) > limit:
            raise PayloadTooLargeError(len(data), limit)
        if len(data) > MAX_IN_MESSAGE:
            raise PayloadTooLargeError(len(data), MAX_IN_MESSAGE, in_band=True)
        return Encoded(common_pb2.Payload(pickle=data), in_message=len(data))
    raws = [b.raw() for b in buffers]
    size = len(data) + sum(r.nbytes for r in raws)
    if limit and size > limit:
        raise PayloadTooLargeError(size, limit)
    if len(data) > MAX_IN_MESSAGE:
        raise PayloadTooLargeError(len(data), MAX_IN_MESSAGE, in_band=True)
    shared: list[common_pb2.SharedBuffer] = []
    inline: list[memoryview] = []
    if pool is not None:
        try:
            for i, raw in enumerate(raws):
                if raw.nbytes >= _shm.THRESHOLD:
                    try:
                        shared.append(common_pb2.SharedBuffer(index=i, name=pool.put(raw), size=raw.nbytes))
                        continue
                    except OSError:  # /dev/shm is full: this one travels inline
                        pass
                inline.append(raw)
        except BaseException:
            pool.release(s.name for s in shared)
            raise
    else:
        inline = raws
    in_message = len(data) + sum(r.nbytes for r in inline)
    if in_message - len(data) >= STREAM_MIN and (not shared or in_message > MAX_IN_MESSAGE):
        if shared:  # /dev/shm filled up on the way: a payload streams all its buffers or none
            assert pool is not None
            pool.release(s.name for s in shared)
            inline = raws
        return Encoded(common_pb2.Payload(pickle=data, streamed=[r.nbytes for r in inline]), inline, len(data))
    if in_message > MAX_IN_MESSAGE:  # the pickle is within STREAM_MIN of the limit
        if pool is not None:
            pool.release(s.name for s in shared)
        raise PayloadTooLargeError(in_message, MAX_IN_MESSAGE, in_band=True)
    # protobuf takes bytes only (not memoryview): one copy per inline buffer.
    return Encoded(
        common_pb2.Payload(pickle=data, buffers=[r.tobytes() for r in inline], shared=shared), [], in_message
    )


def _never(name: str) -> None:
    return None


def decode(payload: common_pb2.Payload, on_release: Callable[[str], None] = _never) -> Any:
    """Unpickle a payload that came whole (not streamed). Out-of-band buffers come back
    writable: inline ones by one copy each, shared-memory ones as maps (no copy);
    ``on_release(name)`` runs, on whichever thread lets go of the value, once a mapped segment
    is no longer used. Raises what unpickling raises, or OSError/ValueError for a segment that
    is gone or malformed."""
    if payload.shared:
        return pickle.loads(payload.pickle, buffers=_buffers(payload, on_release))
    if payload.buffers:
        return pickle.loads(payload.pickle, buffers=[bytearray(b) for b in payload.buffers])
    return pickle.loads(payload.pickle)


def decode_streamed(data: bytes, buffers: Sequence[Any]) -> Any:
    """Unpickle a streamed payload (``Payload.streamed``) on its received, writable buffers."""
    return pickle.loads(data, buffers=buffers)


def _buffers(payload: common_pb2.Payload, on_release: Callable[[str], None]) -> list[Any]:
    total = len(payload.buffers) + len(payload.shared)
    out: list[Any] = [None] * total
    for s in payload.shared:
        if s.index >= total or out[s.index] is not None:
            raise ValueError(f"bad shared-memory buffer index {s.index}")
        out[s.index] = _shm.map_pooled(s.name, s.size, on_release)
    inline = iter(payload.buffers)
    for i in range(total):
        if out[i] is None:
            out[i] = bytearray(next(inline))
    return out


def describe_size(n: int) -> str:
    return f"{n / 2**20:.1f} MiB" if n >= 2**20 else f"{n} bytes"
