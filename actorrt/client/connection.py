"""``ActorConnection``: one actor's data-plane connection, straight to its actor host.

It owns one ``ActorHost.Calls`` stream (``CallsStream``, its base: opening, shared memory,
bulk links, the outbox, teardown) and what the calls on it mean. A call is serialised on the caller's thread (so
``SerializationError`` comes at the call site) and added to the stream's ``Outbox``: a lone call
leaves at once, and calls made while a write is in flight go together in the next message.
Replies come back batched and resolve futures by seq. Connection state is touched on the
cluster's event loop only.

A connection is opened by the actor's creator (the stream's first batch constructs it) or by
any other process that got a handle (it attaches). Calls made before the stream is up, or while
a restartable actor is being constructed again, wait in ``_queued`` and leave once it is.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import threading
from collections.abc import Mapping
from typing import Any, Protocol

import grpc

from actorrt.client import pickling as _pickling
from actorrt.client.calls_stream import CallsStream, StreamOwner, remote_error
from actorrt.client.future import CallFuture
from actorrt.client.holders import Hold
from actorrt.client.pickling import copies_made
from actorrt.common.errors import ActorDiedError, RemoteError, SerializationError
from actorrt.transport import bulk as _bulk
from actorrt.transport import rpc as _rpc
from actorrt.transport import wire as _wire
from actorrt.transport.codec import Encoded, PayloadTooLargeError, decode, decode_streamed, encode
from actorrt.transport.serialization import name_culprit, ship_local_modules
from actorrt.v1 import actor_host_pb2 as pb

__all__ = ["ActorConnection", "Owner"]

log = logging.getLogger("actorrt.client")
# A call's arguments as sent: encoded whole, or (seq, messages, bulk link) when streamed.
Packed = Encoded | tuple[int, list[bytes], "_bulk.Link | None"]
# The handle copies a reply carries: (actor id, token) each.
Copies = tuple[tuple[str, str], ...]
# How long a restartable actor's connection, cut off, waits for the master to say whether the
# actor restarts or died (a lost node is noticed within the worker timeout, 10 s by default).
RESTART_VERDICT_S = 60.0
# How long a broken stream waits for the master to say why before failing the calls in flight.
DEATH_WORD_S = 0.5


class Owner(StreamOwner, Protocol):
    """What a connection, and the handles on it, ask of the cluster connection they belong to
    (``cluster.Cluster``): besides what its stream asks, its loop's thread, the payload limit,
    the master's word on deaths, and what holds the actor (``Holders``, through it). Each
    method says its thread."""

    @property
    def loop_thread(self) -> int: ...

    @property
    def max_payload_bytes(self) -> int: ...

    async def death_cause(self, actor_id: str, wait_s: float) -> str | None:
        """Why the master says ``actor_id`` died, waiting up to ``wait_s`` for the word."""
        ...

    def hold(self, conn: ActorConnection) -> None:
        """One more handle (or bound method) on ``conn``. Any thread."""
        ...

    def drop(self, conn: ActorConnection) -> None:
        """One fewer (a handle garbage-collected). Any thread."""
        ...

    def idle(self, conn: ActorConnection) -> None:
        """``conn``, whose last handle went while calls were in flight, has none left. Loop thread."""
        ...

    def send_copy(self, conn: ActorConnection) -> str:
        """A handle on ``conn`` is being pickled: its copy's token. Any thread."""
        ...

    def lost_copies(self, copies: list[tuple[str, str]], receiver: str = "") -> None:
        """These handle copies' payload failed without an answer: it never left this process,
        or it reached this one in a reply nobody unpickles here (no ``receiver``: claimed,
        holding nothing), or ``receiver`` may not have claimed them. Any thread."""
        ...


class ActorConnection(CallsStream):
    """One actor's calls over its stream: pending futures, restarts, death, and its hold."""

    cluster: Owner

    def __init__(
        self,
        cluster: Owner,
        actor_id: str,
        endpoint: str,
        kinds: dict[str, bool],
        class_name: str,
        max_restarts: int = 0,
    ) -> None:
        super().__init__(cluster, actor_id, endpoint)
        self.kinds = kinds
        self.class_name = class_name
        self.max_restarts = max_restarts
        # This process's hold on the actor through this connection: its handles, and whether it
        # let go (the cluster's ``Holders`` decide; the connection says when it is ``idle``).
        self.hold = Hold()
        # Calls made while the stream is not up (opening, or the actor restarting): they leave
        # once it is. ``waiting`` says they may wait; else such a call fails at once.
        self.waiting = False
        self._queued: list[tuple[int, str, Packed | None, CallFuture[Any]]] = []
        # Set while a cut-off restartable connection waits for the master's word.
        self._verdict: asyncio.Future[str] | None = None
        self.restarts = 0
        self.set_attr_error: RemoteError | None = None
        self._seq = itertools.count(1)
        # seq -> (future, method name, call kind) of every call sent and not answered yet
        self._pending: dict[int, tuple[CallFuture[Any], str, int]] = {}
        # The reply whose streamed value is arriving in chunks: its buffers, and its future
        # (None when nobody waits for it any more) with the pickle and the handle copies in it.
        self._incoming: tuple[_wire.Incoming, CallFuture[Any] | None, bytes, Copies] | None = None
        self._loop_thread = cluster.loop_thread

    async def open(self, construct: pb.ConstructActor, timeout_s: float) -> None:
        """Construct the actor; raises RemoteError if its __init__ raised, ActorDiedError if gone."""
        await self._open(construct, timeout_s, f"construct {self.class_name}")

    async def attach(self, timeout_s: float) -> None:
        """Open a stream to an actor another process constructed (the host waits for that)."""
        attach = pb.AttachActor(version=_rpc.PROTOCOL_VERSION, actor_id=self.actor_id)
        await self._open(attach, timeout_s, f"reach {self.class_name}")

    async def _open(self, step: pb.ConstructActor | pb.AttachActor, timeout_s: float, what: str) -> None:
        await self._open_stream(step, timeout_s, what, f"{self.class_name}.__init__")
        self._reader = asyncio.create_task(self._read())
        self.waiting = False
        queued, self._queued = self._queued, []
        for kind, name, packed, fut in queued:
            self._enqueue(kind, name, packed, fut)

    # ---- calls (any thread) -----------------------------------------------------------------

    def submit(self, kind: int, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> CallFuture[Any]:
        """Serialise the arguments here (errors come at the call site), send on the loop.

        Any thread. Raises ``SerializationError`` when an argument cannot be pickled or the
        arguments are over the size limit; nothing is sent then.
        """
        copies: list[tuple[str, str]] = []
        packed = self._pack(kind, name, args, kwargs, copies) if args or kwargs else None
        fut: CallFuture[Any] = CallFuture(loop=self.loop)
        if copies:  # handles travel in it: if the receiver dies first, they are nobody's (_settle_copies)
            fut.copies = copies
        if threading.get_ident() == self._loop_thread:
            self._enqueue(kind, name, packed, fut)
        else:
            self.loop.call_soon_threadsafe(self._enqueue, kind, name, packed, fut)
        return fut

    def _pack(
        self, kind: int, name: str, args: tuple[Any, ...], kwargs: dict[str, Any], copies: list[tuple[str, str]]
    ) -> Packed:
        """The arguments encoded (``_codec``), or, when their buffers are streamed, ``(seq,
        messages, link)``: a one-call header batch, and either the bulk connection ``link`` the
        buffers were just written to (``_bulk``) or, after the header, the chunks (``_wire``)
        with the buffers, copied now. Either way the caller may change them once this returns.
        ``copies`` gets the (actor id, token) of each handle copy pickled into them."""
        what = f"{self.class_name}.{name}"
        if not _pickling.in_actor_host:  # an actor's own modules stay by reference (its replies too)
            ship_local_modules()
        recording = copies_made.set(copies)
        try:
            encoded = encode(
                (args, kwargs),
                pool=exchange.pool if (exchange := self.exchange) is not None and not exchange.closed else None,
                limit=self.cluster.max_payload_bytes,
            )
        except PayloadTooLargeError as e:
            self.cluster.lost_copies(copies)  # the handles in them were never sent
            raise SerializationError(f"arguments of {what} are {e}; nothing was sent") from None
        except Exception as e:  # noqa: BLE001 - name the argument that failed
            try:
                name_culprit(what, args, kwargs, e)  # pickles them again: more copies
            finally:
                self.cluster.lost_copies(copies)
        finally:
            copies_made.reset(recording)
        if not encoded.streamed:
            return encoded
        seq = next(self._seq)
        header = pb.CallBatch()
        call = header.calls.add(seq=seq, method=name, kind=kind, args=encoded.payload)
        link = self.bulk_links.route()
        if link is not None and link.send(seq, encoded.streamed):
            call.args.bulk = link.epoch
            self.bulk_links.sent(seq, sum(b.nbytes for b in encoded.streamed))
            return seq, _wire.bounded(header.SerializeToString()), link
        chunks = _wire.chunks(_wire.CALL_CHUNK, encoded.streamed)
        return seq, [*_wire.bounded(header.SerializeToString()), *chunks], None

    def _enqueue(self, kind: int, name: str, packed: Packed | None, fut: CallFuture[Any]) -> None:
        """Add the call to the outgoing batch and send it if the stream is idle. Loop thread."""
        failure: BaseException | None = self.dead and self.dead.copy()
        if failure is None and self.set_attr_error is not None and kind != pb.CALL_KIND_SET_ATTR:
            failure, self.set_attr_error = self.set_attr_error, None
        if failure is None and self._outbox is None and self.waiting:
            self._queued.append((kind, name, packed, fut))
            return
        if failure is not None or self._outbox is None:
            if isinstance(packed, Encoded) and self.exchange is not None:
                self.exchange.pool.release(packed.segments())
            elif isinstance(packed, tuple) and (link := packed[2]) is not None:
                self.bulk_links.answered([packed[0]])
                if self._outbox is not None and self.bulk_links.is_current(link):  # the host holds its frame
                    self._outbox.push_encoded(
                        [pb.CallBatch(dropped_frames={packed[0]: link.epoch}).SerializeToString()]
                    )
            self._settle_copies(fut, sent=False)
            fut.set_exception(failure or ActorDiedError(self.actor_id, "the actor is not connected"))
            return
        if isinstance(packed, tuple):
            seq, messages, link = packed
            if link is not None and not self.bulk_links.is_current(link):  # sent to a stream now gone
                self.bulk_links.answered([seq])
                self._settle_copies(fut, sent=False)
                fut.set_exception(ActorDiedError(self.actor_id, "the connection to the actor was lost during the call"))
                return
            self._pending[seq] = (fut, name, kind)
            self._outbox.push_encoded(messages)
            return
        seq = next(self._seq)
        self._pending[seq] = (fut, name, kind)
        if packed is not None and packed.in_message > _wire.CHUNK_BYTES:
            # A large payload leaves in a batch of its own: two in one could pass what protobuf encodes.
            alone = pb.CallBatch()
            alone.calls.add(seq=seq, method=name, kind=kind, args=packed.payload)
            self._outbox.push_encoded(_wire.bounded(alone.SerializeToString()))
            return
        call = self._outbox.batch.calls.add(seq=seq, method=name, kind=kind)
        if packed is not None:
            call.args.CopyFrom(packed.payload)
            self._outbox.added(packed.in_message)
        self._outbox.flush()

    # ---- loop tasks -------------------------------------------------------------------------

    @property
    def busy(self) -> bool:
        """Whether calls are in flight, or queued until the stream is up. Loop thread."""
        return bool(self._pending or self._queued)

    async def _read(self) -> None:
        assert self._call is not None
        hold = self.hold
        detail = "the actor host closed the stream"
        try:
            while True:
                batch = await self._call.read()
                if isinstance(batch, memoryview):
                    self._take_chunk(batch)
                    continue
                if not isinstance(batch, pb.ReplyBatch):  # grpc.aio.EOF
                    break
                if batch.released and self.exchange is not None:
                    self.exchange.peer_released(batch.released)
                if batch.bulk_port:  # a new bulk connection, after ours broke
                    self._take_offer(batch.bulk_port, batch.bulk_key)
                self._settle(batch.replies)
                if hold.draining and not self._pending:  # its last handle went meanwhile
                    self.cluster.idle(self)
                # The callers just answered run before the next read is armed (a start_batch
                # into gRPC core and several coroutine frames): a lone call's round trip ends
                # once its reply is parsed, and its next call is written before the read is
                # armed, as in a bare ping-pong (bench/README.md: ~3 % of a round trip).
                await asyncio.sleep(0)
        except grpc.RpcError as e:
            detail = f"connection to its host lost ({e.code().name}: {e.details()})"
        except ValueError as e:  # a malformed chunk stream
            detail = f"the actor host broke the protocol: {e}"
            if self._call is not None:
                self._call.cancel()
        except asyncio.CancelledError:
            return
        except Exception as e:  # noqa: BLE001 - a bug of ours: fail what is in flight, not leave it waiting
            self._failed_on_our_side("the client could not read its host's replies", e)
            return
        if self.dead is not None:
            return
        if self.max_restarts == 0:
            cause = await self.cluster.death_cause(self.actor_id, wait_s=DEATH_WORD_S) or detail
            self.mark_dead(cause)
            return
        # It may restart: later calls wait for the master's word (ActorRestarting, then
        # ActorMoved; or ActorDied), which also fails what was in flight (at most once) saying
        # why; if that word is slow, what was in flight fails now.
        self.waiting = True
        self._verdict = self.loop.create_future()
        try:
            async with asyncio.timeout(DEATH_WORD_S):
                await asyncio.shield(self._verdict)
        except TimeoutError:
            self._cut_off(ActorDiedError(self.actor_id, detail))
            try:
                async with asyncio.timeout(RESTART_VERDICT_S):
                    await self._verdict
            except TimeoutError:
                self.mark_dead(f"{detail}; the master said nothing of it within {RESTART_VERDICT_S:g}s")
        finally:
            self._verdict = None

    def _cut_off(self, error: ActorDiedError) -> None:
        """The stream is gone but the actor may come back: fail what was sent, queue what is not."""
        self.waiting = True
        self._fail_pending(error)
        if self.exchange is not None:
            self.exchange.close()
            self.exchange = None
        if self._outbox is not None:
            self._outbox.clear()
            self._outbox = None
        if self.hold.draining and not self._queued:  # its last handle went while calls were in flight
            self.cluster.idle(self)

    def restarting(self, cause: str, restarts: int) -> None:
        """The master says the actor's process died and it is being placed again. Loop thread."""
        if self.dead is not None:
            return
        self.restarts = restarts
        limit = "unlimited" if self.max_restarts < 0 else f"of {self.max_restarts}"
        self._cut_off(ActorDiedError(self.actor_id, f"{cause} (restarting it: restart {restarts} {limit})"))
        if self._verdict is not None and not self._verdict.done():
            self._verdict.set_result("restarting")
        self.cluster.background(self._teardown())

    async def moved(self, endpoint: str, construct: pb.ConstructActor | None, timeout_s: float) -> None:
        """The restarted actor has a new host: construct it there (``construct``: its creator's
        step) or attach."""
        if self.dead is not None:
            return
        if not self.waiting or self._pending:  # moved with no ActorRestarting heard (it was lost)
            self._cut_off(ActorDiedError(self.actor_id, "it was restarted elsewhere while its notice was lost"))
        await self._teardown()
        self.endpoint = endpoint
        self.waiting = True
        if construct is not None:
            await self.open(construct, timeout_s)
        else:
            await self.attach(timeout_s)

    def _settle(self, replies: Any) -> None:
        """Resolve the futures of a batch's replies. Loop thread."""
        if self._bulk_waiting:
            self.bulk_links.answered([reply.seq for reply in replies])
        for reply in replies:
            entry = self._pending.pop(reply.seq, None)
            if reply.HasField("error"):
                if entry is not None and not entry[0].done():
                    self._fail(entry, reply.error)
                if reply.copies:  # a value that failed to pickle whole, or the exception's (claimed if unpickled)
                    self._unclaimed(_copies(reply.copies))
                continue
            value = reply.value
            if not value.pickle:  # a reply with no outcome reads as None
                if entry is not None and not entry[0].done():
                    entry[0].set_result(None)
                continue
            if value.streamed:  # its chunks come next, whether or not anyone waits
                live = entry[0] if entry is not None and not entry[0].done() else None
                copies = _copies(reply.copies) if reply.copies else ()  # not the message: it may be large
                if value.bulk:  # or its buffers come on a bulk connection
                    self._expect_bulk(reply.seq, live, value.pickle, value.bulk, copies)
                    continue
                self._incoming = (_wire.Incoming(value.streamed, keep=live is not None), live, value.pickle, copies)
                continue
            if entry is None or entry[0].done():  # cancelled, or timed out: nobody maps its segments
                if value.shared and self.exchange is not None:
                    self.exchange.unused(value.shared)
                if reply.copies:
                    self._unclaimed(_copies(reply.copies))
                continue
            if value.shared and self.exchange is not None:
                self.exchange.saw(value.shared)
            try:
                entry[0].set_result(decode(value, self.exchange.on_release if self.exchange else _no_release))
            except Exception as e:  # noqa: BLE001 - e.g. a class missing here
                entry[0].set_exception(e)
                if reply.copies:
                    self._unclaimed(_copies(reply.copies))

    def _unclaimed(self, copies: Copies) -> None:
        """The handle copies in a reply this process did not unpickle (nobody waited for it any
        more, or its value could not be unpickled here): claimed, holding nothing, so that they
        hold their actors no more. After the claims of the handles a failed unpickling made
        before it failed (queued on the loop first: the master ignores a copy's second claim).
        Loop thread."""
        self.loop.call_soon(self.cluster.lost_copies, list(copies))

    def _expect_bulk(self, seq: int, fut: CallFuture[Any] | None, pickled: bytes, epoch: int, copies: Copies) -> None:
        """Reply ``seq``'s buffers come on bulk connection ``epoch``: unpickle them into
        ``fut``'s value once there (or drop them when nobody waits, letting go of the handle
        ``copies`` in it)."""

        def consume(got: _bulk.Arrival) -> None:
            if fut is None or fut.done():
                if copies:
                    self._unclaimed(copies)
                return
            if isinstance(got, BaseException) or got is None:
                fut.set_exception(ActorDiedError(self.actor_id, f"the reply's value was lost: {got}"))
                if copies:
                    self._unclaimed(copies)
                return
            try:
                fut.set_result(decode_streamed(pickled, got))
            except Exception as e:  # noqa: BLE001 - e.g. a class missing here
                fut.set_exception(e)
                if copies:
                    self._unclaimed(copies)

        if (link := self.bulk_links.link(epoch)) is not None:
            if fut is None:
                link.drop(seq)
                if copies:
                    self._unclaimed(copies)
            else:
                link.expect(seq, consume)
        elif not self.bulk_links.wait_open(epoch, seq, consume):
            consume(_bulk.BulkError("the reply came on a bulk connection this stream does not have"))

    def _fail(self, entry: tuple[CallFuture[Any], str, int], failure: pb.RemoteFailure) -> None:
        fut, name, kind = entry
        err = remote_error(f"{self.class_name}.{name}", failure)
        fut.set_exception(err)
        if kind == pb.CALL_KIND_SET_ATTR:  # nobody holds this future: keep it for the next call
            fut.exception()
            self.set_attr_error = err

    def _take_chunk(self, data: memoryview) -> None:
        if self._incoming is None:
            raise ValueError("a chunk came with no streamed reply before it")
        incoming, fut, pickled, copies = self._incoming
        if not incoming.add(data):
            return
        self._incoming = None
        if fut is None or fut.done():
            if copies:
                self._unclaimed(copies)
            return
        try:
            fut.set_result(decode_streamed(pickled, incoming.buffers))
        except Exception as e:  # noqa: BLE001 - e.g. a class missing here
            fut.set_exception(e)
            if copies:
                self._unclaimed(copies)

    def mark_dead(self, cause: str) -> None:
        """Fail every pending and later call with ActorDiedError(cause). Loop thread only."""
        if self.dead is None:
            self.dead = ActorDiedError(self.actor_id, cause)
        self.waiting = False
        self._fail_pending(self.dead)
        if self._verdict is not None and not self._verdict.done():
            self._verdict.set_result("died")
        if self.exchange is not None:
            self.exchange.close()
        if self._outbox is not None:
            self._outbox.clear()

    def _fail_pending(self, error: ActorDiedError) -> None:
        """Fail the calls sent and not answered, and (once dead) those still queued."""
        if self._bulk_waiting:
            self.bulk_links.forget_sent()
        pending, self._pending = self._pending, {}
        futures = [fut for fut, _, _ in pending.values()]
        for fut in futures:
            self._settle_copies(fut, sent=True)
        if self._incoming is not None:
            _, streamed, _, copies = self._incoming  # it ran: the receiver claimed what it carried
            self._incoming = None
            if streamed is not None:
                futures.append(streamed)
            if copies:  # its value, never unpickled here
                self._unclaimed(copies)
        if not self.waiting:
            for *_, fut in self._queued:
                self._settle_copies(fut, sent=False)
                futures.append(fut)
            self._queued = []
        for fut in futures:
            if not fut.done():
                fut.set_exception(error.copy())
                fut.exception()  # whoever awaits it still gets the error; nobody else is nagged

    def _settle_copies(self, fut: CallFuture[Any], sent: bool) -> None:
        """A call that carried handle copies fails without an answer: never ``sent``, this
        client claims them itself; sent, the receiver may have died before it claimed them,
        and the master voids those it did not once that receiver's process is gone."""
        copies = fut.copies
        if copies is None:
            return
        fut.copies = None
        self.cluster.lost_copies(copies, self.actor_id if sent else "")

    async def close(self, cause: str) -> None:
        self.mark_dead(cause)
        await self._teardown()


def _copies(named: Mapping[str, str]) -> Copies:
    """The (actor id, token) of the handle copies a reply names (``Reply.copies``: token -> actor id)."""
    return tuple((actor_id, token) for token, actor_id in named.items())


def _no_release(name: str) -> None:
    """Where a payload maps no segment: nothing to release."""
