"""The memory of a warm actor host, measured from inside one.

PARL's ``max_memory`` counts what a job grows by over its own memory at start; actorrt's
``max_memory_mb`` counts the whole process tree of an actor's host (its proportional set size,
once its RSS is over the limit). ``MemoryProbe`` is an actor that measures, while it is
constructed, its host's process tree as the worker daemon judges it: what
an actor's host holds before the actor's own class does anything, the baseline the PARL layer
adds ``max_memory`` to. Kept apart from ``actorrt.compat.parl`` so that a host imports only
this small module to run it.
"""

from __future__ import annotations

import os

from actorrt.worker.procs import process_table, process_tree, tree_proportional_bytes

__all__ = ["MemoryProbe", "host_tree_bytes"]


def host_tree_bytes() -> int:
    """The proportional set size of this process and every process it started, in bytes
    (their RSS where it cannot be read)."""
    table = process_table()
    return tree_proportional_bytes(process_tree(os.getpid(), table), table)


class MemoryProbe:
    """Constructed on a warm host: ``tree_bytes`` is that host's memory at that moment."""

    def __init__(self) -> None:
        self.tree_bytes = host_tree_bytes()
