"""The client: ``actorrt.connect()`` and the ``Cluster`` it yields.

``Cluster`` ties together what a client is: its session with the master (``MasterSession``:
placements, deaths, actor output), what it knows of its placements and actors (``ClientState``,
a plain object), one data connection per actor (``ActorConnection``), and, with no address, the
embedded cluster it started (``start_embedded``).

Used as ``async with connect()`` everything runs on the caller's loop. Used as ``with connect()``
(a plain script) the cluster runs on a background loop thread, and ``CallFuture.result()``
blocks the caller's thread only.
"""

from __future__ import annotations

import asyncio
import atexit
import logging
import math
import os
import threading
import uuid
from collections.abc import Coroutine, Sequence
from types import TracebackType
from typing import Any

import grpc

from actorrt.client import current as _current
from actorrt.client import pickling as _pickling
from actorrt.client.connection import ActorConnection, Owner
from actorrt.client.files import MAX_FILES_BYTES, collect_files
from actorrt.client.future import CallFuture, spawn
from actorrt.client.handle import ActorHandle, member_kinds
from actorrt.client.holders import Effects, Holders
from actorrt.client.options import ActorOptions, options_of
from actorrt.client.output import OutputPrinter
from actorrt.client.session import MasterSession
from actorrt.client.state import ClientState
from actorrt.common import home
from actorrt.common.errors import (
    SLOT_NOT_READY,
    ActorDiedError,
    ActorNameTakenError,
    ActorNotFoundError,
    ClusterConnectionError,
    PlacementError,
    RemoteError,
    SerializationError,
)
from actorrt.common.status import ClusterStatus
from actorrt.transport import rpc as _rpc
from actorrt.transport.serialization import dumps, name_culprit, ship_local_modules
from actorrt.v1 import actor_host_pb2, common_pb2
from actorrt.v1 import master_pb2 as pb

__all__ = ["Cluster", "connect", "get_actor", "kill"]

log = logging.getLogger("actorrt.client")

PLACE_ATTEMPTS = 5  # placements of one actor whose host was gone before its constructor ran
RELEASE_WAIT_S = 10.0  # how long a kill or a failed construction waits for the master to free the slot
DEATH_GRACE_S = 2.0  # how long a construction reported dead may still say how it ended
PLACEMENT_WARN_S = 10.0  # a placement still waiting this long is logged (every slot may be taken)
_VALIDATE = os.environ.get("ACTORRT_VALIDATE") == "1"


class Cluster:
    """A connection to an actorrt cluster. Get one from ``actorrt.connect()``."""

    def __init__(
        self,
        address: str | None,
        *,
        token: str | None,
        files: Sequence[str],
        timeout: float,
        placement_timeout: float,
        embedded_cpus: int | None,
        tls: _rpc.TLS | None,
        max_payload_mb: int,
        preload: Sequence[str] = (),
        log_to_driver: bool = True,
        actor_id: str = "",
    ) -> None:
        self._preload = tuple(preload)
        self.actor_id = actor_id  # set when this is an actor's own connection (``_actor_client``)
        self.address = address or os.environ.get("ACTORRT_ADDRESS") or ""
        self.tls = tls if self.address else None  # the embedded cluster stays on loopback, in-process
        if max_payload_mb < 1:
            raise ValueError(f"connect: max_payload_mb must be >= 1, got {max_payload_mb}")
        for name, value, least in (("timeout", timeout, "> 0"), ("placement_timeout", placement_timeout, ">= 0")):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise TypeError(f"connect: {name} must be a number of seconds, got {value!r}")
            if value < 0 or (least == "> 0" and value == 0):
                hint = " (0 waits forever)" if name == "placement_timeout" else ""
                raise ValueError(f"connect: {name} must be {least} seconds{hint}, got {value!r}")
        self.max_payload_bytes = max_payload_mb * 2**20
        self.token = home.load_token(token) if self.address else (token or home.new_token())
        self.client_id = uuid.uuid4().hex[:16]
        self.timeout = timeout
        self.placement_timeout = placement_timeout
        self.closed = False
        self.log_to_driver = log_to_driver
        self.loop: asyncio.AbstractEventLoop  # the cluster's loop: set by _start
        # Who holds what: this client's holds on its actors (any thread), inside what it knows of
        # its placements, restarts and deaths (the loop).
        self.holders: Holders[ActorConnection] = Holders(self.client_id)
        self.state: ClientState[asyncio.Future[Any], ActorConnection] = ClientState(self.holders)
        self._files_patterns = tuple(files)
        self._files: list[actor_host_pb2.ShippedFile] = []
        self._embedded_cpus = embedded_cpus
        self._embedded: list[Any] = []
        self._session: MasterSession | None = None
        self._thread: threading.Thread | None = None
        self._closing: set[asyncio.Future[None]] = set()  # connections closing: the loop keeps only weak refs
        self._printer = OutputPrinter()  # actors' output, printed off the loop

    @property
    def embedded(self) -> bool:
        return bool(self._embedded)

    def _checked(self) -> None:
        if _VALIDATE:
            self.state.validate()

    # ---- lifecycle (cluster loop) -------------------------------------------------------------

    async def _start(self) -> None:
        self.loop = asyncio.get_running_loop()
        self.loop_thread = threading.get_ident()
        self._files = collect_files(self._files_patterns, min(self.max_payload_bytes, MAX_FILES_BYTES))
        if not self.address:
            from actorrt.local import start_embedded  # the servers load only when needed

            assert self.token is not None  # __init__ makes one for an embedded cluster
            self.address, self._embedded = await start_embedded(self.token, self._embedded_cpus, self._preload)
        self._session = MasterSession(
            self.address,
            token=self.token,
            tls=self.tls,
            client_id=self.client_id,
            timeout=self.timeout,
            mute_output=not self.log_to_driver,
            on_notice=self._on_notice,
            unanswered=self._unanswered,
            actor_id=self.actor_id,
        )
        await self._session.open()

    def _on_notice(self, notice: pb.ClientNotice) -> None:
        kind = notice.WhichOneof("notice")
        if kind == "actor_placed":
            placed = notice.actor_placed
            waiter = self.state.answered(placed.request_id, placed.actor_id)
            if waiter is not None and not waiter.done():
                waiter.set_result(placed)
            elif waiter is not None or not self.state.repeated(placed.request_id, placed.actor_id):
                self._send_release(placed.actor_id, "its placement was abandoned")  # nobody waits any more
        elif kind == "placement_failed":
            failed = notice.placement_failed
            waiter = self.state.answered(failed.request_id)
            if waiter is not None and not waiter.done():
                taken = failed.code == pb.PLACEMENT_FAILURE_NAME_TAKEN
                waiter.set_exception((ActorNameTakenError if taken else PlacementError)(failed.reason))
        elif kind == "actor_output":
            if self.log_to_driver:
                self._printer.submit(notice.actor_output)
        elif kind == "actor_found":
            found = notice.actor_found
            waiter = self.state.found(found.request_id, found.actor_id)
            if waiter is not None and not waiter.done():
                waiter.set_result(found)
            self._drop_unclaimed()
        elif kind == "actor_restarting":
            restarting = notice.actor_restarting
            self.state.restarting(restarting.actor_id)
            conn = self.holders.connection(restarting.actor_id)
            if conn is not None:
                conn.restarting(restarting.cause, restarting.restarts)
        elif kind == "actor_moved":
            moved = notice.actor_moved
            conn = self.holders.connection(moved.actor_id)
            there = conn is not None and conn.dead is None and not conn.waiting and conn.endpoint == moved.endpoint
            # A notice sent again after a reconnect for a move this client followed is not news.
            if self.state.follows(moved.actor_id, moved.restarts, moved.endpoint) and not there:
                spec = self.state.spec(moved.actor_id) if moved.construct else None
                if conn is not None or spec is not None:
                    self.background(self._follow(conn, moved, spec))
        elif kind == "actor_died":
            died = notice.actor_died
            conn, waiters, holds = self.state.died(died.actor_id, died.cause)
            if conn is not None:
                conn.mark_dead(died.cause)
                self.background(conn.close(died.cause))
            for held in holds:  # its arguments will not be needed again
                self.drop(held)
            for waiter in waiters:
                if not waiter.done():
                    waiter.set_result(died.cause)
        self._checked()

    def background(self, work: Coroutine[Any, Any, Any]) -> None:
        """Run ``work`` (a coroutine) on the loop, kept referenced until it is done."""
        task = asyncio.ensure_future(work)
        self._closing.add(task)
        task.add_done_callback(self._closing.discard)

    def _unanswered(self) -> list[pb.ClientEvent]:
        """What a new master must hear again (``ClientState.reopened``); a connection that gave
        up on its actor counts as holding it no more."""
        return self.state.reopened(lambda conn: conn.dead is None)

    async def _follow(
        self, conn: ActorConnection | None, moved: pb.ActorMoved, spec: actor_host_pb2.ConstructActor | None
    ) -> None:
        """A restarted actor has a new host: construct it there (``spec``: we created it) or
        attach. A creator that holds no handle any more (or whose connection gave up on it)
        constructs it for those who do, then closes that stream."""
        if spec is not None:
            del spec.gpu_ids[:]
            spec.gpu_ids.extend(moved.gpu_ids)
            spec.restarts = moved.restarts
        builder = None
        if conn is None or (spec is not None and conn.dead is not None):  # none of ours, or ours gave up on it
            assert spec is not None
            conn = builder = ActorConnection(self, moved.actor_id, moved.endpoint, {}, spec.class_name)
        try:
            await conn.moved(moved.endpoint, spec, self.timeout)
        except RemoteError as e:  # its constructor raised this time: the restart failed for good
            cause = f"its constructor failed when restarting it: {e}"
            self._send_release(conn.actor_id, cause)
            conn.mark_dead(cause)
        except ActorDiedError as e:
            if conn.dead is not None:
                pass
            elif spec is None:
                await self._relocate(conn, e.cause)
            elif isinstance(e.__cause__, TimeoutError):  # its host lives, the actor is not built on it
                cause = f"its constructor did not finish within {self.timeout:g}s when restarting it"
                self._send_release(conn.actor_id, cause)
                conn.mark_dead(cause)
            else:  # its host is gone (the master places it again or reports its death), or out of
                # our reach for now: the same notice sent again after a reconnect is tried again
                self.state.unfollow(moved.actor_id, moved.restarts, moved.endpoint)
        finally:
            if builder is not None:
                await builder.close("constructed for its holders; its creator uses no stream of its own to it")

    async def _relocate(self, conn: ActorConnection, detail: str) -> None:
        """Attaching failed: ask the master where the actor is now, and try once more there."""
        found = await self._lookup(pb.LookupActor(actor_id=conn.actor_id))
        if found is None or not found.actor_id:
            conn.mark_dead(await self.death_cause(conn.actor_id, 0.5) or detail)
            return
        if not found.endpoint or conn.dead is not None:  # restarting: an ActorMoved follows
            return
        conn.endpoint = found.endpoint
        try:
            await conn.attach(self.timeout)
        except ActorDiedError as e:
            conn.mark_dead(await self.death_cause(conn.actor_id, 0.5) or e.cause)

    async def _lookup(self, step: pb.LookupActor) -> pb.ActorFound | None:
        msg = pb.ClientEvent(lookup_actor=step)
        fut: asyncio.Future[Any] = self.loop.create_future()
        request_id = self.state.look_up(msg, fut)
        assert self._session is not None
        self._session.send(msg)
        try:
            async with asyncio.timeout(self.timeout if self.timeout > 0 else None):
                found: pb.ActorFound = await fut
            return found
        except TimeoutError:
            return None
        finally:
            self.state.looked_up(request_id)
            # After the caller made its handle from the answer (it does, before it yields).
            self.loop.call_soon(self._drop_unclaimed)

    def _drop_unclaimed(self) -> None:
        """Let go of the actors the master counts this client a holder of only for lookups whose
        askers made no handle from the answer (cancelled or timed out before it came)."""
        self._send_all(self.state.take_unclaimed())

    def _send_all(self, events: list[pb.ClientEvent]) -> None:
        """Send session steps (loop thread); none once there is no session to send them on."""
        if self._session is not None and not self.closed:
            for event in events:
                self._session.send(event)

    # ---- handles and references (any thread) ------------------------------------------------

    def make_handle(self, conn: ActorConnection) -> ActorHandle[Any]:
        """A new handle on ``conn``, counted (each handle's ``__del__`` calls ``drop``)."""
        self.holders.hold(conn)
        return ActorHandle(conn)

    def hold(self, conn: ActorConnection) -> None:
        """One more live handle (or bound method) on ``conn``; any thread."""
        self.holders.hold(conn)

    def drop(self, conn: ActorConnection) -> None:
        """A handle was garbage-collected (any thread, even inside the loop's own code)."""
        if not self.holders.drop(conn) or self.closed:
            return
        try:
            self.loop.call_soon_threadsafe(self._last_handle_gone, conn)
        except RuntimeError:  # the loop is closed: the connection is gone with it
            pass

    def _last_handle_gone(self, conn: ActorConnection) -> None:
        self._let_go(self.state.last_gone(conn, conn.busy))

    def idle(self, conn: ActorConnection) -> None:
        """``conn``, whose last handle went while calls were in flight, has none left. Loop thread."""
        self._let_go(self.state.idle(conn))

    def _let_go(self, effects: Effects[ActorConnection]) -> None:
        """This process holds no handle to a connection's actor any more: say so, close it."""
        self._send_all(effects.events)
        if effects.close is not None:
            self.background(effects.close.close("its last handle in this process was dropped"))
        self._checked()

    def _send_soon(self, event: pb.ClientEvent) -> None:
        """Queue a session step from any thread, in the order asked."""
        if self._session is None or self.closed:
            return
        if threading.get_ident() == self.loop_thread:
            self._session.send(event)
        else:
            self.loop.call_soon_threadsafe(self._session.send, event)

    def send_copy(self, conn: ActorConnection) -> str:
        """A handle is being pickled (any thread): a token the master counts as a holder until
        the receiving process claims the copy (``receive_copy``)."""
        if self.closed:
            raise ClusterConnectionError(f"cannot send a handle to {conn.actor_id}: its cluster connection is closed")
        token, add_ref = self.holders.copy(conn)
        self._send_soon(add_ref)
        made = _pickling.copies_made.get()
        if made is not None:
            made.append((conn.actor_id, token))
        return token

    def take_back(self, copies: list[tuple[str, str]]) -> None:
        """The payload these handle copies were pickled into never left this process (any
        thread): nobody will claim them, so this client does (``Holders.take_back``)."""
        for event in Holders.take_back(copies):
            self._send_soon(event)

    def void_copies(self, copies: list[tuple[str, str]], receiver: str) -> None:
        """The call these handle copies were pickled into failed without an answer from its
        receiver (any thread): the master voids those it did not claim (``Holders.void``)."""
        for event in Holders.void(copies, receiver):
            self._send_soon(event)

    def receive_copy(
        self, actor_id: str, endpoint: str, class_name: str, kinds: dict[str, bool], max_restarts: int, token: str
    ) -> ActorConnection:
        """A pickled handle arrived in this process (any thread): hold the actor, reach it. The
        connection, with the handle counted on it (``_rebuild`` makes it); raises
        ClusterConnectionError once this cluster connection is closed."""
        if self.closed:
            raise ClusterConnectionError("a handle arrived, but this process's cluster connection is closed")
        conn, first = self._connection_for(actor_id, endpoint, class_name, kinds, max_restarts)
        self.loop.call_soon_threadsafe(self._claim, conn, token, first)
        return conn

    def _connection_for(
        self, actor_id: str, endpoint: str, class_name: str, kinds: dict[str, bool], max_restarts: int
    ) -> tuple[ActorConnection, bool]:
        """The connection this process has to ``actor_id``, or a new one (True) to attach, with
        one more handle counted on it (``Holders.connect``). Any thread."""

        def new() -> ActorConnection:
            conn = ActorConnection(self, actor_id, endpoint, kinds, class_name, max_restarts)
            conn.waiting = True  # calls wait for the stream (or for the restart) to be up
            return conn

        cause = self.state.cause(actor_id)
        conn, first = self.holders.connect(actor_id, lambda conn: conn.dead is None, new, dead=cause is not None)
        if cause is not None:
            self.loop.call_soon_threadsafe(conn.mark_dead, cause)
        return conn, first

    def _claim(self, conn: ActorConnection, token: str, first: bool) -> None:
        """Loop thread: tell the master this process holds the actor and the copy arrived."""
        assert self._session is not None
        for event in Holders.claim(conn.actor_id, token, first):
            self._session.send(event)
        if first:
            self.background(self._attach(conn))

    async def _attach(self, conn: ActorConnection) -> None:
        if not conn.endpoint:  # restarting: an ActorMoved tells where it will be
            return
        try:
            await conn.attach(self.timeout)
        except ActorDiedError as e:
            if conn.dead is None:
                await self._relocate(conn, e.cause)

    async def get_actor(self, name: str) -> ActorHandle[Any]:
        """The named actor's handle (cluster loop); raises ActorNotFoundError."""
        if not isinstance(name, str) or not name:
            raise ValueError(f"get_actor: name must be a non-empty str, got {name!r}")
        if self.closed:
            raise ClusterConnectionError("the cluster connection is closed")
        found = await self._lookup(pb.LookupActor(name=name))
        if found is None:
            raise ClusterConnectionError(f"get_actor({name!r}): the master did not answer within {self.timeout:g}s")
        if not found.actor_id:
            raise ActorNotFoundError(f"get_actor({name!r}): {found.reason}")
        kinds = {**dict.fromkeys(found.shape.attributes, False), **dict.fromkeys(found.shape.methods, True)}
        conn, first = self._connection_for(found.actor_id, found.endpoint, found.class_name, kinds, found.max_restarts)
        handle: ActorHandle[Any] = ActorHandle(conn)  # counted by _connection_for
        if first:  # the lookup counted us as a holder, but an older connection's release may have
            # come after it: say so again (a holder is counted once)
            self._claim(conn, "", first)
        return handle

    async def death_cause(self, actor_id: str, wait_s: float) -> str | None:
        """Why the master says ``actor_id`` died, waiting up to ``wait_s`` for the notice."""
        cause = self.state.cause(actor_id)
        if cause is not None:
            return cause
        waiter: asyncio.Future[Any] = self.loop.create_future()
        self.state.await_death(actor_id, waiter)
        try:
            async with asyncio.timeout(wait_s):
                said: str = await waiter
            return said
        except TimeoutError:
            return None
        finally:
            self.state.forget_waiter(actor_id, waiter)

    async def _close(self) -> None:
        if self.closed:
            return
        self.closed = True
        conns, waiters = self.state.closed()
        for conn in conns:
            await conn.close("its client closed the cluster connection")
        for waiter in waiters:
            if not waiter.done():
                waiter.set_exception(ClusterConnectionError("the cluster connection was closed"))
        if self._session is not None:
            await self._session.close()
        for service in reversed(self._embedded):
            await service.close()
        self._printer.close()  # bounded: a terminal that blocks holds the close 1 s at most

    # ---- placement and actors (cluster loop) ----------------------------------------------------

    def _send_release(self, actor_id: str, reason: str) -> bool:
        """Ask the master to stop ``actor_id``; False when there is no session to ask. A
        restartable one is never placed again for this client after a master restart."""
        self.state.released(actor_id)
        if self._session is None or self.closed:
            return False
        self._session.send(pb.ClientEvent(release_actor=pb.ReleaseActor(actor_id=actor_id, reason=reason)))
        return True

    async def _release_and_wait(self, actor_id: str, reason: str, wait_s: float = RELEASE_WAIT_S) -> None:
        """Release ``actor_id`` and wait (bounded) until the master has freed its slot: whoever
        learns of the kill or of the failed construction may count the slots at once."""
        if self._send_release(actor_id, reason):
            await self.death_cause(actor_id, wait_s)

    async def create_actor(
        self, cls: type, args: tuple[Any, ...], kwargs: dict[str, Any], options: ActorOptions | None = None
    ) -> ActorHandle[Any]:
        """Place an actor and construct it on its host (cluster loop); every wait is bounded.
        ``options``: those to place it with (default: the class's, ``options_of(cls)``).

        A placement whose host was gone before the constructor ran (its warm host had just
        died: connection refused, or the worker said the slot was not ready) is released and
        placed again, up to ``PLACE_ATTEMPTS`` times within the placement timeout. Only a
        constructor that ran and raised, or a host that went away while constructing, fails it.
        """
        opts = options if options is not None else options_of(cls)
        class_name = cls.__qualname__
        ship_local_modules()
        holds: list[ActorConnection] = []  # a restartable one's arguments hold the actors of their handles
        copies: list[tuple[str, str]] = []  # the handle copies in them, taken back if no host gets them
        pickling = _pickling.handles_pickled.set(holds if opts.max_restarts != 0 else None)
        recording = _pickling.copies_made.set(copies)
        try:
            spec = _dump_spec(cls, args, kwargs)
        except BaseException:
            self.take_back(copies)
            raise
        finally:
            _pickling.copies_made.reset(recording)
            _pickling.handles_pickled.reset(pickling)
        if self.closed:
            raise ClusterConnectionError("the cluster connection is closed")
        timeout = opts.placement_timeout if opts.placement_timeout is not None else self.placement_timeout
        deadline = self.loop.time() + timeout if timeout > 0 else None
        kinds = member_kinds(cls)
        place = pb.PlaceActor(
            resources=common_pb2.Resources(
                num_cpus=opts.num_cpus, num_gpus=opts.num_gpus, max_memory_mb=opts.max_memory_mb or 0
            ),
            class_name=class_name,
            name=opts.name or "",
            detached=opts.lifetime == "detached",
            max_restarts=opts.max_restarts,
            scheduling=pb.SCHEDULING_SPREAD if opts.scheduling == "spread" else pb.SCHEDULING_UNSPECIFIED,
            node=opts.node or "",
            shape=pb.ActorShape(
                methods=[n for n, m in kinds.items() if m], attributes=[n for n, m in kinds.items() if not m]
            ),
        )
        unsent = True  # no host has the arguments yet: nobody will claim the handle copies in them
        sent_to = ""  # the actor whose host got them last
        try:
            for attempt in range(1, PLACE_ATTEMPTS + 1):
                left = max(0.001, deadline - self.loop.time()) if deadline is not None else 0.0
                placed = await self._request_placement(place, left, timeout)
                conn = ActorConnection(self, placed.actor_id, placed.endpoint, kinds, class_name, opts.max_restarts)
                construct = actor_host_pb2.ConstructActor(
                    version=_rpc.PROTOCOL_VERSION,
                    actor_id=placed.actor_id,
                    class_name=class_name,
                    spec=spec,
                    max_concurrency=opts.max_concurrency,
                    gpu_ids=placed.gpu_ids,
                    files=self._files,
                    max_payload_bytes=self.max_payload_bytes,
                )
                try:
                    unsent = False
                    sent_to = placed.actor_id
                    await self._construct(conn, construct)
                except ActorDiedError as e:
                    retry = _never_constructed(e, self.state.cause(placed.actor_id))
                    unsent = retry  # no host got the arguments
                    out_of_time = deadline is not None and self.loop.time() >= deadline
                    if not retry or attempt == PLACE_ATTEMPTS or out_of_time:
                        await self._release_and_wait(
                            placed.actor_id,
                            "its constructor failed" if not retry else "its host was gone before its constructor ran",
                        )
                        raise
                    log.info(
                        "placing %s again (attempt %d of %d): %s", class_name, attempt + 1, PLACE_ATTEMPTS, e.cause
                    )
                    if place.name:  # the name is free once the master has heard that this one ended
                        await self._release_and_wait(placed.actor_id, "its host was gone before its constructor ran")
                    else:
                        self._send_release(placed.actor_id, "its host was gone before its constructor ran")
                    await asyncio.sleep(0.05 * attempt)  # the worker's SlotLost reaches the master meanwhile
                    continue
                except asyncio.CancelledError:
                    self._send_release(placed.actor_id, "its placement was abandoned: its construction was cancelled")
                    raise
                except BaseException:
                    await self._release_and_wait(placed.actor_id, "its constructor failed")
                    raise
                if self.closed:  # closed while constructing: _close did not see this connection
                    await conn.close("its client closed the cluster connection")
                    raise ClusterConnectionError("the cluster connection was closed")
                self.state.adopt(conn)
                if opts.max_restarts != 0:
                    self.state.keep_spec(placed.actor_id, construct, holds, place)
                self._checked()
                return self.make_handle(conn)
            raise AssertionError("unreachable")  # the last attempt returns or raises
        except BaseException:
            if unsent:
                self.take_back(copies)
            elif sent_to:  # released: the copies its host did not claim are void
                self.void_copies(copies, sent_to)
            raise

    async def _request_placement(self, place: pb.PlaceActor, timeout_s: float, asked_s: float) -> pb.ActorPlaced:
        """Ask the master for a slot; waits at most ``timeout_s`` (0: forever) plus a margin."""
        class_name = place.class_name
        msg = pb.ClientEvent(place_actor=place)
        msg.place_actor.timeout_s = timeout_s
        fut: asyncio.Future[Any] = self.loop.create_future()
        request_id = self.state.request(msg, fut)
        assert self._session is not None
        self._session.send(msg)
        res = place.resources
        warning = self.loop.call_later(
            PLACEMENT_WARN_S,
            log.warning,
            "%s has waited %gs for a free slot (it asks for cpus=%g gpus=%g; it fails after %s): every "
            "slot may be taken, see `actorrt status`",
            class_name,
            PLACEMENT_WARN_S,
            res.num_cpus,
            res.num_gpus,
            f"{asked_s:g}s" if asked_s > 0 else "no limit",
        )
        try:
            # The master enforces the timeout; the margin covers a master that went away.
            async with asyncio.timeout(timeout_s + 10.0 if timeout_s > 0 else None):
                placed: pb.ActorPlaced = await fut
            return placed
        except (asyncio.CancelledError, TimeoutError) as e:
            if fut.done() and not fut.cancelled() and fut.exception() is None:  # answered as we gave up
                self._send_release(fut.result().actor_id, "its placement was abandoned")
            if isinstance(e, TimeoutError):
                raise PlacementError(f"no placement for {class_name} within {asked_s:g}s (no answer)") from e
            raise
        finally:
            warning.cancel()
            if self.state.withdraw(request_id) and self._session is not None and not self.closed:
                self._session.send(pb.ClientEvent(withdraw_placement=pb.WithdrawPlacement(request_id=request_id)))
            self._checked()

    async def _construct(self, conn: ActorConnection, construct: actor_host_pb2.ConstructActor) -> None:
        """``conn.open``, bounded as a whole (the connect and the first write too). Raises
        ActorDiedError for every way the host is gone: its cause is the connection's own error
        where there is one (it tells a host never reached from one that died constructing), else
        the master's word that the actor died. ``conn`` joins ``self._actors`` only once built."""
        what = f"could not construct {conn.class_name}"
        bound = self.timeout + 5.0 if self.timeout > 0 else None
        died: asyncio.Future[Any] = self.loop.create_future()
        known = self.state.cause(conn.actor_id)
        if known is not None:
            died.set_result(known)
        else:
            self.state.await_death(conn.actor_id, died)
        opening = asyncio.ensure_future(conn.open(construct, self.timeout))
        try:
            await asyncio.wait({opening, died}, timeout=bound, return_when=asyncio.FIRST_COMPLETED)
            if died.done() and not opening.done():  # let the connection say how it ended
                await asyncio.wait({opening}, timeout=DEATH_GRACE_S)
        except asyncio.CancelledError:  # our caller cancelled us
            opening.cancel()
            await asyncio.gather(opening, return_exceptions=True)
            await conn.close("its construction was cancelled")
            raise
        finally:
            self.state.forget_waiter(conn.actor_id, died)
        if opening.done():
            opening.result()  # its error: RemoteError, ActorDiedError (the connection's own)
            if not died.done():
                return
            detail = died.result()  # constructed, but reported dead meanwhile
        else:
            opening.cancel()
            await asyncio.gather(opening, return_exceptions=True)
            detail = died.result() if died.done() else f"no answer within {bound:g}s"
        await conn.close(f"{what}: {detail}")
        raise ActorDiedError(conn.actor_id, f"{what}: {detail}")

    async def kill_actor(self, handle: ActorHandle[Any], wait_s: float = RELEASE_WAIT_S) -> None:
        conn = handle._conn
        actor_id = conn.actor_id
        if self.state.cause(actor_id) is not None:
            return
        await conn.close("killed by actorrt.kill()")
        await self._release_and_wait(actor_id, "killed by actorrt.kill()", wait_s)

    async def _status(self) -> ClusterStatus:
        assert self._session is not None
        return ClusterStatus.from_proto(await self._session.status())

    # ---- public API (any thread) ----------------------------------------------------------------

    def status(self) -> CallFuture[ClusterStatus]:
        """Nodes, slots (free/used), actors and clients. Await it, or ``.result()``."""
        return spawn(self.loop, self._status)

    def kill(self, handle: ActorHandle[Any]) -> CallFuture[None]:
        return spawn(self.loop, lambda: self.kill_actor(handle))

    # ---- context managers -------------------------------------------------------------------

    async def __aenter__(self) -> Cluster:
        try:
            await self._start()
        except BaseException:
            await self._close()
            raise
        _current.enter(self)
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        try:
            await self._close()
        finally:
            _current.leave(self)

    def __enter__(self) -> Cluster:
        """Blocking use from a plain script: the cluster runs on a background loop thread."""
        started = threading.Event()
        holder: dict[str, Any] = {}

        def run_loop() -> None:
            try:
                import uvloop

                loop: asyncio.AbstractEventLoop = uvloop.new_event_loop()
            except ImportError:
                loop = asyncio.new_event_loop()
            asyncio.set_event_loop(loop)
            holder["loop"] = loop
            started.set()
            loop.run_forever()
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.close()

        self._thread = threading.Thread(target=run_loop, name="actorrt-loop", daemon=True)
        self._thread.start()
        started.wait()
        loop = holder["loop"]
        self.loop = loop
        ready = asyncio.run_coroutine_threadsafe(self.__aenter__(), loop)
        try:
            ready.result()
        except BaseException:
            self._stop_thread()
            raise
        atexit.register(self._close_from_thread)
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        atexit.unregister(self._close_from_thread)
        self._close_from_thread()

    def _close_from_thread(self) -> None:
        if self._thread is None or not self._thread.is_alive():
            return
        try:
            asyncio.run_coroutine_threadsafe(self.__aexit__(None, None, None), self.loop).result(30)
        finally:
            self._stop_thread()

    def _stop_thread(self) -> None:
        if self._thread is not None:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(10)
            self._thread = None

    def __repr__(self) -> str:
        kind = "embedded" if self.embedded else "remote"
        return f"<Cluster {kind} {self.address} client={self.client_id}>"


def _dump_spec(cls: type, args: tuple[Any, ...], kwargs: dict[str, Any]) -> common_pb2.Payload:
    try:
        return dumps((cls, args, kwargs))
    except Exception as e:
        try:  # an argument, or the class itself?
            dumps((args, kwargs))
        except Exception as args_error:  # noqa: BLE001 - the arguments, or else the class, are named
            name_culprit(f"{cls.__qualname__}.__init__", args, kwargs, args_error)
        raise SerializationError(f"class {cls.__qualname__} cannot be pickled: {e}") from e


def _never_constructed(e: ActorDiedError, death: str | None) -> bool:
    """Whether a failed construction never reached a host, so placing again runs the constructor
    at most once: the connection was refused (the warm host had just died), or the worker said the
    slot was not ready."""
    if death is not None and death.startswith(SLOT_NOT_READY):
        return True
    cause = e.__cause__
    return (
        isinstance(cause, grpc.RpcError)
        and cause.code() == grpc.StatusCode.UNAVAILABLE
        and "failed to connect" in (cause.details() or "").lower()
    )


def connect(
    address: str | None = None,
    *,
    token: str | None = None,
    files: Sequence[str] = (),
    timeout: float = 30.0,
    placement_timeout: float = 300.0,
    num_cpus: int | None = None,
    tls_ca: str | None = None,
    tls_cert: str | None = None,
    tls_key: str | None = None,
    max_payload_mb: int = 1024,
    preload: Sequence[str] = (),
    log_to_driver: bool = True,
) -> Cluster:
    """Connect to a cluster: ``async with actorrt.connect() as cluster`` (or plain ``with``).

    Args:
        address: the master's ``host:port``; else ``ACTORRT_ADDRESS``; else start an embedded
            cluster (a master and a worker with ``num_cpus`` slots, default all cores) that stops
            when the block ends.
        token: the cluster token; else ``ACTORRT_TOKEN``; else the file ``actorrt start`` wrote.
        files: glob patterns of data files copied into every actor's working directory.
        timeout: seconds to wait for the master, and for an actor's constructor to answer.
        placement_timeout: default seconds an actor waits for a free slot (0: forever).
        num_cpus: slots of the embedded cluster (default: all cores); ignored with an address.
        tls_ca: CA certificate (PEM file) that the cluster's certificates must be signed by;
            with it, every connection uses TLS. Also ``ACTORRT_TLS_CA``.
        tls_cert, tls_key: this client's certificate and key, for clusters that require mutual
            TLS. Also ``ACTORRT_TLS_CERT`` / ``ACTORRT_TLS_KEY``.
        max_payload_mb: the largest arguments a call may send, and the largest value an actor
            may return; a call over it fails alone, with a clear error.
        preload: modules the embedded cluster's warm actor hosts import before they take an
            actor (e.g. ``["torch"]``), so actors that need them start fast.
        log_to_driver: print what this connection's actors print (stdout and stderr, line by
            line, prefixed ``(Class pid=N id=XXXXXXXX)``) on this process's terminal. False
            turns it off for this connection; the lines still go to the actor's log file on its
            node (``actorrt logs ACTOR_ID``).
    """
    return Cluster(
        address,
        token=token,
        files=files,
        timeout=timeout,
        placement_timeout=placement_timeout,
        embedded_cpus=num_cpus,
        tls=_rpc.TLS.from_env(tls_ca, tls_cert, tls_key),
        max_payload_mb=max_payload_mb,
        preload=preload,
        log_to_driver=log_to_driver,
    )


def get_actor(name: str) -> CallFuture[ActorHandle[Any]]:
    """A handle to the live actor named ``name`` (``Cls.options(name=...)``) in the current
    cluster, from any client or actor; await it (or ``.result()``). The class need not be
    importable here. Raises ``ActorNotFoundError`` when no live actor has that name."""
    cluster = current_cluster()
    return spawn(cluster.loop, lambda: cluster.get_actor(name))


def kill(handle: ActorHandle[Any]) -> CallFuture[None]:
    """Stop an actor and free its slot. Await it (or ``.result()``); pending calls fail."""
    return _as_cluster(handle._conn.cluster).kill(handle)


def current_cluster() -> Cluster:
    """The cluster of the innermost open ``connect()``; inside an actor with none open, the
    actor's own connection to its cluster (made on first use). Any thread; raises
    ClusterConnectionError if there is neither."""
    return _as_cluster(_current.innermost())


def _as_cluster(owner: Owner) -> Cluster:
    """``owner`` as the Cluster it is: ``current`` and the connections keep their cluster typed
    by what they ask of it (``Owner``, ``ClusterPort``), and a Cluster is all they are given."""
    assert isinstance(owner, Cluster), owner
    return owner
