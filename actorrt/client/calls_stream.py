"""``CallsStream``: one ``ActorHost.Calls`` stream to an actor's host, and what travels beside it.

Opening (``_open_stream``) writes the stream's first batch (construct the actor, or attach to
it, with a shared-memory probe) and reads the host's answer: its constructor's outcome, whether
the two share ``/dev/shm`` (then large buffers go through it, ``Exchange``), or else an offer of a
bulk connection (``bulk_links`` says which one a payload takes; each is opened in the background
and asked for again after a break). Calls leave through the stream's ``Outbox``; a write that
fails on our side ends the stream. ``_teardown`` closes all of it.

What the calls and replies mean, restarts and death are the actor's side, ``ActorConnection``
(``connection``), which this base class calls back for one thing: ``mark_dead`` (give up on the
actor). Loop thread, except what ``BulkLinks`` says of its own methods.
"""

from __future__ import annotations

import asyncio
import logging
import sys
from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any, Protocol

import grpc

from actorrt.client.bulk_links import BulkLinks
from actorrt.common.errors import ActorDiedError, RemoteError, rebuild_remote_error
from actorrt.transport import bulk as _bulk
from actorrt.transport import rpc as _rpc
from actorrt.transport import shm as _shm
from actorrt.transport import wire as _wire
from actorrt.transport.codec import decode
from actorrt.transport.outbox import Outbox
from actorrt.v1 import actor_host_pb2 as pb

if TYPE_CHECKING:
    from google.protobuf.message import Message

__all__ = ["CallsStream", "StreamOwner", "remote_error"]

log = logging.getLogger("actorrt.client")
_CALLS_METHOD = "/actorrt.v1.ActorHost/Calls"


class StreamOwner(Protocol):
    """What a stream asks of the cluster connection it belongs to: its loop, credentials, and a
    place to run background work (``connection.Owner`` adds what the actor's side asks)."""

    @property
    def loop(self) -> asyncio.AbstractEventLoop: ...

    @property
    def tls(self) -> _rpc.TLS | None: ...

    @property
    def token(self) -> str | None: ...

    def background(self, work: Coroutine[Any, Any, Any]) -> None:
        """Run ``work`` on the loop, kept referenced until it is done. Loop thread."""
        ...


def remote_error(what: str, failure: pb.RemoteFailure) -> RemoteError:
    """The ``RemoteError`` a host's failure reply stands for (the original type where it can be
    rebuilt here)."""
    cause: BaseException | None = None
    if failure.exception.pickle:
        try:
            cause = decode(failure.exception)
        except Exception:  # noqa: BLE001 - the type does not exist here: keep name and text
            cause = None
    return rebuild_remote_error(what, failure.type_name, failure.message, failure.traceback, cause)


class CallsStream:
    """The transport of one actor's calls: the stream, its outbox, shared memory, bulk links."""

    def __init__(self, cluster: StreamOwner, actor_id: str, endpoint: str) -> None:
        self.cluster = cluster
        self.loop = cluster.loop
        self.actor_id = actor_id
        self.endpoint = endpoint
        # Why this process gave up on the actor (``mark_dead``): nothing goes on the stream then.
        self.dead: ActorDiedError | None = None
        # Large buffers go through /dev/shm once the host proved it shares it with us.
        self.exchange: _shm.Exchange | None = None
        # Else large buffers go on the stream's bulk connections (``_bulk``) once one is open:
        # which one a payload takes, and how replies find theirs, is ``bulk_links``'s to say.
        self.bulk_links: BulkLinks[_bulk.Link] = BulkLinks()
        # The calls whose buffers went on a bulk connection, until answered: the links' own dict,
        # read per reply batch (empty unless large payloads took a link).
        self._bulk_waiting = self.bulk_links.waiting
        # Calls go straight into the outbox's next batch (cheaper than building a Call and
        # copying it into a CallBatch); set once the stream is open.
        self._outbox: Outbox[pb.CallBatch] | None = None
        self._channel: grpc.aio.Channel | None = None
        # Writes CallBatch messages, or pre-encoded bytes (_wire.passthrough); reads batches or chunks' data.
        self._call: grpc.aio.StreamStreamCall[Message | bytes, pb.ReplyBatch | memoryview] | None = None
        self._reader: asyncio.Task[None] | None = None

    def mark_dead(self, cause: str) -> None:
        """Give up on the actor: fail every call, now and later (``ActorConnection``'s)."""
        raise NotImplementedError

    # ---- opening ----------------------------------------------------------------------------

    async def _open_stream(
        self, step: pb.ConstructActor | pb.AttachActor, timeout_s: float, what: str, init: str
    ) -> None:
        """Open the stream with ``step`` as its first batch and take the host's answer; the
        outbox is ready once this returns. Raises ActorDiedError (no answer: ``what`` failed),
        RemoteError (``init``, the constructor, raised); the stream is torn down then."""
        self._channel = _rpc.open_channel(self.endpoint, self.cluster.tls)
        # The stub's own serializer, except that pre-encoded batches (bytes) pass through.
        self._call = self._channel.stream_stream(
            _CALLS_METHOD, request_serializer=_wire.passthrough, response_deserializer=_parse_reply
        )(metadata=_rpc.auth_metadata(self.cluster.token))
        probe = _shm.make_probe()
        if probe is not None:
            step.shm_probe = probe
        first = pb.CallBatch(construct=step) if isinstance(step, pb.ConstructActor) else pb.CallBatch(attach=step)
        try:
            for message in _wire.bounded(first.SerializeToString()):
                await self._call.write(message)
            async with asyncio.timeout(timeout_s if timeout_s > 0 else None):
                reply = await self._call.read()
        except (TimeoutError, grpc.RpcError) as e:
            await self._teardown()
            detail = e.details() if isinstance(e, grpc.RpcError) else f"no answer within {timeout_s:g}s"
            raise ActorDiedError(self.actor_id, f"could not {what}: {detail}") from e
        finally:
            if probe is not None:
                _shm.unlink([probe])
                step.shm_probe = ""
        if not isinstance(reply, pb.ReplyBatch) or not reply.replies:  # EOF, or not an answer
            await self._teardown()
            raise ActorDiedError(self.actor_id, f"the actor host closed the stream (could not {what})")
        answer = reply.replies[0]
        if answer.HasField("error"):
            await self._teardown()
            raise remote_error(init, answer.error)
        if reply.shared_memory:
            self.exchange = _shm.Exchange(self.loop, self._send_release)
        if reply.bulk_port:
            self._take_offer(reply.bulk_port, reply.bulk_key)
        call = self._call
        assert call is not None
        self._outbox = Outbox(
            call.write,
            pb.CallBatch,
            "calls",
            split_above=_wire.CHUNK_BYTES,
            on_error=lambda error: self._write_failed(call, error),
        )

    # ---- beside the stream: bulk connections, shared memory -----------------------------------

    def _take_offer(self, port: int, key: bytes) -> None:
        """The host offers a bulk connection: open it in the background; until it is open (or
        if it cannot be), large payloads stream in chunks."""
        epoch = self.bulk_links.offered(port, _bulk.enabled())
        if epoch is not None:
            self.cluster.background(self._open_bulk(epoch, port, key))

    async def _open_bulk(self, epoch: int, port: int, key: bytes) -> None:
        """Open offer ``epoch`` beside the stream (loop thread; the connect runs in the default
        executor). When it cannot be opened, what waited for it fails and another is asked for
        after the reopen backoff (``BulkLinks.failed``); payloads stream in chunks meanwhile."""
        call = self._call
        try:
            send_sock, recv_sock = await self.loop.run_in_executor(
                None, _bulk.connect, self.endpoint, port, key, self.cluster.tls
            )
        except OSError as e:
            if self._call is not call:  # the stream ended meanwhile, failing what waited with it
                return
            _warn_no_bulk(self.endpoint, port, e)
            error = _bulk.BulkError(f"the bulk connection could not be opened: {e}")
            consumers, delay = self.bulk_links.failed(epoch, self.dead is None and self._outbox is not None)
            for consumer in consumers:
                consumer(error)
            if delay is not None:
                self.loop.call_later(delay, self._ask_reopen, call, epoch)
            return
        if self._call is not call or not self.bulk_links.opening(epoch):  # the stream ended meanwhile
            for sock in {send_sock, recv_sock}:
                sock.close()
            return
        link = _bulk.Link(send_sock, recv_sock, self.loop, 0, self.actor_id, epoch, self._bulk_ended)
        for seq, consumer in self.bulk_links.opened(epoch, link):
            link.expect(seq, consumer)

    def _bulk_ended(self, link: _bulk.Link) -> None:
        """A bulk connection broke (loop thread). If it was the stream's latest and the stream
        lives, ask the host for another (``BulkLinks.reopen_in``); meanwhile large payloads
        stream in chunks."""
        delay = self.bulk_links.reopen_in(link, self.dead is None and self._outbox is not None)
        if delay is not None:
            self.loop.call_later(delay, self._ask_reopen, self._call, link.epoch)

    def _ask_reopen(self, call: grpc.aio.StreamStreamCall[Any, Any] | None, epoch: int) -> None:
        """Ask the host for another bulk connection after ``epoch`` broke or could not be opened
        (loop thread), unless the stream ended or moved, or a later offer came meanwhile."""
        if call is self._call and epoch == self.bulk_links.offers and self.dead is None and self._outbox is not None:
            self._outbox.push_encoded([pb.CallBatch(bulk_reopen=True).SerializeToString()])

    @property
    def shm(self) -> bool:
        """Whether large buffers go through /dev/shm on this stream (until it closes)."""
        return self.exchange is not None and not self.exchange.closed

    def _send_release(self, name: str) -> None:
        """Name a host segment we no longer use in our next batch. Loop thread."""
        if self.dead is None and self._outbox is not None:
            self._outbox.release(name)

    # ---- failures and the end -----------------------------------------------------------------

    def _write_failed(self, call: grpc.aio.StreamStreamCall[Any, Any], error: BaseException) -> None:
        """``call``'s outbox stopped. A broken stream the reader sees and settles, and a stream
        already replaced (the actor moved) or ending is not ours to judge; anything else is a
        failure on our side of a stream still open: end it, and fail the calls with why."""
        if isinstance(error, grpc.RpcError | asyncio.CancelledError) or call is not self._call or call.done():
            return  # the reader, or whoever replaced or ended the stream, settles what is pending
        self._failed_on_our_side("writing its calls failed", error)

    def _failed_on_our_side(self, what: str, error: BaseException) -> None:
        """A failure of ours on a stream still open: end the stream and fail every call saying
        why (the actor lives on, so no death or restart word would ever come)."""
        log.error("actor %s: %s", self.actor_id, what, exc_info=error)
        if self._call is not None:
            self._call.cancel()
        if self.dead is None:
            self.mark_dead(f"{what} ({type(error).__name__}: {error})")

    async def _teardown(self) -> None:
        reader = self._reader
        if reader is not None and reader is not asyncio.current_task():
            reader.cancel()
        if self._call is not None:
            self._call.cancel()
        links, waiting = self.bulk_links.ended()
        for link in links:
            link.close()
        for consumer in waiting:
            consumer(_bulk.BulkError("the stream ended"))
        if self._channel is not None:
            await self._channel.close(grace=None)
        if self._reader is reader:  # not a new stream's, opened meanwhile (a restart's move)
            self._reader = None


_warned_no_bulk: set[str] = set()


def _warn_no_bulk(endpoint: str, port: int, error: OSError) -> None:
    """Say once per host address that its bulk port cannot be reached (a firewall that lets
    only the gRPC port through, say): large payloads still travel, on gRPC, slower."""
    host = endpoint.rsplit(":", 1)[0]
    if host in _warned_no_bulk:
        return
    _warned_no_bulk.add(host)
    print(
        f"actorrt: cannot open the bulk connection to {host}:{port} ({error}); large payloads to and "
        "from actors there go on gRPC until a later try opens it (tried again after 0.5 s, backing off to "
        "30 s; open that port range, or set ACTORRT_BULK=0 to silence this)",
        file=sys.stderr,
    )


def _parse_reply(data: bytes) -> pb.ReplyBatch | memoryview:
    """The response deserializer: a chunk's data as a view (``_wire``), else the ReplyBatch."""
    chunk = _wire.chunk_data(data, _wire.REPLY_CHUNK)
    return chunk if chunk is not None else pb.ReplyBatch.FromString(data)
