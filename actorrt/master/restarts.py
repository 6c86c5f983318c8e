"""Restarts: whether an actor whose process ended is placed again, and what holds it back.

An actor goes::

    PLACED --exited: restarts left (or its slot was not ready), not being stopped,
      |      its creator connected--> RESTARTING (its request queued) --placed--> PLACED
      |                                   |  a quick exit in a row: BACKING OFF until its time passes
      |                                   |  a stale copy on a rejoining worker: WAITING until that
      |                                   |  copy's exit is in (or its worker is gone)
      '--exited otherwise--> ENDED (the cause says why it was not restarted)

An instance that lived less than ``RESTART_STABLE_S`` is a quick exit; the first in a row
restarts at once, each further one waits twice as long as the one before (``restart_delay``),
so an actor that can never start (``max_restarts=-1``) does not spin. A slot that was not ready
(``SLOT_NOT_READY``: never constructed) is not a restart: a first placement ends (its creator
places it again itself), a restart's is queued again, uncounted. A restart also waits while its
creator is away (the table checks that: it would be placed and never constructed).

Invariants (``validate``): a backoff or a stale copy is kept only for a listed actor; a backoff
only while it is restarting; stale copies sit on listed workers. Plain state on the master's
loop, no I/O; time from the injected ``clock``.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping, Set

from actorrt.common.errors import SLOT_NOT_READY
from actorrt.master.records import Actor, Request
from actorrt.master.state import check

__all__ = [
    "NOT_RESTARTED",
    "RESTART_BACKOFF_MAX_S",
    "RESTART_BACKOFF_S",
    "RESTART_STABLE_S",
    "Restarts",
    "restart_delay",
]

NOT_RESTARTED = "not restarted: its creator, which holds its constructor arguments, is gone"

RESTART_STABLE_S = 10.0
RESTART_BACKOFF_S = 0.5
RESTART_BACKOFF_MAX_S = 30.0


def restart_delay(quick_exits: int) -> float:
    """How long a restart waits after ``quick_exits`` quick exits in a row."""
    if quick_exits <= 1:
        return 0.0
    return min(RESTART_BACKOFF_MAX_S, RESTART_BACKOFF_S * 2.0 ** min(quick_exits - 2, 32))


class Restarts:
    """The restart policy, and the restarts waiting out a backoff or a stale copy."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self.clock = clock
        # Restarts waiting out a backoff: actor id -> when it ends. Only ``backoffs_over`` ends
        # one (and the table then tries to place it), so a restart outside this map that fits a
        # ready slot is a bug the table's ``validate`` catches.
        self._backoff: dict[str, float] = {}
        # Actors a rejoining worker still hosted a stale copy of, which it was told to stop:
        # actor id -> those workers. The actor is not placed again until every copy's exit is in.
        self._stale_copies: dict[str, set[str]] = {}
        self._seq = itertools.count(1)

    # ---- an actor's process ended -----------------------------------------------------------

    def exited(self, actor: Actor, cause: str, creator_connected: bool) -> tuple[bool, str, float]:
        """``actor``'s process ended with ``cause``: (restart it, the cause to report, the
        backoff before it may be placed again). Counts the restart and the quick exits on
        ``actor``; the caller frees its slot and queues ``request(actor)``, or drops it."""
        not_ready = cause.startswith(SLOT_NOT_READY)
        never_built = not_ready and actor.restarts == 0
        restartable = not actor.stopping and (actor.may_restart() or not_ready) and not never_built
        if restartable and creator_connected:
            delay = 0.0
            if not not_ready:
                now = self.clock()
                actor.quick_exits = actor.quick_exits + 1 if now - actor.placed_at < RESTART_STABLE_S else 0
                delay = restart_delay(actor.quick_exits)
                actor.restarts += 1
                if delay > 0:
                    self._backoff[actor.actor_id] = now + delay
            return True, cause, delay
        if restartable and actor.max_restarts != 0:
            cause = f"{cause}; {NOT_RESTARTED}"
        elif actor.max_restarts != 0 and not actor.stopping and not never_built:
            cause = f"{cause} (after {actor.restarts} restarts, the last allowed)"
        return False, actor.stopping or cause, 0.0

    def request(self, actor: Actor) -> Request:
        """The request that places the restarting ``actor`` again (its request id is negative:
        never a client's)."""
        return Request(
            client_id=actor.client_id,
            request_id=-next(self._seq),
            num_cpus=actor.num_cpus,
            num_gpus=actor.num_gpus,
            max_memory_mb=actor.max_memory_mb,
            class_name=actor.class_name,
            restart_of=actor.actor_id,
        )

    # ---- what holds a restart back ----------------------------------------------------------

    def waits(self, actor_id: str) -> bool:
        """Whether ``actor_id``'s restart may not be placed yet: its backoff runs, or a stale copy
        of it is still being stopped."""
        return actor_id in self._backoff or actor_id in self._stale_copies

    def backoffs_over(self) -> None:
        """End the backoffs whose time has passed (their restarts may be placed now)."""
        if self._backoff:
            now = self.clock()
            for actor_id in [a for a, until in self._backoff.items() if until <= now]:
                del self._backoff[actor_id]

    def next_backoff(self) -> float | None:
        """When the earliest backoff ends, if any."""
        return min(self._backoff.values(), default=None)

    def stale_copy(self, actor_id: str, worker_id: str) -> None:
        """``worker_id`` registered still hosting a copy of the listed ``actor_id``; it was told
        to stop it."""
        self._stale_copies.setdefault(actor_id, set()).add(worker_id)

    def copy_exited(self, actor_id: str, worker_id: str | None) -> bool:
        """A copy of ``actor_id`` that is not its listed instance exited on ``worker_id``.
        Returns whether it was a stale copy (the actor may be placed again once none is left)."""
        copies = self._stale_copies.get(actor_id)
        if copies is None or worker_id not in copies:
            return False
        copies.discard(worker_id)
        if not copies:
            del self._stale_copies[actor_id]
        return True

    def worker_gone(self, worker_id: str) -> None:
        """``worker_id`` left the table: its stale copies went with it."""
        for actor_id, copies in list(self._stale_copies.items()):
            copies.discard(worker_id)
            if not copies:
                del self._stale_copies[actor_id]

    def forget(self, actor_id: str) -> None:
        """``actor_id`` left the table."""
        self._stale_copies.pop(actor_id, None)
        self._backoff.pop(actor_id, None)

    # ---- invariants -------------------------------------------------------------------------

    def validate(self, actors: Mapping[str, Actor], workers: Set[str]) -> None:
        """Raises ``TableInvariantError`` naming the first broken invariant; ``actors``: the
        table's live actors, ``workers``: its worker ids."""
        check(set(self._backoff) <= set(actors), "a restart backoff is kept for an actor no longer listed")
        for aid in self._backoff:
            check(actors[aid].restarting, f"actor {aid} waits out a restart backoff but is placed")
        for aid, copies in self._stale_copies.items():
            check(aid in actors and bool(copies), f"stale copies of {aid}: {copies}, but it is not a live actor")
            check(copies <= workers, f"stale copies of {aid} on workers not in the table")
