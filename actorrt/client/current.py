"""Which cluster connection this process uses where none is named: the innermost open one.

A bare ``Cls.remote()``, ``get_actor(name)`` and every handle unpickled here go to it
(``cluster.current_cluster`` gives it as the ``Cluster`` it is). What is kept here is typed by
what the modules below ``cluster`` ask of it (``ClusterPort``), so that neither this module nor
``handle`` imports ``cluster``, which imports them. Any thread; connections open and close on
their own loops.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Protocol

from actorrt.client.connection import ActorConnection, Owner
from actorrt.common.errors import ClusterConnectionError

__all__ = ["ClusterPort", "enter", "innermost", "leave", "set_fallback"]


class ClusterPort(Owner, Protocol):
    """What ``current`` and a handle being unpickled (``handle``) ask of a cluster connection."""

    @property
    def closed(self) -> bool: ...

    def receive_copy(
        self, actor_id: str, endpoint: str, class_name: str, kinds: dict[str, bool], max_restarts: int, token: str
    ) -> ActorConnection:
        """A pickled handle arrived (any thread): the connection it calls through, with the
        handle counted on it (the caller makes exactly one ``ActorHandle`` of it)."""
        ...


_stack: list[ClusterPort] = []
_fallback: Callable[[], ClusterPort] | None = None
_fallback_lock = threading.Lock()


def innermost() -> ClusterPort:
    """The cluster of the innermost open ``connect()``; inside an actor with none open, the
    actor's own connection to its cluster (made on first use); raises ClusterConnectionError
    if there is neither."""
    for cluster in reversed(_stack):
        if not cluster.closed:
            return cluster
    if _fallback is not None:
        with _fallback_lock:
            for cluster in reversed(_stack):  # another thread may have made it meanwhile
                if not cluster.closed:
                    return cluster
            return _fallback()
    raise ClusterConnectionError("not connected: open a cluster first with 'async with actorrt.connect():'")


def set_fallback(make: Callable[[], ClusterPort] | None) -> None:
    """What ``innermost`` opens when no connection is open (an actor host sets it)."""
    global _fallback
    _fallback = make


def enter(cluster: ClusterPort) -> None:
    """``cluster`` is now the innermost connection."""
    _stack.append(cluster)


def leave(cluster: ClusterPort) -> None:
    """``cluster`` closed: the one opened before it (if still open) is current again."""
    if cluster in _stack:
        _stack.remove(cluster)
