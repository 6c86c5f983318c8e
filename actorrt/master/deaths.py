"""The dead list: actors already reported dead, the newest ``kept`` of them, oldest first.

A worker that registers after a partition may still host one: its owners were told it died, so
it must not come back (the worker is told to stop it). ``actorrt logs`` of a dead actor finds
the worker that hosted it here. An actor is remembered once its death is reported, or when a
restarted master learns that an actor a client confirmed is lost; the oldest is forgotten past
``kept``.

Invariant (``validate``): at most ``kept`` are remembered. Plain state on the master's loop.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass

from actorrt.master.state import Records, check

__all__ = ["DEAD_ACTORS_KEPT", "DeadActor", "Deaths"]

DEAD_ACTORS_KEPT = 10_000


@dataclass(frozen=True)
class DeadActor:
    actor_id: str
    class_name: str
    worker_id: str
    node: str
    cause: str


class Deaths(Records[str, DeadActor]):
    """Actor id -> its death, oldest first, read like a dict (``reversed``: newest first)."""

    def __init__(self, kept: int = DEAD_ACTORS_KEPT) -> None:
        self._dead: OrderedDict[str, DeadActor] = OrderedDict()
        super().__init__(self._dead)
        self.kept = kept

    def __reversed__(self) -> Iterator[str]:
        return reversed(self._dead)

    def remember(self, dead: DeadActor) -> DeadActor:
        """``dead.actor_id`` was reported dead (again: it becomes the newest)."""
        self._dead[dead.actor_id] = dead
        self._dead.move_to_end(dead.actor_id)
        while len(self._dead) > self.kept:
            self._dead.popitem(last=False)
        return dead

    def lost(self, actor_id: str, cause: str) -> DeadActor:
        """An actor this table never listed is lost: remembered as reported dead, so that a worker
        that registers with it later stops it rather than bringing it back."""
        return self.remember(DeadActor(actor_id, "", "", "", cause))

    def validate(self) -> None:
        check(len(self._dead) <= self.kept, f"{len(self._dead)} dead actors kept, the bound is {self.kept}")
