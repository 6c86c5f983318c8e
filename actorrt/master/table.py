"""The cluster table: the master's state, the live actors and the parts that index them.

A plain synchronous object with no I/O: the master's servicer turns protobuf into calls on it
and what they return (placements to announce, actors that ended, actors to stop, requests whose
time ran out) back into messages. Not thread-safe: the master calls it from its event loop only.
Time comes from the injected ``clock``; the master's periodic sweep (and a wake-up at
``next_wakeup()``) drives what depends on it.

The table lists the live actors (``actors``) and composes one plain state object per index::

    workers   Workers          the workers, their slots, the free-slot index (pack, spread, pinned)
    queue     PlacementQueue   requests waiting for a slot, their deadlines, requests answered
    names     Names            actor names, reserved while their request waits
    refs      References       holders, handle copies on their way, settled copies
    restarts  Restarts         the restart policy, backoffs, stale copies being stopped
    clients   Clients          clients, connected or in their grace period
    dead      Deaths           actors already reported dead (the newest DEAD_ACTORS_KEPT)

A transition that touches one of them is that object's own method (``table.clients.open``,
``table.workers.stale``); one that keeps several in step is a method here, a few calls on them.
``validate()`` checks each part's invariants and those between them.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable, Collection, Mapping, Set

from actorrt.common.errors import ActorNameTakenError, PlacementError
from actorrt.master.clients import Clients
from actorrt.master.deaths import DEAD_ACTORS_KEPT, DeadActor, Deaths
from actorrt.master.names import Names
from actorrt.master.placement_queue import PlacementQueue
from actorrt.master.records import Actor, Ended, NodeLoad, Placement, Released, Request, RequestKey
from actorrt.master.references import References
from actorrt.master.restarts import NOT_RESTARTED, Restarts
from actorrt.master.state import check
from actorrt.master.workers import Worker, Workers

__all__ = ["ClusterTable"]


class ClusterTable:
    """The live actors, and the state objects that index them (see the module's docstring)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic, dead_kept: int = DEAD_ACTORS_KEPT) -> None:
        self.clock = clock
        self.actors: dict[str, Actor] = {}
        self.workers = Workers(clock)
        self.queue = PlacementQueue(clock)
        self.names = Names()
        self.refs = References()
        self.restarts = Restarts(clock)
        self.clients = Clients(clock)
        self.dead = Deaths(dead_kept)
        self.placements_total = 0
        self.placements_failed = 0
        # Actors released (refcount zero, or killed while restarting) since ``take_released``.
        self._released: list[Released] = []

    # ---- workers ----------------------------------------------------------------------------

    def adopt(self, worker: Worker, actor: Actor) -> None:
        """List ``actor``, which ``worker`` hosts on ``actor.slot`` and this table did not know (a
        restarted master learns it from the worker's registration: ``Recovery``). Its creator
        holds it (its client, if not back yet, has the grace period); who else does is not known
        for sure (an AddRef may have come before the worker), so it is never released for lack
        of holders. Its name, if another live actor has it now, is theirs."""
        actor.num_gpus = len(actor.gpu_ids)
        actor.placed_at = self.clock()  # as far as this table knows
        if actor.name:
            actor.name = self.names.adopt(actor.name, actor.actor_id)
        self.actors[actor.actor_id] = actor
        self.workers.hold(worker, actor)
        self.clients.absent(actor.client_id).actors.add(actor.actor_id)
        self.refs.listed(actor.actor_id, counted=False)
        self.refs.hold(actor.client_id, actor.actor_id)

    def remove_worker(
        self, worker_id: str, cause: str = "", keep: Collection[str] = (), causes: Mapping[str, str] | None = None
    ) -> list[Ended]:
        """Drop a worker and everything on it; returns how each of its actors ended (placed
        again, or dead). ``keep``: actors it still hosts as it registers again (listed still,
        ``Recovery.worker_registered`` takes them back as they were). ``causes``: how some of
        them ended, instead of ``cause`` (exits it reports as it registers again)."""
        worker = self.workers.remove(worker_id)
        if worker is None:
            return []
        ended = [self._end(a, (causes or {}).get(a, cause)) for a in list(worker.actors) if a not in keep]
        self.restarts.worker_gone(worker_id)
        return [e for e in ended if e is not None]

    def seen(
        self,
        worker_id: str,
        load: float | None = None,
        rss: Mapping[str, int] | None = None,
        usage: NodeLoad | None = None,
    ) -> None:
        """A heartbeat (``load``, each actor's ``rss``, the node's and its actors' ``usage``) or
        another event from the worker. O(the worker's actors)."""
        if not self.workers.seen(worker_id, load):
            return
        for actor_id, value in (rss or {}).items():
            actor = self.actors.get(actor_id)
            if actor is not None:
                actor.rss_bytes = value
        if usage is not None:
            worker = self.workers[worker_id]
            worker.cpu_percent = round(usage.cpu_percent, 1)
            worker.memory_used_bytes = usage.memory_used_bytes
            total = 0.0
            for actor_id in worker.actors:
                actor = self.actors.get(actor_id)
                if actor is not None:
                    cpu, calls = usage.actors.get(actor_id, (0.0, 0.0))
                    actor.cpu_percent, actor.calls_per_s = round(cpu, 1), round(calls, 2)
                    total += actor.calls_per_s
            worker.calls_per_s = round(total, 2)

    def excuse(self, seconds: float) -> None:
        """The master did not run for ``seconds`` (its process was stopped, or busy: an embedded
        master shares its loop with the user's code). It could read no heartbeat and serve no
        reconnecting client meanwhile, so that time does not count as anyone's silence."""
        self.workers.excuse(seconds)
        self.clients.excuse(seconds)

    def slot_ready(self, worker_id: str, slot: int, endpoint: str) -> list[Placement]:
        """A warm host waits in ``slot`` (see ``Workers.ready``); returns the placements it allows."""
        return self.place_waiting() if self.workers.ready(worker_id, slot, endpoint) else []

    def record_death(self, actor: Actor, cause: str, node: str = "") -> DeadActor:
        """Remember that ``actor`` was reported dead (its owner was told so). ``node``: where it
        ran, when its worker has already left the table."""
        worker = self.workers.get(actor.worker_id)
        dead = DeadActor(actor.actor_id, actor.class_name, actor.worker_id, worker.node if worker else node, cause)
        return self.dead.remember(dead)

    # ---- actors -----------------------------------------------------------------------------

    def actor_exited(
        self, actor_id: str, cause: str = "", worker_id: str | None = None, slot: int | None = None
    ) -> tuple[Ended | None, list[Placement]]:
        """The actor's process ended: free its resources; it is placed again if it has restarts
        left (and was not being stopped). Returns how it ended and any new placements.

        A report from ``worker_id``'s ``slot`` about an instance that is not the one listed (a
        daemon back from a pause stopped the copy it still hosted, after the actor had been
        placed again elsewhere) does not end the actor; it only lets one that waited for that
        stale copy to go be placed again."""
        actor = self.actors.get(actor_id)
        if actor is not None and (
            (worker_id is not None and actor.worker_id != worker_id) or (slot is not None and actor.slot != slot)
        ):
            return None, self.place_waiting() if self.restarts.copy_exited(actor_id, worker_id) else []
        ended = self._end(actor_id, cause)
        return ended, self.place_waiting() if ended is not None else []

    def _end(self, actor_id: str, cause: str) -> Ended | None:
        actor = self.actors.get(actor_id)
        if actor is None or actor.restarting:
            return None
        self._process_ended(actor_id)
        restart, cause, delay = self.restarts.exited(actor, cause, self.clients.connected(actor.client_id))
        if not restart:
            return Ended(actor, False, cause, self._drop_actor(actor_id))
        actor.num_gpus = len(actor.gpu_ids)
        self.workers.free(actor)
        actor.restarting = True
        actor.worker_id, actor.slot, actor.endpoint, actor.gpu_ids, actor.rss_bytes = "", -1, "", (), 0
        self.queue.add(self.restarts.request(actor))
        return Ended(actor, True, cause, self.refs.holders_of(actor_id), delay)

    def _drop_actor(self, actor_id: str) -> Set[str]:
        """The actor leaves the table; returns its holders as they were."""
        actor = self.actors.pop(actor_id)
        self._process_ended(actor_id)
        if actor.name:
            self.names.release(actor.name, actor_id)
        self.queue.forget_placed((actor.client_id, actor.request_id), actor_id)
        key = self.queue.restart_key(actor_id)
        if key is not None:
            self.queue.remove(key)
        self.restarts.forget(actor_id)
        self.workers.free(actor)
        client = self.clients.get(actor.client_id)
        if client is not None:
            client.actors.discard(actor_id)
        return self.refs.forget(actor_id)

    def _process_ended(self, actor_id: str) -> None:
        """The actor's process is gone: copies it failed to answer and never claimed are void."""
        for target_id in self.refs.process_ended(actor_id):
            target = self.actors.get(target_id)
            if target is not None:
                self._release_if_unheld(target)

    def release_actor(self, client_id: str, actor_id: str, reason: str) -> Actor | None:
        """Mark an actor to be stopped (a kill: it is not restarted), when ``client_id`` created
        or holds it (empty: the table itself). A placed actor's resources free when its worker
        reports the exit; a restarting one ends now (``take_released``)."""
        actor = self.actors.get(actor_id)
        if actor is None or (client_id and client_id != actor.client_id and not self.refs.holds(client_id, actor_id)):
            return None
        actor.stopping = actor.stopping or reason
        if actor.restarting:
            self._released.append(Released(actor, self._drop_actor(actor_id)))
        return actor

    def take_released(self) -> list[Released]:
        """Actors released since the last call: those placed must be stopped (``stopping`` says
        why); those that were restarting are already gone and must be reported dead."""
        released, self._released = self._released, []
        return released

    def _release_if_unheld(self, actor: Actor) -> None:
        if actor.detached or actor.stopping or self.refs.held(actor.actor_id):
            return
        self.release_actor("", actor.actor_id, "released: no handle to it remains")
        if not actor.restarting:
            self._released.append(Released(actor, self.refs.holders_of(actor.actor_id)))

    # ---- references and names ---------------------------------------------------------------

    def add_ref(self, client_id: str, actor_id: str, token: str = "") -> None:
        """``client_id`` holds a handle to the actor (no token), or sent a copy (token)."""
        if actor_id not in self.actors or client_id not in self.clients:
            return
        if token:
            self.refs.sent_copy(client_id, actor_id, token)
        else:
            self.refs.hold(client_id, actor_id)

    def drop_ref(self, client_id: str, actor_id: str, token: str = "") -> None:
        """``client_id`` dropped its last handle (no token), or a copy with ``token`` arrived
        there. An actor nobody holds any more is released (``take_released``)."""
        actor = self.actors.get(actor_id)
        if actor is None:
            return
        if token:
            self.refs.claimed(actor_id, token)
        else:
            self.refs.let_go(client_id, actor_id)
        self._release_if_unheld(actor)

    def void_copy(self, client_id: str, actor_id: str, token: str, receiver: str) -> None:
        """The call that carried copy ``token`` of a handle to ``actor_id`` to the actor
        ``receiver`` failed without an answer (its sender, ``client_id``, says so): unless the
        receiver claimed it, nobody will, and once the receiver's process is gone it holds the
        actor no longer. While that process lives (the sender may have given up on a live one,
        whose claim may still come) it waits for its end (``References.void_later``)."""
        actor = self.actors.get(actor_id)
        if actor is None or not token.startswith(client_id + ".") or not self.refs.in_flight(actor_id, token):
            return  # gone, not this client's copy, or claimed
        got = self.actors.get(receiver)
        if got is not None and not got.restarting and not got.stopping:
            self.refs.void_later(receiver, actor_id, token)
        elif self.refs.void(actor_id, token):
            self._release_if_unheld(actor)

    def lookup(self, client_id: str, name: str, actor_id: str = "") -> Actor | None:
        """The live (or restarting) actor named ``name`` (or with that id); ``client_id`` now
        holds it."""
        actor = self.actors.get(actor_id or self.names.get(name, ""))
        if actor is None or actor.stopping:
            return None
        self.add_ref(client_id, actor.actor_id)
        return actor

    def readopt(self, actor: Actor, *, held: bool) -> bool:
        """A restartable actor that no worker brought back to this (restarted) table, described
        by its creator (``actor.client_id``; ``held``: it holds a handle): queued to be placed
        again, as its own restart would be (one more restart counted; ``place_waiting`` places
        it), when its limit allows and its creator has not left (one away waits as for any
        restart). Never released for lack of holders (``References.counted``)."""
        creator = self.clients.get(actor.client_id)
        if actor.actor_id in self.actors or creator is None or not actor.may_restart():
            return False
        actor.restarts += 1
        actor.restarting = True
        actor.worker_id, actor.slot, actor.endpoint, actor.gpu_ids = "", -1, "", ()
        if actor.name:  # taken meanwhile: the other keeps it
            actor.name = self.names.adopt(actor.name, actor.actor_id)
        self.actors[actor.actor_id] = actor
        self.refs.listed(actor.actor_id, counted=False)
        creator.actors.add(actor.actor_id)
        if held:
            self.refs.hold(actor.client_id, actor.actor_id)
        self.queue.add(self.restarts.request(actor))
        return True

    # ---- clients ----------------------------------------------------------------------------

    def moved_actors_of(self, client_id: str) -> list[Actor]:
        """The live actors ``client_id`` created or holds that were placed again after a restart
        (and are not being stopped)."""
        client = self.clients.get(client_id)
        if client is None:
            return []
        found = (self.actors.get(a) for a in sorted(client.actors | self.refs.holding(client_id)))
        return [a for a in found if a is not None and a.restarts and not a.restarting and not a.stopping]

    def client_lost(self, client_id: str) -> None:
        """Its session broke: its grace period starts, and its waiting requests are dropped (it
        sends them again when it is back)."""
        self.clients.lost(client_id)
        self._drop_requests_of(client_id)

    def remove_client(self, client_id: str) -> list[Actor]:
        """Forget a client; returns its actors, which the caller must stop (also those released
        because it held their last handle: ``take_released``). Its detached actors live on,
        with no creator, except one waiting to be placed again (restarting): it ends."""
        client = self.clients.remove(client_id)
        self._drop_requests_of(client_id)
        if client is None:
            return []
        actors = []
        for actor_id in client.actors:
            actor = self.actors.get(actor_id)
            if actor is None:
                continue
            if actor.detached and not actor.restarting:
                self.queue.forget_placed((actor.client_id, actor.request_id), actor_id)  # its requests are over
                actor.client_id = ""
                continue
            # a detached one waiting to be placed again ends too: nobody is left to construct it
            actor.stopping = actor.stopping or (NOT_RESTARTED if actor.detached else "its client is gone")
            actors.append(actor)
        for actor_id in self.refs.client_gone(client_id):
            held = self.actors.get(actor_id)
            if held is not None:
                self._release_if_unheld(held)
        for actor in actors:
            if actor.restarting:  # nothing to stop: it ends now
                self._released.append(Released(actor, self._drop_actor(actor.actor_id)))
        return [a for a in actors if not a.restarting]

    def withdraw(self, client_id: str, request_id: int) -> bool:
        """The client no longer waits for ``request_id``: drop it if it is still queued."""
        return request_id > 0 and self._unqueue((client_id, request_id)) is not None

    def answered_by(self, client_id: str, request_id: int) -> str:
        """The restarting actor that will answer ``client_id``'s resent ``request_id`` once it is
        placed again (``Actor.answers``), or ""."""
        client = self.clients.get(client_id)
        for actor_id in client.actors if client is not None and request_id > 0 else ():
            actor = self.actors.get(actor_id)
            if actor is not None and actor.answers == request_id:
                return actor_id
        return ""

    def _drop_requests_of(self, client_id: str) -> None:
        for key in self.queue.of_client(client_id):
            self._unqueue(key)
        client = self.clients.get(client_id)
        for actor_id in client.actors if client is not None else ():
            actor = self.actors.get(actor_id)
            if actor is not None:
                actor.answers = 0  # a client back from a lost session asks again

    # ---- placement --------------------------------------------------------------------------

    def request(self, req: Request) -> Placement | None:
        """Place ``req`` now, or queue it (None). Raises PlacementError if no node ever could,
        ActorNameTakenError if its name is taken."""
        if req.num_cpus < 1 or req.num_gpus < 0:
            raise PlacementError(f"{req.class_name}: num_cpus must be >= 1 and num_gpus >= 0")
        if refused := self.workers.never_fits(req):
            self.placements_failed += 1
            raise PlacementError(refused)
        key = (req.client_id, req.request_id)
        placed = self.queue.placed_by(key)
        if placed is not None:
            actor = self.actors[placed]
            if actor.restarting:  # its creator never built it: answered once it is placed again
                actor.answers = req.request_id
                return None
            worker = self.workers.get(actor.worker_id)
            node = worker.node if worker is not None else ""
            return Placement(
                req, actor.actor_id, actor.worker_id, node, actor.slot, actor.endpoint, actor.gpu_ids, True
            )
        if req.name and (holder := self.names.taken(req.name, key)):
            self.placements_failed += 1
            has = f"actor {holder} ({self.actors[holder].class_name}) has it" if holder in self.actors else ""
            raise ActorNameTakenError(
                f"the actor name {req.name!r} is taken: {has or 'a request still waiting for a slot has it'}"
            )
        self._unqueue(key)  # the same request again (resent after a reconnect) goes last
        placement = self._try_place(req)
        if placement is None:
            self.queue.add(req)
            if req.name:
                self.names.reserve(req.name, key)
        return placement

    def _unqueue(self, key: RequestKey) -> Request | None:
        req = self.queue.remove(key)
        if req is not None and req.name:
            self.names.unreserve(req.name, key)
        return req

    def next_wakeup(self) -> float | None:
        """When the table next needs the clock looked at (``expire_requests`` and
        ``place_waiting``): the earliest placement timeout, or the end of a restart's backoff."""
        deadline = self.queue.next_deadline()
        backoff = self.restarts.next_backoff()
        return min((t for t in (deadline, backoff) if t is not None), default=None)

    def expire_requests(self) -> list[Request]:
        """Drop the queued requests whose placement timeout has ended; returns them."""
        expired = self.queue.expire()
        for req in expired:
            if req.name:
                self.names.unreserve(req.name, (req.client_id, req.request_id))
        self.placements_failed += len(expired)
        return expired

    def place_waiting(self) -> list[Placement]:
        """Place queued requests, oldest first, as far as free slots allow."""
        placed: list[Placement] = []
        self.restarts.backoffs_over()
        if not self.queue or not self.workers.any_ready():  # no copy of the queue for nothing
            return placed
        for key, req in list(self.queue.items()):
            if not self.workers.any_ready():  # no ready slot anywhere: nothing more can be placed
                break
            placement = self._try_place(req)
            if placement is not None:
                self.queue.remove(key)
                placed.append(placement)
        return placed

    def _waits(self, req: Request) -> bool:
        """A restart that may not be placed yet (``Restarts.waits``), or whose creator (who
        constructs it) is away: it would be placed and never constructed, the notice saying so
        lost with the creator's session."""
        if not req.restart_of:
            return False
        return self.restarts.waits(req.restart_of) or not self.clients.connected(req.client_id)

    def _try_place(self, req: Request) -> Placement | None:
        if self._waits(req):
            return None
        worker = self.workers.pick(req)
        if worker is None:
            return None
        actor = self.actors.get(req.restart_of) if req.restart_of else None
        answers = 0
        if actor is not None:  # the same actor, placed again
            self.workers.take(worker, actor)
            actor.restarting, actor.placed_at = False, self.clock()
            answers, actor.answers = actor.answers, 0
        else:
            actor = Actor.asked_for(req, secrets.token_hex(8), self.clock())
            self.workers.take(worker, actor)
            self.actors[actor.actor_id] = actor
            self.queue.placed(req, actor.actor_id)
            self.refs.listed(actor.actor_id)
            client = self.clients.get(req.client_id)
            if client is not None:
                client.actors.add(actor.actor_id)
                self.refs.hold(req.client_id, actor.actor_id)
            if req.name:
                self.names.bind(req.name, actor.actor_id)
        self.placements_total += 1
        return Placement(
            req,
            actor.actor_id,
            worker.worker_id,
            worker.node,
            actor.slot,
            actor.endpoint,
            actor.gpu_ids,
            answers=answers,
        )

    # ---- invariants -------------------------------------------------------------------------

    def validate(self) -> None:
        """Check every invariant of the table and its parts; raises ``TableInvariantError``
        naming the first broken one. O(workers x slots + actors + clients + queue): for tests
        and ``ACTORRT_VALIDATE=1``, not for every event of a large cluster."""
        actors = self.actors
        self.workers.validate(actors)
        self.queue.validate(actors, self.clients)
        self.names.validate(actors, self.queue)
        self.refs.validate(actors, self.clients.keys())
        self.restarts.validate(actors, self.workers.keys())
        self.clients.validate(actors)
        self.dead.validate()
        for aid, a in actors.items():
            check(a.actor_id == aid, f"actor {aid} is filed under another id ({a.actor_id})")
            if a.restarting:
                check(not a.worker_id and a.slot == -1, f"actor {aid} is restarting but still on a slot")
                check(
                    not a.answers or self.clients.connected(a.client_id),
                    f"actor {aid} answers request {a.answers} of {a.client_id}, which is not connected",
                )
            else:
                check(not a.answers, f"actor {aid} is placed but still answers request {a.answers}")
        check(
            not any(self.workers.pick(r) for r in self.queue.values() if not self._waits(r)),
            "a queued request fits a ready slot but was not placed",
        )
        check(all(actors[a].stopping for a in self.dead if a in actors), "an actor reported dead is live again")
