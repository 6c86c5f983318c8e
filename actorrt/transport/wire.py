"""Large payloads as a stream of chunk messages, encoded and decoded by hand.

A call (or reply) whose out-of-band buffers total at least ``_codec.STREAM_MIN`` and cannot go through
shared memory (another host) travels as a small header batch, whose Payload names the
buffers' sizes in ``streamed``, followed by chunk messages (``CallBatch.chunk`` /
``ReplyBatch.chunk``) of at most ``CHUNK_BYTES`` each. No message is larger than that, and
the bytes are copied once on each side in Python: the sender joins each chunk's framing with
a slice of the buffer's own memory; the receiver's deserializer returns a view of the chunk's
data inside gRPC's message (no protobuf parse, no copy) and ``Incoming`` copies it into the
writable ``bytearray`` the value is then unpickled on. Field numbers are those of
``actor_host.proto``; tests/transport/test_wire.py checks that protobuf parses these bytes into the
messages it would build. Pure functions, thread-safe; ``Incoming`` belongs to one stream.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from google.protobuf.message import Message

__all__ = [
    "CALL_CHUNK",
    "CHUNK_BYTES",
    "MAX_SPLIT_BYTES",
    "REPLY_CHUNK",
    "Incoming",
    "Joiner",
    "bounded",
    "chunk_data",
    "chunks",
    "passthrough",
    "split",
]

CHUNK_BYTES = 4 << 20
# The first byte of a batch that carries only a chunk: field number << 3 | length-delimited.
CALL_CHUNK = 5 << 3 | 2  # CallBatch.chunk = 5
REPLY_CHUNK = 4 << 3 | 2  # ReplyBatch.chunk = 4
_DATA = bytes([1 << 3 | 2])  # Chunk.data = 1
_CALL_SPLIT = bytes([6 << 3 | 0])  # CallBatch.split_bytes = 6 (varint)
# A split message is parsed by protobuf once joined, which takes at most 2 GiB - 1.
MAX_SPLIT_BYTES = (2 << 30) - 1


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


def _read_varint(buf: bytes, i: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if i >= len(buf) or shift > 63:
            raise ValueError("malformed chunk message: bad length")
        byte = buf[i]
        i += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, i
        shift += 7


def chunks(tag: int, buffers: Sequence[memoryview], size: int = CHUNK_BYTES) -> Iterator[bytes]:
    """The chunk messages carrying ``buffers`` (contiguous byte views) back to back; ``tag`` is
    ``CALL_CHUNK`` or ``REPLY_CHUNK``. Each message is one copy of its slice."""
    head = bytes([tag])
    for buf in buffers:
        for start in range(0, buf.nbytes, size):
            piece = buf[start : start + size]
            data_len = _varint(piece.nbytes)
            yield b"".join((head, _varint(1 + len(data_len) + piece.nbytes), _DATA, data_len, piece))


def chunk_data(message: bytes, tag: int) -> memoryview | None:
    """The data of a chunk message as a view into ``message`` (no copy); None when the message
    is not a chunk (does not start with ``tag``). Raises ValueError when it is malformed."""
    if not message or message[0] != tag:
        return None
    inner, i = _read_varint(message, 1)
    if i + inner != len(message):
        raise ValueError("malformed chunk message: a chunk batch carries nothing but its chunk")
    if inner == 0:  # Chunk{} (empty data)
        return memoryview(b"")
    if message[i] != _DATA[0]:
        raise ValueError("malformed chunk message: no data field")
    n, i = _read_varint(message, i + 1)
    if i + n != len(message):
        raise ValueError("malformed chunk message: data length does not match")
    return memoryview(message)[i:]


def split(encoded: bytes, size: int = CHUNK_BYTES) -> list[bytes]:
    """An encoded CallBatch too large for one message, as the messages that carry it: a header
    ``CallBatch(split_bytes=len(encoded))`` and chunk messages of at most ``size`` bytes."""
    if len(encoded) > MAX_SPLIT_BYTES:
        raise ValueError(f"a message of {len(encoded)} bytes is over protobuf's limit of {MAX_SPLIT_BYTES}")
    return [_CALL_SPLIT + _varint(len(encoded)), *chunks(CALL_CHUNK, [memoryview(encoded)], size)]


def bounded(encoded: bytes, limit: int = CHUNK_BYTES) -> list[bytes]:
    """An encoded CallBatch as messages of at most about ``limit`` bytes: itself, or split."""
    return [encoded] if len(encoded) <= limit else split(encoded, limit)


class Joiner:
    """Joins split messages (``split``) back into the message they encode. One stream's reader.

    ``feed`` takes each message read (a parsed batch, or a chunk's data as a memoryview) and
    returns what the reader should handle: the message itself, the joined and parsed message
    once its last chunk is in, or None while a split message is still arriving. Chunks that come
    with no split message open belong to a streamed payload and pass through. Raises ValueError
    on a malformed sequence (a split interrupted, or announced over ``MAX_SPLIT_BYTES``).
    """

    def __init__(self, parse: Callable[[bytes], Any]) -> None:
        self._parse = parse
        self._pending: Incoming | None = None

    @property
    def joining(self) -> bool:
        """True while a split message is arriving: the next messages are its chunks."""
        return self._pending is not None

    def feed(self, message: Any) -> Any:
        if self._pending is not None:
            if type(message) is not memoryview:
                raise ValueError("malformed stream: a split message was interrupted")
            if not self._pending.add(message):
                return None
            data, self._pending = self._pending.buffers[0], None
            try:
                # protobuf parses the bytearray in place; its stubs ask for bytes (a copy, of up to 2 GiB)
                return self._parse(data)  # type: ignore[arg-type]
            except Exception as e:
                raise ValueError(f"malformed stream: a split message does not parse: {e}") from e
        if type(message) is not memoryview and message.split_bytes:
            if message.split_bytes > MAX_SPLIT_BYTES:
                raise ValueError(f"malformed stream: a split message of {message.split_bytes} bytes is too large")
            self._pending = Incoming([message.split_bytes])
            return None
        return message


class Incoming:
    """The buffers of one streamed payload, filled in order from chunk data.

    ``keep=False`` only counts the bytes (a payload refused for its size still has to be read
    off the stream). Raises ValueError when more bytes come than the sizes announced.
    """

    def __init__(self, sizes: Sequence[int], keep: bool = True) -> None:
        self.sizes = list(sizes)
        self.buffers = [bytearray(n) for n in self.sizes] if keep else []
        self._keep = keep
        self._index = 0
        self._pos = 0
        self._skip_full()

    @property
    def done(self) -> bool:
        return self._index >= len(self.sizes)

    def add(self, data: memoryview) -> bool:
        """Take the next chunk's data; True once every buffer is full."""
        while data.nbytes:
            if self.done:
                raise ValueError("malformed stream: more chunk data than the payload announced")
            room = self.sizes[self._index] - self._pos
            take = min(room, data.nbytes)
            if self._keep:  # through a view: a bytearray's slice assignment would copy ``data`` first
                with memoryview(self.buffers[self._index]) as into:
                    into[self._pos : self._pos + take] = data[:take]
            self._pos += take
            data = data[take:]
            self._skip_full()
        return self.done

    def _skip_full(self) -> None:
        while self._index < len(self.sizes) and self._pos >= self.sizes[self._index]:
            self._index += 1
            self._pos = 0


def passthrough(message: Message | bytes) -> bytes:
    """A gRPC serializer for messages that may come pre-encoded as bytes."""
    if isinstance(message, bytes):
        return message
    return message.SerializeToString()
