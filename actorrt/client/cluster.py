"""The client: ``actorrt.connect()`` and the ``Cluster`` it yields.

``Cluster`` ties together what a client is: its control plane (``Control``: the session with
the master, and what it knows of its placements, restarts and deaths, ``ClientState``), who
holds each actor here (``Holders``, whose effects it applies), one data connection per actor
(``ActorConnection``), placing and constructing actors (``Creator``), and, with no address, the
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

from actorrt.client import creation
from actorrt.client import current as _current
from actorrt.client import pickling as _pickling
from actorrt.client.connection import ActorConnection, Owner
from actorrt.client.control import RELEASE_WAIT_S, Control
from actorrt.client.creation import Creator
from actorrt.client.files import MAX_FILES_BYTES, collect_files
from actorrt.client.future import CallFuture, spawn
from actorrt.client.handle import ActorHandle, member_kinds
from actorrt.client.holders import Effects, Holders
from actorrt.client.loop_thread import LoopThread
from actorrt.client.options import ActorOptions, check_name, options_of
from actorrt.client.output import OutputPrinter
from actorrt.client.state import ClientState
from actorrt.common import home
from actorrt.common.errors import (
    ActorDiedError,
    ActorNotFoundError,
    ClusterConnectionError,
    RemoteError,
)
from actorrt.common.status import ClusterStatus
from actorrt.transport import addresses
from actorrt.transport import grpc_fork as _grpc_fork
from actorrt.transport import rpc as _rpc
from actorrt.v1 import actor_host_pb2
from actorrt.v1 import master_pb2 as pb

__all__ = ["Cluster", "connect", "get_actor", "kill"]

log = logging.getLogger("actorrt.client")


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
        if self.address:  # before anything is dialled with the token
            addresses.check_address(self.address, "connect: address" if address else "ACTORRT_ADDRESS")
        self.tls = tls if self.address else None  # the embedded cluster stays on loopback, in-process
        _check_limits(timeout, placement_timeout, max_payload_mb)
        if not actor_id:  # an actor's own connection: its host serves over gRPC already
            _grpc_fork.check()  # before any channel or server: no child forked from here may crash
        self.max_payload_bytes = max_payload_mb * 2**20
        self.token = home.load_token(token, self.address) if self.address else (token or home.new_token())
        self.client_id = uuid.uuid4().hex[:16]
        self.timeout = timeout
        self.placement_timeout = placement_timeout
        self.log_to_driver = log_to_driver
        self.loop: asyncio.AbstractEventLoop  # the cluster's loop: set by _start
        # Who holds what: this client's holds on its actors (any thread), inside what it knows of
        # its placements, restarts and deaths (the loop).
        self.holders: Holders[ActorConnection] = Holders(self.client_id)
        self.state: ClientState[asyncio.Future[Any], ActorConnection] = ClientState(self.holders)
        self._printer = OutputPrinter()  # actors' output, printed off the loop
        # The control plane: the session with the master, and the requests that wait on it.
        self.control = Control(self.state, self, self._printer, timeout=timeout, log_to_driver=log_to_driver)
        # Placing actors and constructing them on their hosts.
        self.creator = Creator(
            self,
            self.control,
            timeout=timeout,
            placement_timeout=placement_timeout,
            max_payload_bytes=self.max_payload_bytes,
        )
        self._files_patterns = tuple(files)
        self._embedded_cpus = embedded_cpus
        self._embedded: list[Any] = []
        self._thread: LoopThread | None = None  # ``with connect()``: the loop's own thread
        self._closing: set[asyncio.Future[None]] = set()  # connections closing: the loop keeps only weak refs

    @property
    def embedded(self) -> bool:
        return bool(self._embedded)

    @property
    def closed(self) -> bool:
        """Whether the cluster connection closed (or is closing): no handle can use it any more."""
        return self.control.closed

    # ---- lifecycle (cluster loop) -------------------------------------------------------------

    async def _start(self) -> None:
        self.loop = asyncio.get_running_loop()
        self.loop_thread = threading.get_ident()
        self.creator.files = collect_files(self._files_patterns, min(self.max_payload_bytes, MAX_FILES_BYTES))
        if not self.address:
            from actorrt.local import start_embedded  # the servers load only when needed

            assert self.token is not None  # __init__ makes one for an embedded cluster
            self.address, self._embedded = await start_embedded(self.token, self._embedded_cpus, self._preload)
        await self.control.open(
            self.address, token=self.token, tls=self.tls, client_id=self.client_id, actor_id=self.actor_id
        )

    def background(self, work: Coroutine[Any, Any, Any]) -> None:
        """Run ``work`` (a coroutine) on the loop, kept referenced until it is done."""
        task = asyncio.ensure_future(work)
        self._closing.add(task)
        task.add_done_callback(self._closing.discard)

    async def follow(
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
            self.control.release(conn.actor_id, cause)
            conn.mark_dead(cause)
        except ActorDiedError as e:
            if conn.dead is not None:
                pass
            elif spec is None:
                await self._relocate(conn, e.cause)
            elif isinstance(e.__cause__, TimeoutError):  # its host lives, the actor is not built on it
                cause = f"its constructor did not finish within {self.timeout:g}s when restarting it"
                self.control.release(conn.actor_id, cause)
                conn.mark_dead(cause)
            else:  # its host is gone (the master places it again or reports its death), or out of
                # our reach for now: the same notice sent again after a reconnect is tried again
                self.state.unfollow(moved.actor_id, moved.restarts, moved.endpoint)
        finally:
            if builder is not None:
                await builder.close("constructed for its holders; its creator uses no stream of its own to it")

    async def _relocate(self, conn: ActorConnection, detail: str) -> None:
        """Attaching failed: ask the master where the actor is now, and try once more there."""
        found = await self.control.look_up(pb.LookupActor(actor_id=conn.actor_id))
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
        self.control.send_all(effects.events)
        if effects.close is not None:
            self.background(effects.close.close("its last handle in this process was dropped"))
        self.control.checked()

    def send_copy(self, conn: ActorConnection) -> str:
        """A handle is being pickled (any thread): a token the master counts as a holder until
        the receiving process claims the copy (``receive_copy``)."""
        if self.closed:
            raise ClusterConnectionError(f"cannot send a handle to {conn.actor_id}: its cluster connection is closed")
        token, add_ref = self.holders.copy(conn)
        self.control.send_soon(add_ref)
        made = _pickling.copies_made.get()
        if made is not None:
            made.append((conn.actor_id, token))
        return token

    def lost_copies(self, copies: list[tuple[str, str]], receiver: str = "") -> None:
        """The payload these handle copies were pickled into failed without an answer, or came
        here in a reply nobody unpickles (any thread): taken back, or void for ``receiver``
        (``Holders.lost``)."""
        for event in Holders.lost(copies, receiver):
            self.control.send_soon(event)

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
        session = self.control.session
        assert session is not None
        for event in Holders.claim(conn.actor_id, token, first):
            session.send(event)
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
        check_name(name, "get_actor")
        if self.closed:
            raise ClusterConnectionError("the cluster connection is closed")
        found = await self.control.look_up(pb.LookupActor(name=name))
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
        return await self.control.death_cause(actor_id, wait_s)

    async def _close(self) -> None:
        if self.closed:
            return
        conns, waiters = self.control.closing()
        await self.creator.abandon_all()  # none of them can be answered any more
        for conn in conns:
            await conn.close("its client closed the cluster connection")
        await self.control.close(waiters)
        for service in reversed(self._embedded):
            await service.close()
        self._printer.close()  # bounded: a terminal that blocks holds the close 1 s at most

    async def create_actor(
        self, cls: type, args: tuple[Any, ...], kwargs: dict[str, Any], options: ActorOptions | None = None
    ) -> ActorHandle[Any]:
        """Place an actor and construct it on its host (cluster loop); every wait is bounded.
        ``options``: those to place it with (default: the class's, ``options_of(cls)``).
        Raises SerializationError, PlacementError, ActorNameTakenError, RemoteError (its
        constructor raised), ActorDiedError, ClusterConnectionError.

        A placement whose host was gone before the constructor ran (its warm host had just
        died: connection refused, or the worker said the slot was not ready) is released and
        placed again, up to ``PLACE_ATTEMPTS`` times within the placement timeout. Only a
        constructor that ran and raised, or a host that went away while constructing, fails it.
        A creation under way when the connection closes fails then, with ClusterConnectionError,
        having withdrawn or released what it had asked for.
        """
        with self.creator.under_way():
            try:
                return await self._create(cls, args, kwargs, options)
            except asyncio.CancelledError:
                if not self.closed:
                    raise
                raise ClusterConnectionError(
                    f"{cls.__qualname__} was not created: the cluster connection was closed while creating it"
                ) from None

    async def _create(
        self, cls: type, args: tuple[Any, ...], kwargs: dict[str, Any], options: ActorOptions | None
    ) -> ActorHandle[Any]:
        """``create_actor``'s steps."""
        opts = options if options is not None else options_of(cls)
        # 1. Pickle the class and its arguments once, recording the handle copies in them and,
        #    for a restartable actor, the connections those handles hold (kept with it).
        holds: list[ActorConnection] = []
        copies: list[tuple[str, str]] = []
        spec = self.creator.pickle_spec(cls, args, kwargs, copies, holds if opts.max_restarts != 0 else None)
        if self.closed:
            raise ClusterConnectionError("the cluster connection is closed")
        # 2. What to ask the master for.
        kinds = member_kinds(cls)
        place = creation.placement(cls.__qualname__, opts, kinds)
        # 3. A slot, and the actor constructed there (placed again while its host was gone).
        conn, construct = await self.creator.place_and_construct(place, spec, opts, kinds, copies)
        try:
            if self.closed:  # closed while constructing: _close did not see this connection
                await conn.close("its client closed the cluster connection")
                raise ClusterConnectionError("the cluster connection was closed")
            # 4. Hold it: through this connection, and a restartable one's arguments too.
            self.state.adopt(conn)
            if opts.max_restarts != 0:
                self.state.keep_spec(conn.actor_id, construct, holds, place)
            self.control.checked()
            return self.make_handle(conn)
        except BaseException:
            self.lost_copies(copies, conn.actor_id)  # void, unless its host claimed them
            raise

    async def kill_actor(self, handle: ActorHandle[Any], wait_s: float = RELEASE_WAIT_S) -> None:
        conn = handle._conn
        actor_id = conn.actor_id
        if self.state.cause(actor_id) is not None:
            return
        await conn.close("killed by actorrt.kill()")
        await self.control.release_and_wait(actor_id, "killed by actorrt.kill()", wait_s)

    # ---- public API (any thread) ----------------------------------------------------------------

    def status(self) -> CallFuture[ClusterStatus]:
        """Nodes, slots (free/used), actors and clients. Await it, or ``.result()``."""
        return spawn(self.loop, self.control.status)

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
        self._thread = LoopThread()
        self.loop = self._thread.start()
        try:
            self._thread.run(self.__aenter__())
        except BaseException:
            self._thread.stop()
            raise
        atexit.register(self._close_from_thread)
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        atexit.unregister(self._close_from_thread)
        self._close_from_thread()

    def _close_from_thread(self) -> None:
        if self._thread is None or not self._thread.alive:
            return
        try:
            self._thread.run(self.__aexit__(None, None, None), 30)
        finally:
            self._thread.stop()

    def __repr__(self) -> str:
        kind = "embedded" if self.embedded else "remote"
        return f"<Cluster {kind} {self.address} client={self.client_id}>"


def _check_limits(timeout: float, placement_timeout: float, max_payload_mb: int) -> None:
    """Refuse what ``connect`` cannot use, naming the argument: raises TypeError, ValueError."""
    if max_payload_mb < 1:
        raise ValueError(f"connect: max_payload_mb must be >= 1, got {max_payload_mb}")
    for name, value, least in (("timeout", timeout, "> 0"), ("placement_timeout", placement_timeout, ">= 0")):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise TypeError(f"connect: {name} must be a number of seconds, got {value!r}")
        if value < 0 or (least == "> 0" and value == 0):
            hint = " (0 waits forever)" if name == "placement_timeout" else ""
            raise ValueError(f"connect: {name} must be {least} seconds{hint}, got {value!r}")


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
        token: the cluster token; else, for the address of an embedded cluster another process
            of this user runs on this machine, its token (``home.cluster_token``); else
            ``ACTORRT_TOKEN``; else the file ``actorrt start`` wrote.
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
    importable here. Raises ``ActorNotFoundError`` when no live actor has that name, and at the
    call ``ValueError`` for what cannot be a name (over ``NAME_MAX`` characters, say)."""
    check_name(name, "get_actor")
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
