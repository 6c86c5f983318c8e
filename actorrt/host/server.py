"""The actor host: one OS process per slot, serving one actor on its own gRPC port.

Started by a worker daemon as ``python -m actorrt.host.server``; prints one ready line with its port on
stdout, then serves ``ActorHost.Calls``. The first stream's first batch constructs the actor. The
actor ends when its daemon stops the process (SIGTERM, on the master's word), never because a
stream ended: a broken stream may be a client that comes back. The process then exits, so no
state leaks to the next user. It exits as well when its daemon dies (EOF on stdin).

Everything here runs on the host's single event loop; synchronous methods run inline on it, in
the order their calls were made.
"""

from __future__ import annotations

import argparse
import asyncio
import bisect
import collections
import contextlib
import importlib
import inspect
import os
import signal
import sys
import threading
import time
import traceback
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import grpc

from actorrt.client import current as _current
from actorrt.common import resources as _resources
from actorrt.common.errors import ClusterConnectionError, SerializationError
from actorrt.host.stats import CallStats
from actorrt.transport import addresses
from actorrt.transport import bulk as _bulk
from actorrt.transport import rpc as _rpc
from actorrt.transport import shm as _shm
from actorrt.transport import wire as _wire
from actorrt.transport.codec import MAX_IN_MESSAGE, PayloadTooLargeError, decode, decode_streamed, describe_size, encode
from actorrt.transport.outbox import Outbox
from actorrt.transport.serialization import EMPTY, NO_ARGS, dumps
from actorrt.transport.stats_pipe import LATENCY_BUCKETS, metrics_fd_from_env, report_line
from actorrt.v1 import actor_host_pb2 as pb
from actorrt.v1 import actor_host_pb2_grpc as pb_grpc
from actorrt.worker.fork_server_link import HOST_NAME, set_process_name

if TYPE_CHECKING:
    from typing import TypeAlias

    from actorrt.client.cluster import Cluster

    # What a Calls stream reads (batches, or chunks' data: ActorHostServicer.parse) and writes (batches, or
    # pre-encoded bytes: ActorHostServicer.encode).
    _Context: TypeAlias = grpc.aio.ServicerContext[pb.CallBatch | memoryview, pb.ReplyBatch | bytes]

# How long a stream that attaches to this host's actor waits for the actor's construction (its
# creator constructs it once placed; others holding a handle may attach first).
ATTACH_WAIT_S = 60.0
EXIT_CODE_SHOWN = 300  # characters of a sys.exit() argument in the exit cause
FAILURE_TEXT_MAX = 1 << 20  # characters of an error's message, and of its traceback, a reply carries
# A reply batch is flushed early when a sync call has kept the loop this long.
_FLUSH_AFTER_S = 0.002


def _failure(exc: BaseException, skip_frames: int = 1) -> tuple[pb.RemoteFailure, int]:
    """What an error reply carries, and a bound on its encoded size: the exception pickled (so
    the caller can raise its type, with its attributes), its message and its traceback. One
    message carries it, so a pickle over what that holds (an exception keeping a large array) is
    dropped, saying so, and texts are cut to ``FAILURE_TEXT_MAX`` characters; the type, message
    and traceback still travel. Sizes are added up, never asked of protobuf (which would encode
    the message to tell, and fails at 2 GiB)."""
    tb = exc.__traceback__
    for _ in range(skip_frames):
        if tb is not None and tb.tb_next is not None:
            tb = tb.tb_next
    text = _cut(_text_of(lambda: "".join(traceback.format_exception(type(exc), exc, tb))))
    message = _cut(_text_of(lambda: str(exc)))
    type_name = _cut(_text_of(lambda: f"{type(exc).__module__}.{type(exc).__qualname__}"))
    texts = 4 * (len(text) + len(message) + len(type_name)) + 64  # utf-8: 4 bytes a character at most
    payload, size = EMPTY, 0
    try:
        payload = dumps(exc, limit=max(1, MAX_IN_MESSAGE - texts - 64))
        # each buffer's tag and length: 11 bytes at most, and the payload's own
        size = len(payload.pickle) + sum(len(b) for b in payload.buffers) + 11 * (len(payload.buffers) + 2)
        if size + texts > MAX_IN_MESSAGE:
            raise PayloadTooLargeError(size, MAX_IN_MESSAGE, in_band=True)
    except PayloadTooLargeError as e:
        payload, size = EMPTY, 0
        message += (
            f" [the exception pickled to {describe_size(e.size)}, over what one message carries: "
            "it comes as its type, message and traceback]"
        )
        texts += 4 * 200
    except Exception:  # noqa: BLE001 - the type and message still travel
        payload, size = EMPTY, 0
    failure = pb.RemoteFailure(type_name=type_name, message=message, traceback=text, exception=payload)
    return failure, size + texts


def _text_of(make: Callable[[], str]) -> str:
    """``make()``, or what it raised; characters UTF-8 cannot encode (lone surrogates, as
    ``surrogateescape`` makes) escaped, since protobuf refuses them."""
    try:
        text = make()
    except Exception as e:  # noqa: BLE001 - a __str__ that raises: say so instead
        text = f"<the text could not be made: {type(e).__name__}: {e}>"
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def _cut(text: str) -> str:
    if len(text) <= FAILURE_TEXT_MAX:
        return text
    return f"{text[: FAILURE_TEXT_MAX // 2]}\n... ({len(text) - FAILURE_TEXT_MAX} characters cut) ...\n{text[-FAILURE_TEXT_MAX // 2 :]}"


class ConcurrencyLimit:
    """At most ``n`` calls of one actor run at once (sync ones inline, async ones as tasks).

    An ``asyncio.Semaphore`` whose uncontended take is a plain call, not a coroutine: it runs
    once per call on the host's hot path. Host loop only.
    """

    __slots__ = ("_waiters", "free")

    def __init__(self, n: int) -> None:
        self.free = n
        self._waiters: collections.deque[asyncio.Future[None]] = collections.deque()

    def take(self) -> bool:
        """Take a slot if one is free and nobody waits for one."""
        if self.free > 0 and not self._waiters:
            self.free -= 1
            return True
        return False

    async def wait_take(self) -> None:
        """Take a slot, waiting in line for one (``give`` hands it over)."""
        if self.take():
            return
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        try:
            await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():
                self.give()  # handed a slot, but cancelled: pass it on
            else:
                self._waiters.remove(waiter)
            raise

    def give(self) -> None:
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return
        self.free += 1


class _Actor:
    """The constructed user object and the rules for running its methods."""

    def __init__(
        self,
        actor_id: str,
        class_name: str,
        instance: Any,
        max_concurrency: int,
        max_payload_bytes: int = 0,
        stats: CallStats | None = None,
    ) -> None:
        self.actor_id = actor_id
        self.max_payload_bytes = max_payload_bytes
        self.class_name = class_name
        self.instance = instance
        self.max_concurrency = max(1, max_concurrency)
        self.running = ConcurrencyLimit(self.max_concurrency)
        self.stats = stats or CallStats()  # reported to the daemon; see actorrt.host.stats
        self.stats.class_name = class_name
        self.report_fd: int | None = None  # the daemon's statistics pipe
        self._methods: dict[str, tuple[Callable[..., Any], bool]] = {}

    def method(self, name: str) -> tuple[Callable[..., Any], bool]:
        found = self._methods.get(name)
        if found is None:
            if name.startswith("__"):
                raise AttributeError(f"{self.class_name} has no remote method {name!r}")
            fn = getattr(self.instance, name)
            if not callable(fn):
                raise TypeError(
                    f"{self.class_name}.{name} is not a method but an attribute ({type(fn).__qualname__}): "
                    f"read it with actorrt.get_attr(handle, {name!r})"
                )
            found = (fn, inspect.iscoroutinefunction(fn))
            self._methods[name] = found
        return found


_NODE_DEVICES = os.environ.get("CUDA_VISIBLE_DEVICES")
"""The devices the worker daemon was given (inherited by its hosts), before an actor's override."""


def _no_release(name: str) -> None:
    """Where a payload maps no segment: nothing to release."""


def _undecodable(what: str, e: Exception) -> SerializationError:
    """The error of a call whose arguments could not be unpickled here (a class or module this
    host lacks, a ``__reduce__`` that raised); ``e`` is its cause."""
    error = SerializationError(f"arguments of {what} could not be unpickled in the actor: {type(e).__name__}: {e}")
    error.__cause__ = e
    return error


def attribute_names(instance: Any) -> list[str]:
    """The names ``getattr`` reads as values on ``instance`` (``CALL_KIND_LIST_ATTRS``), sorted:
    its instance attributes, those that shadow a method of its class included (Python reads the
    instance's first), and its class's properties and other attributes that are not methods.
    Names that start with two underscores are left out."""
    names = {name for name in getattr(instance, "__dict__", {}) if not name.startswith("__")}
    for name in dir(type(instance)):
        if name.startswith("__") or name in names:
            continue
        attr = inspect.getattr_static(instance, name)
        if isinstance(attr, (staticmethod, classmethod)) or inspect.isfunction(attr):
            continue
        if callable(attr) and not isinstance(attr, (property, type)):
            continue  # a method of another kind (a builtin function, a callable object)
        if type(attr).__module__ == "actorrt.client.remote":
            continue  # what @remote_class added: Cls.remote, Cls.options and their options
        if inspect.ismemberdescriptor(attr) and not hasattr(instance, name):
            continue  # a __slots__ entry never set
        names.add(name)
    return sorted(names)


class CallStream:
    """One Calls stream: reads call batches, runs them in order, writes reply batches."""

    def __init__(
        self,
        actor: _Actor,
        context: _Context,
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

    def reply(self, msg: pb.Reply) -> None:
        self.outbox.batch.replies.append(msg)

    def reply_error(self, seq: int, error: BaseException, skip_frames: int = 1) -> None:
        failure, size = _failure(error, skip_frames)
        if size <= _wire.CHUNK_BYTES:
            self.reply(pb.Reply(seq=seq, error=failure))
            self.outbox.added(size)
        else:  # alone, as a large value goes
            self.outbox.push_encoded([pb.ReplyBatch(replies=[pb.Reply(seq=seq, error=failure)]).SerializeToString()])

    def reply_value(self, seq: int, method: str, value: Any) -> None:
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
                if encoded.in_message <= _wire.CHUNK_BYTES:
                    self.reply(pb.Reply(seq=seq, value=encoded.payload))
                    self.outbox.added(encoded.in_message)
                else:  # alone: two large replies in one batch could pass what protobuf encodes
                    alone = pb.ReplyBatch(replies=[pb.Reply(seq=seq, value=encoded.payload)])
                    self.outbox.push_encoded([alone.SerializeToString()])
            elif (
                self.links is not None and (link := self.links.current) is not None and link.send(seq, encoded.streamed)
            ):
                encoded.payload.bulk = link.epoch  # its buffers went on the bulk connection
                self.actor.stats.bytes_out += sum(b.nbytes for b in encoded.streamed)
                self.reply(pb.Reply(seq=seq, value=encoded.payload))
            else:  # its buffers are streamed in chunks after a header (``_wire``)
                header = pb.ReplyBatch(replies=[pb.Reply(seq=seq, value=encoded.payload)])
                self.outbox.push_encoded(
                    [header.SerializeToString(), *_wire.chunks(_wire.REPLY_CHUNK, encoded.streamed)]
                )
            return
        self.reply_error(seq, err, skip_frames=0)

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


class ActorHostServicer(pb_grpc.ActorHostServicer):
    """Serves one actor; ``finished`` is set when its constructor failed."""

    def __init__(self, token: str | None = None, tls: _rpc.TLS | None = None, bind: str = "127.0.0.1") -> None:
        self.actor: _Actor | None = None
        self.bind = bind  # where the bulk listener (``_bulk``) binds, beside the gRPC port
        self.bulk_server: _bulk.Server | None = None
        self.finished = asyncio.Event()
        self.constructed = asyncio.Event()  # set once the actor is built (or its constructor failed)
        self.token = token  # for the actor's own connection to its cluster (_actor_cluster)
        self.tls = tls
        self.stats = CallStats()  # the actor's, once constructed; bytes are counted from the start
        self.report_fd: int | None = None  # the daemon's statistics pipe, if it gave one

    def parse(self, data: bytes) -> pb.CallBatch | memoryview:
        """The request deserializer: a chunk's data as a view (``_wire``), else the CallBatch.
        Counts the bytes as they arrive (cheaper than ByteSize)."""
        self.stats.bytes_in += len(data)
        chunk = _wire.chunk_data(data, _wire.CALL_CHUNK)
        return chunk if chunk is not None else pb.CallBatch.FromString(data)

    def encode(self, message: pb.ReplyBatch | bytes) -> bytes:
        """The response serializer: pre-encoded batches (``_wire``) pass through; counts bytes."""
        data = message if isinstance(message, bytes) else message.SerializeToString()
        self.stats.bytes_out += len(data)
        return data

    async def Calls(self, request_iterator: AsyncIterator[pb.CallBatch | memoryview], context: _Context) -> None:
        requests, joiner = request_iterator, _wire.Joiner(pb.CallBatch.FromString)
        try:
            first = await _next_message(requests, joiner)
        except StopAsyncIteration:
            return
        except ValueError as e:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(e))
        if not isinstance(first, pb.CallBatch):
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "a stream cannot start with a chunk")
        shm, client_pid = False, None
        if first.HasField("construct"):
            step = first.construct
            if step.version != _rpc.PROTOCOL_VERSION:
                await context.abort(grpc.StatusCode.FAILED_PRECONDITION, _rpc.version_mismatch(step.version))
            if self.actor is not None:
                await context.abort(
                    grpc.StatusCode.FAILED_PRECONDITION,
                    f"this actor host already serves actor {self.actor.actor_id}",
                )
            try:
                self.actor = self._construct(step)
                self.actor.report_fd = self.report_fd
            except (Exception, SystemExit) as e:  # noqa: BLE001 - construction failed: tell the owner, then end
                await context.write(pb.ReplyBatch(replies=[pb.Reply(seq=0, error=_failure(e)[0])]))
                self.finished.set()
                self.constructed.set()
                return
            finally:
                self.constructed.set()
            shm, client_pid, links = await self._answer_open(context, step.shm_probe)
        elif first.HasField("attach"):
            if first.attach.version != _rpc.PROTOCOL_VERSION:
                await context.abort(grpc.StatusCode.FAILED_PRECONDITION, _rpc.version_mismatch(first.attach.version))
            try:  # its creator may not have constructed it yet
                async with asyncio.timeout(ATTACH_WAIT_S):
                    await self.constructed.wait()
            except TimeoutError:
                pass
            if self.actor is None or self.actor.actor_id != first.attach.actor_id:
                await context.abort(grpc.StatusCode.NOT_FOUND, f"no actor {first.attach.actor_id} here")
            shm, client_pid, links = await self._answer_open(context, first.attach.shm_probe)
        else:
            await context.abort(
                grpc.StatusCode.INVALID_ARGUMENT, "the first CallBatch of a stream must construct or attach"
            )
            return
        assert self.actor is not None
        first.ClearField("construct")
        first.ClearField("attach")
        stream = CallStream(self.actor, context, shm, client_pid, links)
        try:
            await stream.run(requests, joiner, first)
        finally:
            if links is not None:  # also when the stream never ran
                links.close()

    async def _answer_open(self, context: _Context, probe: str) -> tuple[bool, int | None, _bulk.StreamLinks | None]:
        """Answer a construct or attach step (reply seq 0), saying whether the stream may use
        shared memory (the client's probe file is readable here) and, when it may not, offering
        a bulk connection (``_bulk``): ``(shm, the client's pid, the stream's bulk connections)``."""
        shm = _shm.check_probe(probe)
        client_pid = _shm.probe_owner(probe) if shm else None
        if client_pid is not None and self.report_fd is not None:
            report_line(self.report_fd, {"shm_peer": client_pid})
        answer = pb.ReplyBatch(replies=[pb.Reply(seq=0, value=EMPTY)], shared_memory=shm)
        links: _bulk.StreamLinks | None = None
        if not shm and _bulk.enabled() and self.actor is not None and (server := self._bulk_server()) is not None:
            links = _bulk.StreamLinks(
                server, asyncio.get_running_loop(), self.actor.max_payload_bytes, self.actor.actor_id
            )
            answer.bulk_port, answer.bulk_key = links.offer() or (0, b"")
        try:
            await context.write(answer)
        except BaseException:
            if links is not None:
                links.close()
            raise
        return shm, client_pid, links

    def _bulk_server(self) -> _bulk.Server | None:
        """The bulk listener, started by the first stream without shared memory; None (large
        payloads then stream in chunks) when it cannot listen."""
        if self.bulk_server is None:
            try:
                self.bulk_server = _bulk.Server(self.bind, asyncio.get_running_loop(), self.tls)
            except (OSError, ValueError) as e:
                print(f"actorrt: no bulk connection for large payloads ({e}); they go on gRPC", file=sys.stderr)
                return None
        return self.bulk_server

    def _construct(self, step: pb.ConstructActor) -> _Actor:
        os.environ["CUDA_VISIBLE_DEVICES"] = _resources.visible_devices(list(step.gpu_ids), _NODE_DEVICES)
        os.environ["ACTORRT_ACTOR_ID"] = step.actor_id
        _current.in_actor_host = True
        max_payload_mb = max(1, step.max_payload_bytes // 2**20) if step.max_payload_bytes else 1024
        _current.set_fallback(lambda: _actor_cluster(step.actor_id, self.token, self.tls, max_payload_mb))
        _write_shipped(step.files)
        claimed = _current.claimed_before.set(step.restarts > 0)
        try:
            cls, args, kwargs = decode(step.spec)
        finally:
            _current.claimed_before.reset(claimed)
        instance = cls(*args, **kwargs)
        return _Actor(
            step.actor_id,
            step.class_name or cls.__name__,
            instance,
            step.max_concurrency,
            step.max_payload_bytes,
            self.stats,
        )


def _actor_cluster(actor_id: str, token: str | None, tls: _rpc.TLS | None, max_payload_mb: int) -> Cluster:
    """The actor's own connection to its cluster, opened the first time the actor needs one
    (it received a handle, creates an actor, or looks one up). It runs on its own loop thread,
    so plain methods can block on ``.result()`` while the host's loop is theirs; the actors it
    creates belong to this actor and die with it."""
    from actorrt.client.cluster import Cluster  # the client is loaded only by actors that use it

    address = os.environ.get("ACTORRT_ADDRESS", "")
    if not address:
        raise ClusterConnectionError("this actor's host was not told its cluster's address (ACTORRT_ADDRESS)")
    cluster = Cluster(
        address,
        token=token,
        files=(),
        timeout=30.0,
        placement_timeout=300.0,
        embedded_cpus=None,
        tls=tls,
        max_payload_mb=max_payload_mb,
        actor_id=actor_id,
    )
    cluster.__enter__()
    return cluster


async def _next_message(
    requests: AsyncIterator[pb.CallBatch | memoryview], joiner: _wire.Joiner
) -> pb.CallBatch | memoryview:
    """The next message of the stream, a split batch joined (``_wire.Joiner``). Raises
    StopAsyncIteration at the end, ValueError on a malformed sequence."""
    while (message := joiner.feed(await anext(requests))) is None:
        pass
    return message  # type: ignore[no-any-return]


def _write_shipped(files: Sequence[pb.ShippedFile]) -> None:
    """Write ``connect(files=...)`` into the working folder: files, and folders (``mode`` with
    ``S_IFDIR``; their permissions are set last, so a read-only folder still gets its files).
    Every entry must stay inside the folder, also through a symlink already there."""
    import stat

    root = Path.cwd().resolve()
    folders: list[tuple[Path, int]] = []
    for f in files:
        path = Path(f.path)
        target = (root / path).resolve()
        if path.is_absolute() or ".." in path.parts or not path.parts or not target.is_relative_to(root):
            raise ValueError(f"shipped file path must be relative and inside the actor's folder: {f.path!r}")
        if stat.S_ISDIR(f.mode):
            target.mkdir(parents=True, exist_ok=True)
            folders.append((target, f.mode & 0o777))
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(f.data)
        if f.mode:
            target.chmod(f.mode & 0o777)
    for folder, mode in reversed(folders):
        folder.chmod(mode)


def _exit_when_parent_dies() -> None:
    """The daemon holds our stdin; EOF means it is gone, so we go too (no orphans), taking our
    shared-memory segments along (the daemon that would have removed them is gone)."""
    try:
        while sys.stdin.buffer.read(4096):
            pass
    finally:
        _shm.remove_owned_by(os.getpid())
        if os.getpgid(0) == os.getpid():  # what the actor started (a pool, a Popen) goes too
            with contextlib.suppress(OSError):
                os.killpg(os.getpid(), signal.SIGKILL)  # this process with it
        os._exit(70)


async def serve(bind: str, token: str | None, tls: _rpc.TLS | None) -> None:
    interceptors = [_rpc.TokenInterceptor(token)] if token else []
    server = grpc.aio.server(interceptors=interceptors, options=_rpc.server_options(_rpc.HOST_MAX_RECEIVE))
    servicer = ActorHostServicer(token, tls, bind)
    # What add_ActorHostServicer_to_server does, except that the servicer's (de)serializers count
    # bytes and let pre-encoded reply batches (bytes) pass through.
    handlers = {
        "Calls": grpc.stream_stream_rpc_method_handler(
            servicer.Calls, request_deserializer=servicer.parse, response_serializer=servicer.encode
        )
    }
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler("actorrt.v1.ActorHost", handlers),))
    server.add_registered_method_handlers("actorrt.v1.ActorHost", handlers)
    port = _rpc.listen(server, addresses.host_port(bind, 0), tls)
    metrics_fd = servicer.report_fd = metrics_fd_from_env()
    await server.start()
    print(f"{_rpc.HOST_READY_PREFIX} {port}", flush=True)
    reporter = asyncio.create_task(_report_stats(servicer, metrics_fd)) if metrics_fd is not None else None
    if metrics_fd is not None:
        _report_on_sigterm(servicer, metrics_fd)
    await servicer.finished.wait()
    if reporter is not None and metrics_fd is not None:  # now: the daemon's SIGTERM may come before the stop below ends
        reporter.cancel()
        if servicer.actor is not None:
            servicer.actor.stats.report(metrics_fd)
    await server.stop(grace=1.0)


def _report_on_sigterm(servicer: ActorHostServicer, fd: int) -> None:
    """On SIGTERM (the daemon stopping this actor) send the last call statistics, then die of
    the signal as before, so the exit status and its cause read the same."""

    def handler(signum: int, frame: Any) -> None:
        if servicer.actor is not None:
            servicer.actor.stats.report(fd)
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)

    signal.signal(signal.SIGTERM, handler)


async def _report_stats(servicer: ActorHostServicer, fd: int, period_s: float = 1.0) -> None:
    """Send the actor's call statistics to the daemon's pipe about once a second."""
    while True:
        await asyncio.sleep(period_s)
        if servicer.actor is not None:
            servicer.actor.stats.report(fd)


# Imported by every warm host, before the ones ``--preload`` / ``preload=`` name: the module of
# almost every real actor class imports numpy (~50 ms), which would otherwise be paid when the
# class arrives, on the creation's critical path (``bench/actor_calls.py --only create_numpy``).
DEFAULT_PRELOAD = ("numpy",)


def preload(names: str, report: bool = True) -> None:
    """Import ``DEFAULT_PRELOAD`` and the comma-separated module ``names`` now, while the host
    waits in the warm pool, not when an actor is placed on it. A named module that fails to
    import is reported on stderr (unless not ``report``) and the host starts without it (it is
    the actor's problem, not ours); a default one that is not installed is skipped without a
    word."""
    named = [name.strip() for name in names.split(",") if name.strip()]
    for module in DEFAULT_PRELOAD:
        if module in named:
            continue
        try:
            importlib.import_module(module)
        except ImportError:
            pass
        except Exception as e:  # noqa: BLE001 - installed but broken: say so, start without it
            if report:
                print(f"actorrt: preloading {module!r} (a default) failed: {e}", file=sys.stderr, flush=True)
    for module in named:
        try:
            importlib.import_module(module)
        except Exception as e:  # noqa: BLE001 - reported; the host starts without it
            if report:
                print(f"actorrt: preloading {module!r} failed: {e}", file=sys.stderr, flush=True)


def main(argv: Sequence[str] | None = None) -> None:
    """``python -m actorrt.host.server``, or a host a fork server forked (``actorrt.host.forkserver``)."""
    parser = argparse.ArgumentParser(prog="python -m actorrt.host.server")
    parser.add_argument("--bind", default="127.0.0.1")
    args = parser.parse_args(argv)
    set_process_name(HOST_NAME)
    threading.Thread(target=_exit_when_parent_dies, name="parent-watch", daemon=True).start()
    preload(os.environ.get("ACTORRT_PRELOAD", ""))
    token = os.environ.pop("ACTORRT_TOKEN", None)
    tls = _rpc.TLS.from_env()
    try:
        import uvloop

        uvloop.run(serve(args.bind, token, tls))
    except ImportError:
        asyncio.run(serve(args.bind, token, tls))
    sys.stdout.flush()
    sys.stderr.flush()
    # Skip interpreter teardown: user code may have left non-daemon threads behind.
    os._exit(0)


if __name__ == "__main__":
    main()
