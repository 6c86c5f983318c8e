"""Actor handles: what users hold, and what a handle becomes when it travels.

``ActorHandle`` calls its actor through the process's ``ActorConnection`` to it (``connection``).
Handles travel: pickled, a handle becomes a ``HandleRef`` (what to reach and how to call it) and
is rebuilt by the receiving process's cluster connection, which attaches its own stream to the
host. Each process counts its live handles per actor and tells the master when it holds one and
when it no longer does; a copy on its way is counted by a token (see ``Cluster.send_copy``). An
actor nobody holds is released.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from actorrt.client.connection import ActorConnection
from actorrt.client.current import innermost
from actorrt.client.future import CallFuture
from actorrt.client.pickling import claimed_before, handles_pickled
from actorrt.v1 import actor_host_pb2 as pb

__all__ = ["ActorHandle", "HandleRef", "member_kinds"]

T = TypeVar("T")


def member_kinds(cls: type) -> dict[str, bool]:
    """name -> True for methods, False for other class attributes (properties, constants)."""
    kinds: dict[str, bool] = {}
    for name in dir(cls):
        if name.startswith("__"):
            continue
        attr = inspect.getattr_static(cls, name)
        kinds[name] = (
            isinstance(attr, (staticmethod, classmethod))
            or inspect.isfunction(attr)
            or (callable(attr) and not isinstance(attr, (property, type)))
        )
    return kinds


class _Method:
    """``handle.method``: counts as a handle while it lives, so that
    ``get_actor(name).result().method()`` (the handle gone before the call is made) still
    reaches the actor."""

    __slots__ = ("_conn", "_name")

    def __init__(self, conn: ActorConnection, name: str) -> None:
        conn.cluster.hold(conn)
        self._conn = conn
        self._name = name

    def __del__(self) -> None:
        self._conn.cluster.drop(self._conn)

    def __call__(self, *args: Any, **kwargs: Any) -> CallFuture[Any]:
        return self._conn.submit(pb.CALL_KIND_METHOD, self._name, args, kwargs)

    def __repr__(self) -> str:
        return f"<remote method {self._conn.class_name}.{self._name} of actor {self._conn.actor_id}>"


@dataclass(frozen=True)
class HandleRef:
    """What a pickled handle carries: the actor, where it is, how to call it, and the token of
    this copy (the master counts the copy as a holder until the receiver claims it)."""

    actor_id: str
    endpoint: str
    class_name: str
    methods: tuple[str, ...]
    attributes: tuple[str, ...]
    max_restarts: int
    token: str

    @property
    def kinds(self) -> dict[str, bool]:
        return {**dict.fromkeys(self.attributes, False), **dict.fromkeys(self.methods, True)}


def _rebuild(ref: HandleRef) -> ActorHandle[Any]:
    """Unpickling a handle (any thread): this process's cluster connection (an actor's own,
    inside an actor) holds it from now on, and claims the copy (not a restart's: its first
    construction did). Raises ClusterConnectionError when this process has none open."""
    token = "" if claimed_before.get() else ref.token
    cluster = innermost()
    return ActorHandle(
        cluster.receive_copy(ref.actor_id, ref.endpoint, ref.class_name, ref.kinds, ref.max_restarts, token)
    )


class ActorHandle(Generic[T]):
    """A handle to a remote ``T``. Every use returns a ``CallFuture`` and never blocks the loop.

    - ``handle.method(*args)``: a call, sent now, run in the order made.
    - ``await handle.attr``: read a plain attribute of the remote object (also a call, in order).
    - ``handle.attr = value``: set it; ordered before every later call on this handle. If the
      remote assignment fails, the next call on the handle raises that ``RemoteError``.

    Handles can be passed to other actors and clients (as arguments or return values), which
    call the actor directly. A non-detached actor is released once no handle to it remains in
    any process.
    """

    __slots__ = ("_conn", "_kinds", "_methods")
    _conn: ActorConnection
    _kinds: dict[str, bool]
    _methods: dict[str, _Method]

    def __init__(self, conn: ActorConnection) -> None:
        """Only a cluster connection makes handles, each on a connection it counted it on
        (``Cluster.make_handle``, ``Cluster.receive_copy``)."""
        object.__setattr__(self, "_conn", conn)
        object.__setattr__(self, "_kinds", conn.kinds)
        object.__setattr__(self, "_methods", {})

    @property
    def actor_id(self) -> str:
        return self._conn.actor_id

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        method = self._methods.get(name)
        if method is not None:
            return method
        if self._kinds.get(name, False):
            method = self._methods[name] = _Method(self._conn, name)
            return method
        return self._conn.submit(pb.CALL_KIND_GET_ATTR, name, (), {})

    def __setattr__(self, name: str, value: Any) -> None:
        if name.startswith("__"):
            raise AttributeError(f"cannot set {name} on an actor handle")
        self._conn.submit(pb.CALL_KIND_SET_ATTR, name, (value,), {})

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ActorHandle) and other._conn.actor_id == self._conn.actor_id

    def __hash__(self) -> int:
        return hash(self._conn.actor_id)

    def __repr__(self) -> str:
        conn = self._conn
        state = "dead" if conn.dead else "restarting" if conn.waiting and conn.restarts else "alive"
        return f"<ActorHandle {conn.class_name} {conn.actor_id} at {conn.endpoint} ({state})>"

    def __reduce__(self) -> Any:
        conn = self._conn
        token = conn.cluster.send_copy(conn)
        pickled = handles_pickled.get()
        if pickled is not None:
            pickled.append(conn)
        methods = tuple(n for n, is_method in conn.kinds.items() if is_method)
        attributes = tuple(n for n, is_method in conn.kinds.items() if not is_method)
        ref = HandleRef(conn.actor_id, conn.endpoint, conn.class_name, methods, attributes, conn.max_restarts, token)
        return (_rebuild, (ref,))

    def __del__(self) -> None:
        conn = self._conn
        conn.cluster.drop(conn)
