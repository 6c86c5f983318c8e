"""``Outbox``: the outgoing side of one Calls stream, shared by the client and the actor host.

Calls (client) or replies (host) are added straight into the batch being built; pre-encoded
messages (a streamed payload's header and chunks, ``_wire``) queue before it. A write starts at once when the stream is idle, and the
next one as soon as it completes, carrying everything added meanwhile: a lone call leaves with
no delay, and a burst is batched by gRPC's own pace.

"At once" means no task: a writer task would cost one extra event-loop iteration per message,
~4-5 % of a round trip (bench/README.md). The stream's ``write`` coroutine is stepped here
from callbacks instead, as an eagerly started task would be; nobody can cancel it half-way,
which matters because grpc.aio cancels the whole RPC when a write is cancelled. Loop thread
only.
"""

from __future__ import annotations

import asyncio
import functools
import operator
from collections.abc import Callable, Coroutine, Sequence
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

from actorrt.transport import wire as _wire

if TYPE_CHECKING:
    from google.protobuf.internal.containers import RepeatedScalarFieldContainer

__all__ = ["BATCH_MAX_BYTES", "Outbox"]


class _Batch(Protocol):
    """What the outbox uses of a batch message."""

    released: RepeatedScalarFieldContainer[str]

    def ByteSize(self) -> int: ...

    def SerializeToString(self, *, deterministic: bool = ...) -> bytes: ...


B = TypeVar("B", bound=_Batch)  # the batch message type: pb.CallBatch or pb.ReplyBatch
BATCH_MAX_BYTES = 64 << 20  # a batch this large leaves as it stands (``Outbox.added``)


class Outbox(Generic[B]):
    """Writes ``B`` batches (or pre-encoded bytes) to a stream, one write in flight at a time.

    ``write`` is the stream's write coroutine function; ``new_batch`` makes an empty ``B``;
    ``entries`` names the batch's repeated field of calls or replies. A batch that encodes to
    more than ``split_above`` bytes (0: no limit) leaves split in chunks (``_wire.split``): the
    peer reads messages of bounded size. A failed write stops the outbox (``error`` says why)
    and calls ``on_error``: a broken stream's reader settles what is pending, and a write that
    failed on our side of an open stream is the owner's to end.
    """

    def __init__(
        self,
        write: Callable[[Any], Coroutine[Any, Any, None]],
        new_batch: Callable[[], B],
        entries: str,
        split_above: int = 0,
        on_error: Callable[[BaseException], object] | None = None,
    ) -> None:
        self._write = write
        self._on_error = on_error
        self._split_above = split_above
        self._new_batch = new_batch
        self._entries = operator.attrgetter(entries)  # C-level: runs twice per message
        self._loop = asyncio.get_running_loop()
        self.batch: B = new_batch()
        self._batch_bytes = 0  # what ``added`` counted into ``batch``
        self.released: list[str] = []  # names of the peer's shared-memory segments we let go of
        self._queue: list[B | bytes] = []
        self._writing = False
        self._idle: asyncio.Future[None] | None = None
        self.error: BaseException | None = None

    def added(self, nbytes: int) -> None:
        """An entry of about ``nbytes`` went into ``batch``. Past ``BATCH_MAX_BYTES`` the batch is
        queued as it stands, and what comes next goes in a new one: entries added while a write
        waits (on a slow peer) must not add up to what protobuf cannot encode (2 GiB)."""
        self._batch_bytes += nbytes
        if self._batch_bytes > BATCH_MAX_BYTES:
            self._queue.append(self.batch)
            self.batch = self._new_batch()
            self._batch_bytes = 0

    def push_encoded(self, messages: Sequence[bytes]) -> None:
        """Queue pre-encoded messages after everything added so far, and send. They leave back
        to back: what is added meanwhile goes after the last of them."""
        if len(self._entries(self.batch)):
            self._queue.append(self.batch)
            self.batch = self._new_batch()
            self._batch_bytes = 0
        self._queue.extend(messages)
        self.flush()

    def release(self, name: str) -> None:
        self.released.append(name)
        self.flush()

    def clear(self) -> None:
        self.batch = self._new_batch()
        self._batch_bytes = 0
        self._queue.clear()
        self.released = []

    def flush(self) -> None:
        """Start writing what is there, unless a write is in flight (it sends the rest next)."""
        if self._writing or self.error is not None:
            return
        message = self._next()
        if message is None:
            if self._idle is not None and not self._idle.done():
                self._idle.set_result(None)
            return
        self._writing = True
        self._step(self._write(message))

    async def drain(self) -> None:
        """Return once everything added so far is written (or the stream failed)."""
        while self._writing or self._next_pending():
            self._idle = self._loop.create_future()
            self.flush()
            await self._idle

    def _next_pending(self) -> bool:
        return self.error is None and bool(self._queue or self.released or len(self._entries(self.batch)))

    def _next(self) -> B | bytes | None:
        if self._queue:
            message = self._queue.pop(0)
        elif self.released or len(self._entries(self.batch)):
            message, self.batch = self.batch, self._new_batch()
            self._batch_bytes = 0
            if self.released:
                message.released.extend(self.released)
                self.released = []
        else:
            return None
        if self._split_above and not isinstance(message, bytes) and message.ByteSize() > self._split_above:
            first, *rest = _wire.split(message.SerializeToString())
            self._queue[:0] = rest
            return first
        return message

    def _step(self, coro: Coroutine[Any, Any, None], _: Any = None) -> None:
        try:
            awaited = coro.send(None)
        except StopIteration:
            self._writing = False
            self.flush()
            return
        except (Exception, asyncio.CancelledError) as e:  # noqa: BLE001 - the stream broke
            self._writing = False
            self.error = e
            if self._idle is not None and not self._idle.done():
                self._idle.set_result(None)
            if self._on_error is not None:
                self._on_error(e)
            # Kept, its traceback would keep the frames that flushed this outbox, with their
            # locals (a caller's bound method holds a handle: its actor was never released).
            e.__traceback__ = None
            return
        if awaited is None:  # a bare yield: run again on the next iteration
            self._loop.call_soon(self._step, coro)
        else:  # an asyncio future, as a Task would take it
            awaited._asyncio_future_blocking = False
            awaited.add_done_callback(functools.partial(self._step, coro))
