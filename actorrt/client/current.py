"""Which cluster connection a bare ``Cls.remote()`` uses: the innermost open ``connect()``.

Kept apart from the client so that ``@remote_class`` (which needs it) and the client (which sets
it) do not import each other. Any thread; connections open and close on their own loops.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

from actorrt.common.errors import ClusterConnectionError

if TYPE_CHECKING:
    from actorrt.client.cluster import Cluster

__all__ = ["claimed_before", "copies_made", "current_cluster", "enter", "handles_pickled", "leave", "set_fallback"]

handles_pickled: ContextVar[list[Any] | None] = ContextVar("actorrt_handles_pickled", default=None)
"""A list while a restartable actor's constructor arguments are pickled: the connections of the
handles in them (its creator holds those actors as long as it keeps the arguments)."""

copies_made: ContextVar[list[tuple[str, str]] | None] = ContextVar("actorrt_copies_made", default=None)
"""A list while a call's arguments or an actor's constructor arguments are pickled: (actor id,
token) of each handle copy made, taken back if the payload never leaves this process."""

claimed_before: ContextVar[bool] = ContextVar("actorrt_claimed_before", default=False)
"""True while an actor host unpickles the arguments of a restart's constructor: the handles in
them hold the actor again, but their copies were claimed by its first construction, once."""

in_actor_host = False
"""True in an actor host's process once it hosts an actor: its own local modules stay pickled by
reference (registering them by value would send its replies' classes by value too)."""

_stack: list[Cluster] = []


_fallback: Callable[[], Cluster] | None = None
_fallback_lock = threading.Lock()


def current_cluster() -> Cluster:
    """The cluster of the innermost open ``connect()``; inside an actor with none open, the
    actor's own connection to its cluster (made on first use); raises if there is neither."""
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


def set_fallback(make: Callable[[], Cluster] | None) -> None:
    """What ``current_cluster`` opens when no connection is open (an actor host sets it)."""
    global _fallback
    _fallback = make


def enter(cluster: Cluster) -> None:
    """``cluster`` is now the innermost connection."""
    _stack.append(cluster)


def leave(cluster: Cluster) -> None:
    """``cluster`` closed: the one opened before it (if still open) is current again."""
    if cluster in _stack:
        _stack.remove(cluster)
