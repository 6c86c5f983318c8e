"""Hand-encoded CallBatch/ReplyBatch messages for calls and replies that carry large buffers.

Building a protobuf message copies every bytes field into it (and ``tobytes()`` had copied each
buffer before that); serialising copies it once more. Here the wire bytes of a one-call
``CallBatch`` (or one-reply ``ReplyBatch``) are joined straight from the pickle and the
buffers' memory: one copy. Field numbers are those of ``actor_host.proto`` and
``common.proto``; tests/test_wire.py checks that protobuf parses these bytes into the message
built the ordinary way. Pure functions, thread-safe.
"""

from __future__ import annotations

from typing import Any, Sequence

__all__ = ["call_batch", "reply_batch", "passthrough"]

_LEN = 2  # wire type: length-delimited
_VARINT = 0


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        if n:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _key(field: int, wire_type: int) -> bytes:
    return _varint(field << 3 | wire_type)


def _payload(data: bytes, buffers: Sequence[memoryview]) -> tuple[list[Any], int]:
    """Payload{pickle = 1, buffers = 2} as parts, and their total length."""
    parts: list[Any] = [_key(1, _LEN), _varint(len(data)), data]
    for buf in buffers:
        parts += [_key(2, _LEN), _varint(buf.nbytes), buf]
    return parts, sum(len(p) if not isinstance(p, memoryview) else p.nbytes for p in parts)


def call_batch(seq: int, method: str, kind: int, data: bytes, buffers: Sequence[memoryview]) -> bytes:
    """CallBatch{calls = 3: [Call{seq = 1, method = 2, args = 3: Payload, kind = 4}]}.
    ``buffers`` must be contiguous byte views (``PickleBuffer.raw()``)."""
    name = method.encode()
    payload, payload_len = _payload(data, buffers)
    call = [_key(1, _VARINT), _varint(seq), _key(2, _LEN), _varint(len(name)), name,
            _key(3, _LEN), _varint(payload_len), *payload, _key(4, _VARINT), _varint(kind)]
    call_len = sum(len(p) if not isinstance(p, memoryview) else p.nbytes for p in call)
    return b"".join([_key(3, _LEN), _varint(call_len), *call])


def reply_batch(seq: int, data: bytes, buffers: Sequence[memoryview]) -> bytes:
    """ReplyBatch{replies = 1: [Reply{seq = 1, value = 2: Payload}]}."""
    payload, payload_len = _payload(data, buffers)
    reply = [_key(1, _VARINT), _varint(seq), _key(2, _LEN), _varint(payload_len), *payload]
    reply_len = sum(len(p) if not isinstance(p, memoryview) else p.nbytes for p in reply)
    return b"".join([_key(1, _LEN), _varint(reply_len), *reply])


def passthrough(message: Any) -> bytes:
    """A gRPC serializer for messages that may come pre-encoded as bytes."""
    if isinstance(message, bytes):
        return message
    return message.SerializeToString()  # type: ignore[no-any-return]
