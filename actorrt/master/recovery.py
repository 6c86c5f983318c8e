"""Recovery: what the master does with what comes back to it after a break. A worker registers
again with the actors it still hosts; a client back from a lost session confirms the actors it
holds or would construct again. A restarted master learns its cluster this way.

A worker's registration::

    a listed worker registers again --worker_returning--> the actors it no longer reports (on the
        slots the table has them on) end, with the causes of the exits it reports; the rest stay
    --worker_registered--> each live actor it reports is
        KEPT     the same instance as listed (told again to stop, if a stop was asked)
        STOPPED  reported dead already; or reported twice: a stale copy, and its actor is not
                 placed again until that copy's exit is in
        REBUILT  not listed (a restarted master): its creator holds it; never refcounted

An actor a client confirms (``confirmed``)::

    listed        --> nothing; a holder of one READOPTED not told yet is told (within READOPTED_TOLD_S)
    reported dead --> Died, at once
    unknown, the master young   --> PENDING --settle, at settle_at--> READOPTED | Died (remembered lost)
    unknown, the master settled --> READOPTED | Died, at once (with those PENDING, if still there)

The master is young until it has served ``settle_after_s`` (a worker timeout and a reconnect
period) since ``started_at``: its workers may still be registering with their actors. An actor
its creator keeps (``Kept``) is READOPTED while its restart limit allows and its creator is here:
queued to be placed again as its own restart would be, the clients that confirm holding it hold
it again, and they are told. The others are reported dead and remembered dead, so a worker that
registers later stops them.

Transitions return ``Effect`` s (``Died``, ``Readopted``, ``Tell``, ``Placements``) in the order
the servicer carries them out. Plain state on the master's loop, no I/O: time from the table's
clock, and the servicer's one timer (at ``settle_at``) calls ``settle``. ``validate()`` checks the
invariants (raises ``TableInvariantError``).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence, Set
from dataclasses import dataclass

from actorrt.master.records import Actor, Ended, Placement
from actorrt.master.state import check
from actorrt.master.table import ClusterTable
from actorrt.master.workers import Worker

__all__ = [
    "LOST_WHILE_MASTER_DOWN",
    "READOPTED_TOLD_S",
    "Died",
    "Effect",
    "Exit",
    "Kept",
    "Placements",
    "Readopted",
    "Recovery",
    "Tell",
]

LOST_WHILE_MASTER_DOWN = (
    "gone: no worker reported it to the restarted master (it ended, or waited to be placed again, "
    "while the master was down)"
)
# How long after placing an actor again from its creator's word a client that confirms it late
# is still told so: as long as a holder's connection waits for the master's word after its
# host went (the client's RESTART_VERDICT_S); later ones have given up, or never waited.
READOPTED_TOLD_S = 60.0
LOST_WHILE_RECONNECTING = "lost while its worker daemon reconnected"


@dataclass(frozen=True)
class Exit:
    """An actor's exit a registering worker could not send before its session broke."""

    actor_id: str
    slot: int
    cause: str
    exit_code: int


@dataclass(frozen=True)
class Kept:
    """An actor a client would construct again, as it describes it (its creator's word)."""

    actor: Actor
    held: bool  # the client holds a handle to it (not only the means to construct it)


@dataclass(frozen=True)
class Died:
    """Tell ``client_id`` that ``actor_id`` is dead."""

    client_id: str
    actor_id: str
    cause: str


@dataclass(frozen=True)
class Readopted:
    """``actor`` is queued to be placed again from its creator's word: a restart to count."""

    actor: Actor


@dataclass(frozen=True)
class Tell:
    """Tell ``clients`` that ``actor`` is being placed again (their connections saw its host go
    and wait for the master's word), and, if it was placed already (``placed``), where."""

    actor: Actor
    clients: Set[str]
    placed: bool


@dataclass(frozen=True)
class Placements:
    """Announce these placements (after the notices before them: told it moved, never that it restarts)."""

    placements: list[Placement]


Effect = Died | Readopted | Tell | Placements


@dataclass(frozen=True)
class _Confirmed:
    """One client's confirmation, as far as it is not settled yet."""

    client_id: str
    actor_ids: list[str]
    kept: Sequence[Kept]
    given_up: Collection[str]


def _holding(confirmed: list[_Confirmed]) -> dict[str, set[str]]:
    """Actor id -> the clients whose confirm says they hold a live handle to it: listed, not
    given up on, and, for its creator, held (not only kept to construct again)."""
    holding: dict[str, set[str]] = {}
    for c in confirmed:
        spec_only = {k.actor.actor_id for k in c.kept if not k.held}
        for actor_id in c.actor_ids:
            if actor_id not in c.given_up and actor_id not in spec_only:
                holding.setdefault(actor_id, set()).add(c.client_id)
    return holding


class Recovery:
    """Workers registering again, and clients confirming their actors, on ``table``."""

    def __init__(self, table: ClusterTable, *, settle_after_s: float) -> None:
        self.table = table
        self.settle_after_s = settle_after_s
        self.started_at = table.clock()  # the table's clock; set again when the master serves
        self._pending: list[_Confirmed] = []  # unknown actors confirmed while young
        # Actors placed again from their creator's word: when (the table's clock), and the
        # clients told so.
        self._readopted: dict[str, tuple[float, set[str]]] = {}

    @property
    def settle_at(self) -> float | None:
        """When the pending confirmations are due to be settled (``settle``), if there are any."""
        return self.started_at + self.settle_after_s if self._pending else None

    # ---- workers ----------------------------------------------------------------------------

    def still_hosted(self, worker_id: str, live: Iterable[Actor]) -> set[str]:
        """Which of a listed worker's actors its registration reports on the slots the table has
        them on: the same instances (its session came back before the master saw it go)."""
        t = self.table
        worker = t.workers.get(worker_id)
        return {
            a.actor_id
            for a in live
            if worker is not None and a.actor_id in worker.actors and t.actors[a.actor_id].slot == a.slot
        }

    def worker_returning(self, worker_id: str, live: Sequence[Actor], exits: Iterable[Exit]) -> list[tuple[Ended, int]]:
        """The listed ``worker_id`` registers again with ``live`` actors: it leaves the table,
        keeping those it still hosts (``worker_registered`` takes them back); the others ended,
        with the causes of the ``exits`` it reports where they are of the listed instance.
        Returns how each ended, with its exit code (0 when not reported)."""
        t = self.table
        reported = {
            e.actor_id: e
            for e in exits
            if (a := t.actors.get(e.actor_id)) is not None and a.worker_id == worker_id and a.slot == e.slot
        }
        causes = {actor_id: e.cause for actor_id, e in reported.items()}
        keep = self.still_hosted(worker_id, live)
        ended = t.remove_worker(worker_id, LOST_WHILE_RECONNECTING, keep, causes)
        return [(e, reported[e.actor.actor_id].exit_code if e.actor.actor_id in reported else 0) for e in ended]

    def worker_registered(self, worker: Worker, live: Iterable[Actor]) -> list[Actor]:
        """``worker`` joined the table reporting the ``live`` actors it hosts: each is kept,
        stopped or rebuilt (see the module's docstring). Returns those it must stop
        (``stopping`` says why)."""
        t = self.table
        stale = []
        for actor in live:
            known = t.actors.get(actor.actor_id)
            if (
                known is not None
                and known.worker_id == worker.worker_id
                and known.slot == actor.slot
                and not known.restarting
            ):
                # the same instance (kept by worker_returning): what the table knew of it stays
                t.workers.hold(worker, known)
                if known.stopping:  # its stop went to the stream that broke and may be lost: again
                    stale.append(known)
                continue
            actor.worker_id = worker.worker_id
            if actor.actor_id in t.dead:  # hosted across a partition, but its owner was told it died
                actor.stopping = f"it was reported dead: {t.dead[actor.actor_id].cause}"
                stale.append(actor)
            elif actor.actor_id in t.actors or actor.slot in worker.held:
                actor.stopping = "reported twice by its worker"
                stale.append(actor)
                if actor.actor_id in t.actors:
                    t.restarts.stale_copy(actor.actor_id, worker.worker_id)
            else:
                t.adopt(worker, actor)
        return stale

    # ---- clients ----------------------------------------------------------------------------

    def confirmed(
        self, client_id: str, actor_ids: list[str], kept: Sequence[Kept] = (), given_up: Collection[str] = ()
    ) -> list[Effect]:
        """A client back from a lost session names the actors it holds or would construct again
        (``kept``): those the table does not list ended, or waited to be placed again, while the
        master was down. While the master is young the ids it does not know yet wait (``settle_at``)
        and are settled then, every client's together; settled, they are at once (with those still
        pending, if their timer has not run yet). A client confirming one placed again after that
        hears what its holders heard. ``given_up``: those of ``actor_ids`` whose connection in the
        client gave up on them (not counted as holding one placed again)."""
        t = self.table
        wait = self.started_at + self.settle_after_s - t.clock()
        if wait <= 0 and self._pending:  # due, but the timer has not run yet: settle together
            self._pending.append(_Confirmed(client_id, actor_ids, kept, given_up))
            return self.settle()
        unknown = [a for a in actor_ids if a not in t.actors]
        effects: list[Effect] = []
        if wait > 0:
            later = [a for a in unknown if a not in t.dead]
            if later:
                kept_later = [k for k in kept if k.actor.actor_id in later]
                self._pending.append(_Confirmed(client_id, later, kept_later, given_up))
            unknown = [a for a in unknown if a in t.dead]
        else:
            for actor_id in actor_ids:
                actor = t.actors.get(actor_id)
                readopted = self._readopted.get(actor_id)
                if actor is None or readopted is None or not t.refs.holds(client_id, actor_id):
                    continue
                since, told = readopted
                if t.clock() - since < READOPTED_TOLD_S and client_id not in told:
                    told.add(client_id)
                    effects.append(Tell(actor, {client_id}, not actor.restarting))
        effects += self._settle([_Confirmed(client_id, unknown, kept, given_up)])
        return effects

    def settle(self) -> list[Effect]:
        """``settle_at`` came: settle every pending confirmation, together."""
        pending, self._pending = self._pending, []
        return self._settle(pending)

    def _settle(self, confirmed: list[_Confirmed]) -> list[Effect]:
        """Settle the actors clients confirmed and no worker brought back: every kept one first
        (so that its other holders, whichever client spoke first, hold it again rather than
        hear it died), then the rest. The clients that confirm holding a live handle to one
        placed again hold it (it is told where it goes); like the actors rebuilt from workers'
        reports, it is not released for lack of holders."""
        t = self.table
        effects: list[Effect] = []
        readopted: dict[str, Actor] = {}
        holding = _holding(confirmed)
        for c in confirmed:
            for k in c.kept:
                actor_id = k.actor.actor_id
                if actor_id in c.actor_ids and actor_id not in t.actors and actor_id not in t.dead:
                    if self._readopt(k):
                        readopted[actor_id] = k.actor
                        effects.append(Readopted(k.actor))
        for c in confirmed:
            for actor_id in c.actor_ids:
                if actor_id not in t.actors:
                    dead = t.dead.get(actor_id) or t.dead.lost(actor_id, LOST_WHILE_MASTER_DOWN)
                    effects.append(Died(c.client_id, actor_id, dead.cause))
        for actor_id, actor in readopted.items():  # those holding a live handle (the creator's own word is in)
            for client_id in holding.get(actor_id, set()) - {actor.client_id}:
                t.add_ref(client_id, actor_id)
        now = t.clock()
        for actor_id in [a for a, (since, _) in self._readopted.items() if now - since >= READOPTED_TOLD_S]:
            del self._readopted[actor_id]
        for actor_id, actor in readopted.items():
            if actor_id in t.actors:
                holders = {actor.client_id, *t.refs.holders_of(actor_id)} - {""}
                self._readopted[actor_id] = (now, set(holders))
                effects.append(Tell(actor, holders, not actor.restarting))
        effects.append(Placements(t.place_waiting()))
        return effects

    def _readopt(self, kept: Kept) -> bool:
        """Queue a restartable actor no worker brought back to be placed again, from its
        creator's word; False (remembered lost) when its restart limit is used up, or its
        creator has left."""
        actor = kept.actor
        if self.table.readopt(actor, held=kept.held):
            return True
        if actor.max_restarts != 0 and not actor.may_restart():
            self.table.dead.lost(
                actor.actor_id, f"{LOST_WHILE_MASTER_DOWN} (after {actor.restarts} restarts, the last allowed)"
            )
        return False

    # ---- invariants -------------------------------------------------------------------------

    def validate(self) -> None:
        """Raises ``TableInvariantError`` naming the first broken invariant."""
        check(all(c.actor_ids for c in self._pending), "a pending confirmation names no actor")
        now = self.table.clock()
        check(
            all(since <= now and told for since, told in self._readopted.values()),
            "an actor is recorded as placed again from its creator's word in the future, or with nobody told",
        )
