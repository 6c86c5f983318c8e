"""``Holders``: what this client holds of each actor, and what it must tell the master of it.

The master releases a non-detached actor once no client holds it and no handle copy is on its
way (docs/architecture.md, "References"). This object is the one place that decides, for this
client, when it holds an actor (``AddRef``) and when it no longer does (``DropRef``), from the
handles, bound methods, calls in flight, handle copies, lookups and constructions that hold it.
One connection's hold on its actor goes::

      adopt(), connect(), hold()
                |
                v
              HELD <-------------------------------------------------.
                |  drop() of the last (any thread)                   |
                v                                                    |
          HELD, none left ---- hold(): a handle made before the -----'
                |              loop ran last_gone()
                |  last_gone(busy): calls in flight       hold()
                +-------------------------------> DRAINING ----> HELD
                |  last_gone(idle)                    |  idle(): its calls were answered
                v                                     |
            RELEASED <--------------------------------'
      its stream closes, and DropRef{actor} is sent unless the actor died, or another
      connection to it took this one's place (the master counts a client once per actor)

What else holds an actor here, and what each costs:

- a constructor's arguments: a restartable actor created here keeps the handles pickled into
  them (``keep``) until it dies (``died`` gives them back, to drop);
- a handle copy pickled here (``copy``): ``AddRef{actor, token}``, counted by the master until
  the receiving process claims it (``claim``: ``AddRef{actor}``, then ``DropRef{actor, token}``);
  one whose payload never left is taken back (``lost``: ``DropRef{actor, token}``), one in a
  call or construction that failed without an answer is voided (``lost`` with its receiver:
  ``DropRef{actor, token, receiver}``);
- a lookup answered (``found``): the master counts the asker a holder as it answers; one nobody
  made a handle from is let go (``unclaimed_drops``) once no lookup's answer is left to take,
  unless this client holds the actor or is constructing it (``placed`` until ``adopt``).

Transitions return what must be sent to the master (``pb.ClientEvent``) and what to close, and
never touch the network, the loop or a future. ``validate()`` checks the invariants (with
``ACTORRT_VALIDATE=1``, as in the tests, the client runs it after every transition). Threads:
handles are made and dropped on any thread, so every transition takes ``lock`` (reentrant: a
garbage collection can run a handle's ``__del__``, so ``drop``, on a thread inside a transition);
those marked "loop" run on the cluster's loop only.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Generic, Protocol, TypeVar

from actorrt.v1 import master_pb2 as pb

__all__ = ["Effects", "Hold", "Holders", "Holding"]


@dataclass(slots=True)
class Hold:
    """One connection's hold on its actor (only ``Holders`` changes it). ``draining`` and
    ``released`` are the states DRAINING and RELEASED; neither is HELD."""

    handles: int = 0  # live handles, bound methods, and kept constructor arguments, on it
    draining: bool = False  # none left, calls in flight: the connection reports ``idle``
    released: bool = False  # this client let go of the actor through it


class Holding(Protocol):
    """What the holders need of a connection: its actor, and its hold (``ActorConnection``)."""

    @property
    def actor_id(self) -> str: ...

    @property
    def hold(self) -> Hold: ...


C = TypeVar("C", bound=Holding)


@dataclass
class Effects(Generic[C]):
    """What the client must do after a transition."""

    events: list[pb.ClientEvent] = field(default_factory=list)  # to the master, in order
    close: C | None = None  # a connection released: close its stream
    unheld: bool = False  # the actor is no longer held through any connection of this client


def add_ref(actor_id: str, token: str = "") -> pb.ClientEvent:
    return pb.ClientEvent(add_ref=pb.AddRef(actor_id=actor_id, token=token))


def drop_ref(actor_id: str, token: str = "", receiver: str = "") -> pb.ClientEvent:
    return pb.ClientEvent(drop_ref=pb.DropRef(actor_id=actor_id, token=token, receiver=receiver))


class Holders(Generic[C]):
    """The connections this client holds its actors through, and the other holds on them."""

    def __init__(self, client_id: str) -> None:
        self.client_id = client_id  # handle copies' tokens start with it
        self.lock = threading.RLock()
        self._copies = itertools.count(1)
        # The connection this client holds each actor through (the master counts it once).
        self.actors: dict[str, C] = {}
        # A restartable actor created here -> the connections of the handles its constructor's
        # arguments carry: held until it dies (the master asks its creator to construct it again).
        self.kept: dict[str, list[C]] = {}
        # Actors placed for this client and not adopted yet (being constructed): until adopted,
        # released or dead, no lookup's answer lets go of them.
        self.building: set[str] = set()
        # Actors the master counts this client a holder of since it answered a lookup, until the
        # asker made its handle (or gave up: cancelled, timed out, the connection it was for gone).
        self.unclaimed: set[str] = set()

    # ---- handles (any thread) -------------------------------------------------------------------

    def hold(self, conn: C) -> None:
        """One more handle, bound method or kept argument on ``conn``."""
        with self.lock:
            hold = conn.hold
            hold.handles += 1
            hold.draining = False

    def drop(self, conn: C) -> bool:
        """One fewer (a handle garbage-collected, on any thread, even inside the loop's own
        code). True when that was the last: run ``last_gone`` on the loop."""
        with self.lock:
            hold = conn.hold
            hold.handles -= 1
            return hold.handles == 0 and not hold.released

    def connect(self, actor_id: str, usable: Callable[[C], bool], make: Callable[[], C], dead: bool) -> tuple[C, bool]:
        """The connection this client holds ``actor_id`` through, when it is ``usable``, or a new
        one from ``make`` (True: the caller opens it and says this client holds the actor, unless
        it is ``dead``), with one more handle counted on it: counted under the lock that found
        it, or a release on the loop could close it in between (the new handle's calls would fail)."""
        with self.lock:
            conn = self.actors.get(actor_id)
            if conn is not None and not conn.hold.released and usable(conn):
                conn.hold.handles += 1
                conn.hold.draining = False
                return conn, False
            conn = make()
            conn.hold.handles += 1
            if not dead:
                self.actors[actor_id] = conn
        return conn, not dead

    # ---- letting go (loop) ----------------------------------------------------------------------

    def last_gone(self, conn: C, busy: bool, dead: bool) -> Effects[C]:
        """``drop`` said the last handle on ``conn`` went. ``busy``: calls are in flight or
        queued on it (DRAINING: released once they are answered, ``idle``); ``dead``: the master
        said the actor died (nothing to tell it)."""
        with self.lock:
            hold = conn.hold
            if hold.handles > 0 or hold.released:
                hold.draining = False
                return Effects()
            if busy:
                hold.draining = True
                return Effects()
            return self._release(conn, dead)

    def idle(self, conn: C, dead: bool) -> Effects[C]:
        """A DRAINING connection has no call in flight any more: release it, unless a handle
        was made on it meanwhile."""
        with self.lock:
            hold = conn.hold
            if hold.handles > 0 or hold.released:
                hold.draining = False
                return Effects()
            return self._release(conn, dead)

    def _release(self, conn: C, dead: bool) -> Effects[C]:
        hold = conn.hold
        hold.released, hold.draining = True, False
        mapped = self.actors.get(conn.actor_id)
        if mapped is conn:
            del self.actors[conn.actor_id]
        # another connection to it took this one's place (this one gave up on it): that one holds
        # the actor now. Else DropRef, also when the connection gave up on its own (a verdict that
        # never came, a failure on our side): the actor may live on, and only the master's count
        # can let it go.
        replaced = mapped is not None and mapped is not conn
        events = [] if dead or replaced else [drop_ref(conn.actor_id)]
        return Effects(events, close=conn, unheld=mapped is conn)

    # ---- handle copies --------------------------------------------------------------------------

    def copy(self, conn: C) -> tuple[str, pb.ClientEvent]:
        """A handle on ``conn`` is being pickled (any thread): its copy's token, unique and
        starting with the client id, and the ``AddRef`` that makes the master count it."""
        token = f"{self.client_id}.{next(self._copies)}"
        return token, add_ref(conn.actor_id, token)

    @staticmethod
    def lost(copies: list[tuple[str, str]], receiver: str = "") -> list[pb.ClientEvent]:
        """The payload these (actor id, token) copies were pickled into failed without an answer
        (any thread). No ``receiver`` got it (it never left this process): nobody will claim
        them, so this client takes them back, as their receiver would. Else ``receiver`` may
        have died before claiming them: they are void, and the master stops counting those it
        did not claim once that receiver's process is gone."""
        return [drop_ref(actor_id, token, receiver) for actor_id, token in copies]

    @staticmethod
    def claim(actor_id: str, token: str, first: bool) -> list[pb.ClientEvent]:
        """A handle to ``actor_id`` arrived here (copy ``token``; "" for a lookup's answer, or a
        restart's arguments, whose copies its first construction claimed): this client holds the
        actor, said once per new connection (``first``), and the copy arrived. The bytes of one
        pickled handle loaded again (here or elsewhere) claim its copy again: the master counts
        only a copy's first claim (``References.claimed``)."""
        return ([add_ref(actor_id)] if first else []) + ([drop_ref(actor_id, token)] if token else [])

    # ---- placements, constructions and lookups (loop) -----------------------------------------

    def placed(self, actor_id: str) -> None:
        """``actor_id`` was placed for this client: it is being constructed."""
        self.building.add(actor_id)

    def adopt(self, conn: C) -> None:
        """``conn``'s actor was constructed: this client holds it through ``conn``."""
        with self.lock:
            self.actors[conn.actor_id] = conn
            self.building.discard(conn.actor_id)

    def keep(self, actor_id: str, holds: list[C]) -> None:
        """Restartable ``actor_id``'s constructor arguments carry handles on ``holds``: held
        until it dies."""
        with self.lock:
            for conn in holds:
                conn.hold.handles += 1
                conn.hold.draining = False
            self.kept[actor_id] = holds

    def abandoned(self, actor_id: str) -> None:
        """This client asked the master to stop ``actor_id`` (a kill, a construction that failed)."""
        self.building.discard(actor_id)

    def found(self, actor_id: str) -> None:
        """The master answered a lookup with ``actor_id`` and counts this client a holder of it."""
        self.unclaimed.add(actor_id)

    def unclaimed_drops(self, asking: bool, dead: Callable[[str], bool]) -> list[pb.ClientEvent]:
        """Once no lookup's answer is left to take (``asking``: an asker may be about to make its
        handle from one), ``DropRef`` for each actor a lookup answered that this client holds no
        handle of, is not constructing, and that is not ``dead``."""
        if asking:
            return []
        with self.lock:
            unheld = [a for a in self.unclaimed if a not in self.actors and a not in self.building]
            self.unclaimed.clear()
        return [drop_ref(a) for a in unheld if not dead(a)]

    def died(self, actor_id: str) -> tuple[C | None, list[C]]:
        """The master says ``actor_id`` died: the connection this client held it through (to
        close), and those its kept arguments held (to ``drop``)."""
        with self.lock:
            self.building.discard(actor_id)
            return self.actors.pop(actor_id, None), self.kept.pop(actor_id, [])

    # ---- what the client holds ------------------------------------------------------------------

    def connection(self, actor_id: str) -> C | None:
        return self.actors.get(actor_id)

    def held(self, live: Callable[[C], bool]) -> list[str]:
        """The actors held through a connection that is ``live`` (has not given up on its actor)."""
        with self.lock:
            return [a for a, conn in self.actors.items() if live(conn)]

    def closed(self) -> list[C]:
        """The cluster connection closes: the connections to close; every hold ends with it."""
        with self.lock:
            conns = list(self.actors.values())
            self.actors.clear()
            self.kept.clear()
            self.building.clear()
            self.unclaimed.clear()
        return conns

    # ---- invariants -----------------------------------------------------------------------------

    def validate(self) -> None:
        """Raise AssertionError when the state contradicts itself."""
        with self.lock:
            for actor_id, conn in self.actors.items():
                assert conn.actor_id == actor_id, f"a connection to {conn.actor_id} filed as {actor_id}'s"
                assert not conn.hold.released, f"actor {actor_id} held through a released connection"
                assert actor_id not in self.building, f"actor {actor_id} is both held and being constructed"
            kept: dict[int, int] = {}
            for holds in self.kept.values():
                for conn in holds:
                    kept[id(conn)] = kept.get(id(conn), 0) + 1
            for conn in [*self.actors.values(), *(c for holds in self.kept.values() for c in holds)]:
                hold = conn.hold
                assert hold.handles >= kept.get(id(conn), 0), f"{conn.actor_id}: fewer handles than kept arguments"
                assert not (hold.draining and hold.released), f"{conn.actor_id}: both draining and released"
                assert not hold.draining or hold.handles == 0, f"{conn.actor_id}: draining with handles left"
