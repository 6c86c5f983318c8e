"""``actorrt.get_attr``, ``actorrt.list_attrs`` and ``actorrt.call_method``: a remote object's
attributes and methods by name.

A handle decides from the actor's class whether a name is a method (``handle.name(...)``) or an
attribute (``await handle.name``). The remote object may know better: an instance attribute that
shadows a method of its class, or one its methods added later. These two functions ask the
object itself, so any attribute can be read and every one listed. ``call_method`` calls a method
by name, also one whose name the handle itself uses (``actor_id``). They are functions of the
module, not methods of the handle, so that they never shadow a method of the user's class.
"""

from __future__ import annotations

from typing import Any

from actorrt.client.connection import ActorConnection
from actorrt.client.future import CallFuture
from actorrt.client.handle import ActorHandle
from actorrt.v1 import actor_host_pb2 as pb

__all__ = ["call_method", "get_attr", "list_attrs"]


def get_attr(handle: ActorHandle[Any], name: str) -> CallFuture[Any]:
    """Read the remote object's attribute ``name``, whatever its class says the name is.

    A call like any other (sent now, run in order); await the future or ``.result()``. The
    remote ``getattr`` decides: an instance attribute that shadows a method reads as its value.
    Fails with a ``RemoteError`` that is also an ``AttributeError`` when there is no such
    attribute, and with one that is a ``TypeError`` when the name is a method (call it instead).
    """
    if not isinstance(name, str) or not name:
        raise TypeError(f"get_attr: name must be a non-empty str, got {name!r}")
    if name.startswith("__"):
        raise AttributeError(f"get_attr: {name!r}: names that start with '__' are not read remotely")
    return _conn(handle, "get_attr").submit(pb.CALL_KIND_GET_ATTR, name, (), {})


def call_method(handle: ActorHandle[Any], name: str, /, *args: Any, **kwargs: Any) -> CallFuture[Any]:
    """``handle.name(*args, **kwargs)``, for any method name: also one the handle itself answers
    (``actor_id``), which ``handle.actor_id(...)`` cannot reach. A call like any other, in order."""
    if not isinstance(name, str) or not name:
        raise TypeError(f"call_method: name must be a non-empty str, got {name!r}")
    if name.startswith("__"):
        raise AttributeError(f"call_method: {name!r}: names that start with '__' are not called remotely")
    return _conn(handle, "call_method").submit(pb.CALL_KIND_METHOD, name, args, kwargs)


def list_attrs(handle: ActorHandle[Any]) -> CallFuture[list[str]]:
    """The names of the remote object's attributes, sorted: those ``get_attr`` reads as values.

    Its instance attributes (an instance attribute that shadows a method included, as the
    object's own ``__dict__`` has them) and its class's properties and constants; methods and
    names that start with ``__`` are left out. A call like any other, run in order.
    """
    return _conn(handle, "list_attrs").submit(pb.CALL_KIND_LIST_ATTRS, "", (), {})


def _conn(handle: ActorHandle[Any], what: str) -> ActorConnection:
    if not isinstance(handle, ActorHandle):
        raise TypeError(f"{what}: expected an actor handle, got {type(handle).__name__}")
    conn: ActorConnection = object.__getattribute__(handle, "_conn")
    return conn
