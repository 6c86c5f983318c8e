"""``CallStream``: one ``ActorHost.Calls`` stream of a constructed actor: the calls of a batch run
in the order they were made (sync methods inline on the host's loop, ``async def`` ones as tasks
up to the actor's ``max_concurrency``), and replies go back through the stream's ``Outbox``.
Large payloads arrive in chunks, through shared memory or the bulk channel. Host loop only."""

from __future__ import annotations

import asyncio
import bisect
import inspect
import os
import sys
import time
from collections.abc import AsyncIterator, Callable, Sequence
from typing import TYPE_CHECKING, Any

import grpc

from actorrt.client import pickling as _pickling
from actorrt.common.errors import SerializationError
from actorrt.host.actor import HostedActor, attribute_names
from actorrt.host.failures import EXIT_CODE_SHOWN, failure_of
from actorrt.transport import bulk as _bulk
from actorrt.transport import shm as _shm
from actorrt.transport import wire as _wire
from actorrt.transport.codec import PayloadTooLargeError, decode, decode_streamed, describe_size, encode
from actorrt.transport.outbox import Outbox
from actorrt.transport.serialization import NO_ARGS
from actorrt.transport.stats_pipe import LATENCY_BUCKETS
from actorrt.v1 import actor_host_pb2 as pb

if TYPE_CHECKING:
    from typing import TypeAlias

    # What a Calls stream reads (batches, or chunks' data: ActorHostServicer.parse) and writes (batches, or
    # pre-encoded bytes: ActorHostServicer.encode).
    CallsContext: TypeAlias = grpc.aio.ServicerContext[pb.CallBatch | memoryview, pb.ReplyBatch | bytes]

# A reply batch is flushed early when a sync call has kept the loop this long.
_FLUSH_AFTER_S = 0.002


def _no_release(name: str) -> None:
    """Where a payload maps no segment: nothing to release."""


def _undecodable(what: str, e: Exception) -> SerializationError:
    """The error of a call whose arguments could not be unpickled here (a class or module this
    host lacks, a ``__reduce__`` that raised); ``e`` is its cause."""
    error = SerializationError(f"arguments of {what} could not be unpickled in the actor: {type(e).__name__}: {e}")
    error.__cause__ = e
    return error


class CallStream:
    """One Calls stream: reads call batches, runs them in order, writes reply batches."""

    def __init__(
        self,
        actor: HostedActor,
        context: CallsContext,
        shm: bool = False,
        client_pid: int | None = None,
        links: _bulk.StreamLinks | None = None,
    ) -> None:
        self.actor = actor
        self.context = context
        self.loop = asyncio.get_running_loop()
        # Replies are added straight into the outbox's batch: building a Reply and copying it
        # into a ReplyBatch cost ~1.2 us per call, ``replies.add(seq=...)`` ~0.35 us.
        self.outbox: Outbox[pb.ReplyBatch] = Outbox(context.write, pb.ReplyBatch, "replies")
        # Large values go through /dev/shm when the client proved it shares it. With the
        # client's pid (same pid namespace), the files of a client that died are removed when
        # the stream ends; the daemon does it as well when this host exits (``shm_peer``).
        self.exchange = _shm.Exchange(self.loop, self.outbox.release, client_pid) if shm else None
        self.pool = self.exchange.pool if self.exchange is not None else None
        self.tasks: set[asyncio.Task[None]] = set()
        self.done = False
        # The call whose streamed arguments are arriving in chunks, and their buffers.
        self.incoming: tuple[pb.CallBatch, _wire.Incoming] | None = None
        # The stream's bulk connections (``_bulk``); None when it was offered none.
        self.links = links
        # The handle copies pickled on this stream's task (and the tasks of its async methods,
        # which inherit its context): those a reply's encoding made are named in the reply,
        # so that a caller that does not unpickle it claims them (``Reply.copies``). One list
        # for the stream's life: no context change per reply. Copies pickled outside a reply
        # (the actor's own ``pickle.dumps``) are dropped before the next reply is encoded.
        self.copies: list[tuple[str, str]] = []
        _pickling.copies_made.set(self.copies)

    def reply(self, msg: pb.Reply) -> None:
        self.outbox.batch.replies.append(msg)

    def reply_error(self, seq: int, error: BaseException, skip_frames: int = 1) -> None:
        """Answer call ``seq`` with ``error``. Host loop."""
        if self.copies:  # pickled outside this reply: not its to name
            self.copies.clear()
        self._reply_failure(seq, error, skip_frames)

    def _reply_failure(self, seq: int, error: BaseException, skip_frames: int) -> None:
        """``reply_error``, naming the copies pickled since the reply began (a value that failed
        to pickle whole, the exception)."""
        failure, size = failure_of(error, skip_frames)
        reply = pb.Reply(seq=seq, error=failure)
        if self.copies:
            self._name_copies(reply)
        if size <= _wire.CHUNK_BYTES:
            self.reply(reply)
            self.outbox.added(size)
        else:  # alone, as a large value goes
            self.outbox.push_encoded([pb.ReplyBatch(replies=[reply]).SerializeToString()])

    def _name_copies(self, reply: pb.Reply) -> None:
        """Name in ``reply`` the handle copies its encoding made (``copies``), and forget them."""
        named = reply.copies
        for actor_id, token in self.copies:
            named[token] = actor_id
        self.copies.clear()

    def reply_value(self, seq: int, method: str, value: Any) -> None:
        """Answer call ``seq`` with ``value``, or with why it cannot be sent. Host loop."""
        copies = self.copies
        if copies:  # pickled outside this reply (the actor's own pickling): not its to name
            copies.clear()
        if value is None:  # the common case, made cheap: a reply with no outcome reads as None
            self.outbox.batch.replies.add(seq=seq)
            return
        what = f"{self.actor.class_name}.{method}"  # for errors
        try:
            encoded = encode(value, pool=self.pool, limit=self.actor.max_payload_bytes)
        except PayloadTooLargeError as e:
            err: Exception = ValueError(f"return value of {what} is {e}")
        except Exception as e:  # noqa: BLE001 - any pickling failure goes back to the caller
            err = SerializationError(
                f"return value of {what} ({type(value).__module__}.{type(value).__qualname__}) could not be pickled: {e}"
            )
        else:
            if not encoded.streamed:
                reply = pb.Reply(seq=seq, value=encoded.payload)
                if copies:
                    self._name_copies(reply)
                if encoded.in_message <= _wire.CHUNK_BYTES:
                    self.reply(reply)
                    self.outbox.added(encoded.in_message)
                else:  # alone: two large replies in one batch could pass what protobuf encodes
                    self.outbox.push_encoded([pb.ReplyBatch(replies=[reply]).SerializeToString()])
                return
            link = self.links.current if self.links is not None else None
            if link is not None and link.send(seq, encoded.streamed):
                encoded.payload.bulk = link.epoch  # its buffers went on the bulk connection
                self.actor.stats.bytes_out += sum(b.nbytes for b in encoded.streamed)
            reply = pb.Reply(seq=seq, value=encoded.payload)
            if copies:
                self._name_copies(reply)
            if encoded.payload.bulk:
                self.reply(reply)
            else:  # its buffers are streamed in chunks after a header (``_wire``)
                header = pb.ReplyBatch(replies=[reply])
                self.outbox.push_encoded(
                    [header.SerializeToString(), *_wire.chunks(_wire.REPLY_CHUNK, encoded.streamed)]
                )
            return
        self._reply_failure(seq, err, skip_frames=0)  # naming the copies the failed pickling made

    async def run(
        self, requests: AsyncIterator[pb.CallBatch | memoryview], joiner: _wire.Joiner, first: pb.CallBatch
    ) -> None:
        try:
            await self.run_batch(first)
            async for batch in requests:
                # A split batch (rare) is joined first; no extra layer for every other message.
                if joiner.joining or (not isinstance(batch, memoryview) and batch.split_bytes):
                    batch = joiner.feed(batch)
                    if batch is None:
                        continue
                if isinstance(batch, memoryview):
                    await self._take_chunk(batch)
                else:
                    await self.run_batch(batch)
        except ValueError as e:  # a malformed chunk stream; run_batch answers everything else
            await self.context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(e))
        finally:
            self.done = True
            if self.tasks:
                await asyncio.gather(*self.tasks, return_exceptions=True)
            await self.outbox.drain()  # the client is gone if this fails; nothing to tell it
            if self.exchange is not None:
                self.exchange.close()

    async def _take_chunk(self, data: memoryview) -> None:
        if self.incoming is None:
            raise ValueError("a chunk came with no streamed call before it")
        header, incoming = self.incoming
        if incoming.add(data):
            self.incoming = None
            await self.run_batch(header, incoming)

    async def run_batch(self, batch: pb.CallBatch, streamed: _wire.Incoming | None = None) -> None:
        """Run the batch's calls in order; their replies leave once the batch is done (or
        earlier, when sync calls keep the loop busy). Async methods run as tasks.

        A call whose arguments are streamed (``Payload.streamed``) waits for its chunks; it
        runs when ``streamed`` holds them all (and is refused if they are over the limit)."""
        actor = self.actor
        stats = actor.stats
        buckets, bucket_of, bounds = stats.buckets, bisect.bisect_left, LATENCY_BUCKETS
        started = time.perf_counter()
        if batch.released and self.exchange is not None:
            self.exchange.peer_released(batch.released)
        if batch.dropped_frames and self.links is not None:
            for seq, epoch in batch.dropped_frames.items():
                self.links.drop(epoch, seq)
        if batch.bulk_reopen and self.links is not None and (offer := self.links.offer()) is not None:
            port, key = offer  # a batch of its own: the outbox sends none with no replies
            self.outbox.push_encoded([pb.ReplyBatch(bulk_port=port, bulk_key=key).SerializeToString()])
        for call in batch.calls:
            decoding = True  # what fails until the arguments are decoded is their unpickling
            try:
                payload = call.args
                if payload.streamed:
                    if payload.bulk:  # its buffers come on the bulk connection
                        buffers = await self._bulk_buffers(call.seq, payload.streamed, payload.bulk)
                    elif streamed is None:  # the chunks come next: run it once they are here
                        self._expect_chunks(batch, payload.streamed)
                        continue
                    else:
                        buffers = streamed.buffers or None
                    if buffers is None:
                        decoding = False
                        raise ValueError(self._over_limit_text(call.method, sum(payload.streamed)))
                    args, kwargs = decode_streamed(payload.pickle, buffers)
                elif payload.pickle:
                    if payload.shared and self.exchange is not None:
                        self.exchange.saw(payload.shared)
                    args, kwargs = decode(payload, self.exchange.on_release if self.exchange else _no_release)
                else:
                    args, kwargs = NO_ARGS
                decoding = False
                if call.kind != pb.CALL_KIND_METHOD:
                    try:
                        self._run_attr(call, args)
                    except asyncio.CancelledError as e:  # a property's own (not an Exception): its call's error
                        stats.errors += 1
                        self.reply_error(call.seq, e)
                    continue
                fn, is_async = actor.method(call.method)
            except Exception as e:  # noqa: BLE001 - the caller gets it; the actor lives on
                stats.errors += 1
                error = _undecodable(f"{actor.class_name}.{call.method}", e) if decoding else e
                self.reply_error(call.seq, error, skip_frames=0)
                continue
            if not actor.running.take():  # only async methods can hold every slot
                self.outbox.flush()
                await actor.running.wait_take()
            if is_async:
                task = asyncio.create_task(self._run_async(call.seq, call.method, fn, args, kwargs))
                self.tasks.add(task)
                task.add_done_callback(self.tasks.discard)
                continue
            t0 = time.perf_counter()
            try:
                value = fn(*args, **kwargs)
            except (Exception, asyncio.CancelledError) as e:  # noqa: BLE001 - the caller gets it; the actor lives on
                stats.errors += 1
                self.reply_error(call.seq, e)
            except SystemExit as e:
                await self.exit_actor(call.method, e)
            else:
                self.reply_value(call.seq, call.method, value)
            finally:
                actor.running.give()
            now = time.perf_counter()
            stats.sum += now - t0  # CallStats.observe, inlined: this runs once per call
            buckets[bucket_of(bounds, now - t0)] += 1
            if now - started > _FLUSH_AFTER_S:  # send what is ready, let other tasks run
                started = now
                self.outbox.flush()
                await asyncio.sleep(0)
        self.outbox.flush()

    async def exit_actor(self, method: str, exc: SystemExit) -> None:
        """A method called ``sys.exit``: the actor ends, as a process would. What was answered
        before leaves first (for at most a second); the call itself and those after it fail with
        ``ActorDiedError``, whose cause (sent to the daemon on the statistics pipe) names the
        method and the exit code. Never returns."""
        code = exc.code
        status = code if isinstance(code, int) and 0 <= code <= 255 else 0 if code is None else 1
        if code is not None and not isinstance(code, int):
            print(code, file=sys.stderr, flush=True)  # as the interpreter does for sys.exit("why")
        shown = repr(code)
        if len(shown) > EXIT_CODE_SHOWN:  # the cause travels as one line of a bounded pipe
            shown = f"{shown[:EXIT_CODE_SHOWN]}... ({len(shown)} characters)"
        self.actor.stats.exit_cause = (
            f"{self.actor.class_name}.{method} called sys.exit({shown}): the actor exited with code {status}"
        )
        self.outbox.flush()
        try:
            async with asyncio.timeout(1.0):
                await self.outbox.drain()
        except (TimeoutError, Exception):  # noqa: BLE001 - the client may be gone
            pass
        if self.actor.report_fd is not None:
            self.actor.stats.report(self.actor.report_fd)
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(status)

    async def _bulk_buffers(self, seq: int, sizes: Sequence[int], epoch: int) -> list[Any] | None:
        """The buffers of call ``seq``'s arguments, from bulk connection ``epoch`` (None: they
        were over the limit, read and dropped). Raises ValueError or ``_bulk.BulkError``."""
        if self.links is None:
            raise ValueError("the arguments came on a bulk connection, but this stream has none")
        buffers = await self.links.take(epoch, seq)
        if buffers is not None and [len(b) for b in buffers] != list(sizes):
            raise ValueError("the arguments on the bulk connection do not have the sizes their call gave")
        self.actor.stats.bytes_in += sum(sizes)
        return buffers

    def _expect_chunks(self, batch: pb.CallBatch, sizes: Sequence[int]) -> None:
        if len(batch.calls) != 1:
            raise ValueError("a call with streamed arguments must come alone in its batch")
        limit = self.actor.max_payload_bytes
        self.incoming = (batch, _wire.Incoming(sizes, keep=not limit or sum(sizes) <= limit))

    def _over_limit_text(self, method: str, size: int) -> str:
        return (
            f"arguments of {self.actor.class_name}.{method} are {describe_size(size)}, over the limit of "
            f"{describe_size(self.actor.max_payload_bytes)} (connect(max_payload_mb=...))"
        )

    def _run_attr(self, call: pb.Call, args: tuple[Any, ...]) -> None:
        instance = self.actor.instance
        if call.kind == pb.CALL_KIND_GET_ATTR:
            if call.method.startswith("__"):
                raise AttributeError(f"{self.actor.class_name} has no remote attribute {call.method!r}")
            value = getattr(instance, call.method)
            if getattr(value, "__self__", None) is instance and inspect.ismethod(value):
                raise TypeError(
                    f"{self.actor.class_name}.{call.method} is a method, not an attribute: "
                    f"call it with handle.{call.method}(...)"
                )
            self.reply_value(call.seq, call.method, value)
        elif call.kind == pb.CALL_KIND_SET_ATTR:
            setattr(instance, call.method, args[0])
            self.outbox.batch.replies.add(seq=call.seq)
        elif call.kind == pb.CALL_KIND_LIST_ATTRS:
            self.reply_value(call.seq, "<attributes>", attribute_names(instance))
        else:
            raise ValueError(f"unknown call kind {call.kind} for {call.method!r}")

    async def _run_async(
        self, seq: int, method: str, fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> None:
        t0 = time.perf_counter()
        try:
            value = await fn(*args, **kwargs)
        except Exception as e:  # noqa: BLE001 - the caller gets it; the actor lives on
            self.actor.stats.errors += 1
            self.reply_error(seq, e)
        except asyncio.CancelledError as e:
            # A BaseException since 3.8: it escaped the line above and the caller waited for a
            # reply forever. The method awaited a task cancelled elsewhere, or this call's own
            # task was cancelled (by the method itself, or as the host's loop ends): the caller
            # is answered either way, and a cancelled task still ends cancelled.
            self.actor.stats.errors += 1
            self.reply_error(seq, e)
            task = asyncio.current_task()
            if task is not None and task.cancelling():
                self.outbox.flush()
                raise
        except SystemExit as e:
            await self.exit_actor(method, e)
        else:
            self.reply_value(seq, method, value)
        finally:
            self.actor.running.give()
            self.actor.stats.observe(time.perf_counter() - t0)
        self.outbox.flush()
