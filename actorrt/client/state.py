"""``ClientState``: what a client knows of its placements and its actors, without any I/O.

The client's side of the ``ClientSession`` protocol as a plain object, the way ``ClusterTable``
is the master's: placement requests and lookups waiting for an answer, the restartable actors
it created (and how to construct them again), the restarts it follows, and the deaths the
master told it about. What it holds of each actor is its ``Holders``' (``holders``), which it
asks, and tells of placements, lookups and deaths. Transitions are methods; they return what
the caller must do (the waiter to wake, what to send the master) and never touch the network,
the loop or a future. ``validate()`` checks the invariants; with ``ACTORRT_VALIDATE=1`` (as in
the tests) the client runs it after every transition.

``W`` is whatever the caller waits with (an ``asyncio.Future`` in the client); ``C`` is what it
holds per live actor (an ``ActorConnection``). One thread (the cluster's loop) only.
"""

from __future__ import annotations

import itertools
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

from actorrt.client.holders import Effects, Holders, Holding, add_ref
from actorrt.v1 import actor_host_pb2
from actorrt.v1 import master_pb2 as pb

__all__ = ["DEATHS_KEPT", "ClientState", "Kept", "Placement"]

W = TypeVar("W")
C = TypeVar("C", bound=Holding)

# Deaths remembered, so that a late question ("why did it die?") still has an answer; the
# oldest are forgotten first. A client that creates actors for weeks must not grow without end.
DEATHS_KEPT = 10_000
# Answered placement requests remembered, so that the same answer again (the request went
# twice: queued while the session was down, then sent again with the unanswered ones on the
# new stream) is known for what it is.
ANSWERS_KEPT = 1_000


@dataclass
class Placement(Generic[W]):
    """A placement request sent to the master and not answered yet."""

    request_id: int
    message: pb.ClientEvent  # the PlaceActor step, kept to send again to a restarted master
    waiter: W


@dataclass
class Kept:
    """A restartable actor this client created, kept until it dies: how to construct it again,
    and its placement as first asked (a restarted master that lost it places it again). The
    handles in its arguments hold their actors meanwhile (``Holders.keep``)."""

    construct: actor_host_pb2.ConstructActor
    placement: pb.PlaceActor
    released: bool = False  # this client asked for it to be stopped: never placed again for it


class ClientState(Generic[W, C]):
    """Placements waiting, actors held, deaths heard (the last ``deaths_kept``)."""

    def __init__(self, holders: Holders[C], deaths_kept: int = DEATHS_KEPT) -> None:
        self.holders = holders
        self._request_ids = itertools.count(1)
        self.placing: dict[int, Placement[W]] = {}
        self.placed: OrderedDict[int, str] = OrderedDict()  # request id -> the actor it placed
        self.lookups: dict[int, W] = {}  # LookupActor steps whose answer was not taken yet
        # The restartable actors this client created, until they die: the master asks their
        # creator to build them again after a restart, whether or not it still holds a handle
        # to them (others may).
        self.specs: dict[str, Kept] = {}
        # The move (restart count, endpoint) followed last, per actor held or kept: a master sends
        # ActorMoved again to a client back from a lost session (the first may have been lost).
        self.moves: dict[str, tuple[int, str]] = {}
        self.deaths: OrderedDict[str, str] = OrderedDict()
        self.death_waiters: dict[str, list[W]] = {}
        self.deaths_kept = deaths_kept

    # ---- placements -----------------------------------------------------------------------

    def request(self, message: pb.ClientEvent, waiter: W) -> int:
        """A new placement request: fills in its request id, returns it."""
        request_id = next(self._request_ids)
        message.place_actor.request_id = request_id
        self.placing[request_id] = Placement(request_id, message, waiter)
        return request_id

    def withdraw(self, request_id: int) -> bool:
        """The caller stopped waiting (answered, timed out, cancelled); True when the master
        had not answered yet (the request may still wait in its queue)."""
        return self.placing.pop(request_id, None) is not None

    def answered(self, request_id: int, actor_id: str = "") -> W | None:
        """The master placed ``actor_id`` for ``request_id`` (or refused it: no actor): the
        waiter to tell, or None when nobody waits any more (a placed actor must then be
        released, unless ``repeated`` says this answer came before)."""
        placement = self.placing.pop(request_id, None)
        if placement is not None and actor_id:
            self.placed[request_id] = actor_id
            self.holders.placed(actor_id)
            while len(self.placed) > ANSWERS_KEPT:
                self.placed.popitem(last=False)
        return placement.waiter if placement is not None else None

    def repeated(self, request_id: int, actor_id: str) -> bool:
        """Whether ``request_id`` was answered with ``actor_id`` before."""
        return self.placed.get(request_id) == actor_id

    def look_up(self, message: pb.ClientEvent, waiter: W) -> int:
        """A new LookupActor step: fills in its request id, returns it."""
        request_id = next(self._request_ids)
        message.lookup_actor.request_id = request_id
        self.lookups[request_id] = waiter
        return request_id

    def found(self, request_id: int, actor_id: str) -> W | None:
        """The master answered a lookup (with ``actor_id`` if it found one, of which it now counts
        this client a holder): the waiter to tell, if anyone still waits. The actor stays
        unclaimed until a handle of this client holds it (:meth:`take_unclaimed`)."""
        if actor_id:
            self.holders.found(actor_id)
        return self.lookups.get(request_id)

    def looked_up(self, request_id: int) -> None:
        """The lookup's asker took its answer, or gave up waiting."""
        self.lookups.pop(request_id, None)

    def take_unclaimed(self) -> list[pb.ClientEvent]:
        """Once no lookup's answer is left to take (an asker may be about to make its handle
        from one), a ``DropRef`` for each unclaimed actor no handle of this client holds and
        that did not die: the master is to stop counting this client as its holder."""
        return self.holders.unclaimed_drops(bool(self.lookups), self.deaths.__contains__)

    def unanswered(self) -> list[pb.ClientEvent]:
        """The requests a new master never saw, in the order they were made."""
        return [p.message for p in self.placing.values()]

    def reopened(self, live: Callable[[C], bool]) -> list[pb.ClientEvent]:
        """The session opened again, maybe to a new master: what it must hear again. The
        requests it never saw (``unanswered``), an ``AddRef`` per actor held, and which actors
        this client still counts on (held through a ``live`` connection, or kept to construct
        again, with how to place those again): those that died while the master was down are
        placed again if they may restart, else reported dead."""
        with self.holders.lock:  # handles arriving on other threads add to what it holds
            live_ids = self.holders.held(live)
            kept = self.kept_actors(live)
            counted_on = sorted({*live_ids, *(k.actor_id for k in kept)})
            # those it gave up on, or asked to stop: answered, holding nothing
            given_up = sorted({*self.holders.actors, *self.specs} - set(counted_on))
        confirm = (
            [pb.ClientEvent(confirm_actors=pb.ConfirmActors(actor_ids=counted_on, kept=kept, given_up=given_up))]
            if counted_on or given_up
            else []
        )
        return self.unanswered() + [add_ref(a) for a in live_ids] + confirm

    # ---- actors -----------------------------------------------------------------------------

    def adopt(self, conn: C) -> None:
        """A constructed actor: the client holds its connection until it dies or is killed."""
        if conn.actor_id in self.deaths:
            raise ValueError(f"actor {conn.actor_id} is dead: {self.deaths[conn.actor_id]}")
        self.holders.adopt(conn)

    def keep_spec(
        self,
        actor_id: str,
        construct: actor_host_pb2.ConstructActor,
        holds: list[C],
        placement: pb.PlaceActor | None = None,
    ) -> None:
        """``actor_id`` was created here and may restart: keep how to construct it and where it
        asked to be placed, and hold the actors whose handles its arguments carry (``holds``),
        until it dies."""
        if actor_id in self.deaths:
            raise ValueError(f"actor {actor_id} is dead: {self.deaths[actor_id]}")
        self.specs[actor_id] = Kept(construct, placement or pb.PlaceActor(class_name=construct.class_name))
        self.holders.keep(actor_id, holds)

    def spec(self, actor_id: str) -> actor_host_pb2.ConstructActor | None:
        kept = self.specs.get(actor_id)
        return kept.construct if kept is not None else None

    def follows(self, actor_id: str, restarts: int, endpoint: str) -> bool:
        """Whether an ActorMoved for ``actor_id``'s restart ``restarts`` to ``endpoint`` is news
        (followed from now on), not one sent again for a move this client follows or followed
        already (nor one older than it)."""
        last = self.moves.get(actor_id, (0, ""))
        if restarts < last[0] or (restarts, endpoint) == last:
            return False
        if self.holders.connection(actor_id) is None and actor_id not in self.specs:
            return False
        self.moves[actor_id] = (restarts, endpoint)
        return True

    def unfollow(self, actor_id: str, restarts: int, endpoint: str) -> None:
        """Following that move failed while the actor may live on (its host unreachable from
        here): the same notice, sent again, is news."""
        if self.moves.get(actor_id) == (restarts, endpoint):
            del self.moves[actor_id]

    def restarting(self, actor_id: str) -> None:
        """The master says the actor restarts (again): its next move is news, whatever its count
        (a restart placed on a slot that was not ready is placed again with the same count)."""
        self.moves.pop(actor_id, None)

    def last_gone(self, conn: C, busy: bool) -> Effects[C]:
        """The last handle on ``conn`` went (``Holders.last_gone``); ``busy``: calls in flight."""
        return self._let_go(self.holders.last_gone(conn, busy, dead=conn.actor_id in self.deaths), conn)

    def idle(self, conn: C) -> Effects[C]:
        """A connection whose last handle went while calls were in flight has none left."""
        return self._let_go(self.holders.idle(conn, dead=conn.actor_id in self.deaths), conn)

    def _let_go(self, effects: Effects[C], conn: C) -> Effects[C]:
        if effects.unheld and conn.actor_id not in self.specs:  # no move of it to follow any more
            self.moves.pop(conn.actor_id, None)
        return effects

    def released(self, actor_id: str) -> None:
        """This client asked the master to stop ``actor_id`` (a kill; a construction that failed)."""
        self.holders.abandoned(actor_id)
        kept = self.specs.get(actor_id)
        if kept is not None:
            kept.released = True

    def kept_actors(self, live: Callable[[C], bool]) -> list[pb.KeptActor]:
        """What a restarted master needs to place again the restartable actors created here, if
        no worker brings them back (those this client asked to stop are left out). ``held``:
        the connection to one is ``live`` (it has not given up on the actor). One whose stream
        still looks up is sent too: its worker may never come back (a node lost with the master,
        not noticed yet), and one that does is told to stop the copy the master then replaced."""
        out = []
        for actor_id, kept in self.specs.items():
            if kept.released:
                continue
            conn = self.holders.connection(actor_id)
            out.append(
                pb.KeptActor(
                    actor_id=actor_id,
                    placement=kept.placement,
                    restarts=kept.construct.restarts,
                    held=conn is not None and live(conn),
                )
            )
        return out

    def died(self, actor_id: str, cause: str) -> tuple[C | None, list[W], list[C]]:
        """The master says ``actor_id`` died: its connection (to close), if the client held one,
        everyone who waited to hear it, and the connections its kept arguments held (to drop)."""
        self.specs.pop(actor_id, None)
        conn, holds = self.holders.died(actor_id)
        self.moves.pop(actor_id, None)
        self.deaths[actor_id] = cause
        self.deaths.move_to_end(actor_id)
        while len(self.deaths) > self.deaths_kept:
            forgotten, _ = self.deaths.popitem(last=False)
            self.death_waiters.pop(forgotten, None)
        return conn, self.death_waiters.pop(actor_id, []), holds

    def cause(self, actor_id: str) -> str | None:
        return self.deaths.get(actor_id)

    def await_death(self, actor_id: str, waiter: W) -> None:
        """``waiter`` wants to hear when ``actor_id`` dies (``cause`` said it has not yet)."""
        self.death_waiters.setdefault(actor_id, []).append(waiter)

    def forget_waiter(self, actor_id: str, waiter: W) -> None:
        waiters = self.death_waiters.get(actor_id, [])
        if waiter in waiters:
            waiters.remove(waiter)
        if not waiters:
            self.death_waiters.pop(actor_id, None)

    def closed(self) -> tuple[list[C], list[W]]:
        """The connection closes: the connections to close and the placement waiters to fail."""
        conns = self.holders.closed()
        waiters = [p.waiter for p in self.placing.values()] + list(self.lookups.values())
        self.specs.clear()
        self.moves.clear()
        self.placing.clear()
        self.placed.clear()
        self.lookups.clear()
        return conns, waiters

    # ---- invariants ---------------------------------------------------------------------------

    def validate(self) -> None:
        """Raise AssertionError when the state contradicts itself (and its holders)."""
        with self.holders.lock:  # handles arriving on other threads add to what it holds
            self.holders.validate()
            held = set(self.holders.actors)
        for request_id, placement in self.placing.items():
            assert placement.request_id == request_id, f"placement {request_id} filed as {placement.request_id}"
            assert placement.message.place_actor.request_id == request_id, f"placement {request_id}: message differs"
        for actor_id in held:
            assert actor_id not in self.deaths, f"actor {actor_id} is both held and dead"
        for actor_id in self.specs:
            assert actor_id not in self.deaths, f"a construct step kept for {actor_id}, which is dead"
        for actor_id in self.moves:
            assert actor_id in held or actor_id in self.specs, f"a move followed for {actor_id}, not held"
        for actor_id, waiters in self.death_waiters.items():
            assert waiters, f"an empty waiter list for {actor_id}"
            assert actor_id not in self.deaths, f"waiters for {actor_id}, which is known dead"
        assert len(self.deaths) <= self.deaths_kept, "more deaths kept than the bound"
