"""Which cluster connection a bare ``Cls.remote()`` uses: the innermost open ``connect()``.

Kept apart from the client so that ``@remote_class`` (which needs it) and the client (which sets
it) do not import each other. Any thread; connections open and close on their own loops.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from actorrt._errors import ClusterConnectionError

if TYPE_CHECKING:
    from actorrt._client import Cluster

__all__ = ["current_cluster", "enter", "leave"]

_stack: list[Cluster] = []


def current_cluster() -> Cluster:
    """The cluster of the innermost open ``connect()``; raises if there is none."""
    for cluster in reversed(_stack):
        if not cluster.closed:
            return cluster
    raise ClusterConnectionError("not connected: open a cluster first with 'async with actorrt.connect():'")


def enter(cluster: Cluster) -> None:
    """``cluster`` is now the innermost connection."""
    _stack.append(cluster)


def leave(cluster: Cluster) -> None:
    """``cluster`` closed: the one opened before it (if still open) is current again."""
    if cluster in _stack:
        _stack.remove(cluster)
