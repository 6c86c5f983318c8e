"""The cluster table: nodes, slots, actors, clients, the placement queue and recent deaths.

A plain synchronous state object with no I/O: the master's servicer turns protobuf into
calls on it and turns what it returns (placements to announce, actors to stop, deaths to report,
requests whose time ran out) back into messages. Not thread-safe: the master calls it from its
event loop only. Time comes from the injected ``clock``; the master's periodic sweep (and a
wake-up at ``next_wakeup()``) drives what depends on it.

Sized for thousands of nodes: placing an actor does not scan the workers. Workers with a ready
slot are indexed by ``(cpus_free, ready slots)``; a placement takes the highest key that fits
(the spread policy: most free cpus first), so its cost grows with the number of distinct keys,
not with the number of nodes. ``validate()`` checks every invariant, indexes included.
"""

from __future__ import annotations

import bisect
import heapq
import itertools
import secrets
import time
from collections import OrderedDict
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, field

from actorrt.common.errors import SLOT_NOT_READY, ActorNameTakenError, PlacementError

__all__ = [
    "DEAD_ACTORS_KEPT",
    "Actor",
    "Client",
    "ClusterTable",
    "DeadActor",
    "Placement",
    "Request",
    "TableInvariantError",
    "Worker",
]

# Dead actors the table remembers (oldest forgotten first): for `actorrt logs` of a dead actor,
# and so that a worker rejoining after a partition does not bring back an actor reported dead.
DEAD_ACTORS_KEPT = 10_000
VOIDED_KEPT = 1_000  # per actor: voided handle copies whose late claim is still recognised


class TableInvariantError(AssertionError):
    """``ClusterTable.validate()`` found the table inconsistent: a bug in the table or its caller."""


NOT_RESTARTED = "not restarted: its creator, which holds its constructor arguments, is gone"

# Restart backoff: an instance that lived less than RESTART_STABLE_S (a constructor that raises,
# a process killed at once) counts as a quick exit. The first quick exit in a row restarts at
# once; each further one waits twice as long as the one before, from RESTART_BACKOFF_S up to
# RESTART_BACKOFF_MAX_S, so an actor that can never start (max_restarts=-1) does not spin.
RESTART_STABLE_S = 10.0
RESTART_BACKOFF_S = 0.5
RESTART_BACKOFF_MAX_S = 30.0


def restart_delay(quick_exits: int) -> float:
    """How long a restart waits after ``quick_exits`` quick exits in a row."""
    if quick_exits <= 1:
        return 0.0
    return min(RESTART_BACKOFF_MAX_S, RESTART_BACKOFF_S * 2.0 ** min(quick_exits - 2, 32))


@dataclass
class Worker:
    worker_id: str
    node: str
    node_ip: str
    cpus: int
    gpus: int
    memory_bytes: int
    pid: int
    cpus_free: int
    gpus_free: set[int]
    last_seen: float
    ready: dict[int, str] = field(default_factory=dict)  # slot -> endpoint of a warm host
    actors: set[str] = field(default_factory=set)
    held: dict[int, str] = field(default_factory=dict)  # slot -> the actor placed on it
    load: float = 0.0
    connected: bool = True


@dataclass
class Actor:
    actor_id: str
    worker_id: str
    slot: int
    endpoint: str
    client_id: str
    class_name: str
    num_cpus: int
    gpu_ids: tuple[int, ...]
    max_memory_mb: int = 0
    rss_bytes: int = 0
    num_gpus: int = 0  # len(gpu_ids), also while restarting (when it has none)
    stopping: str = ""  # the reason, once a stop was asked for
    name: str = ""
    detached: bool = False
    max_restarts: int = 0  # -1: forever
    restarts: int = 0
    placed_at: float = 0.0  # the table's clock when its current instance was placed
    request_id: int = 0  # its creator's request that placed it (0: rebuilt from its worker's word)
    quick_exits: int = 0  # instances in a row that lived less than RESTART_STABLE_S
    # Its creator's request resent after a reconnect (its ActorPlaced was lost) that found it
    # restarting: answered with ActorPlaced when it is placed again, failed if it dies instead.
    answers: int = 0
    # Waiting for a new slot after its process died: no worker, slot -1, no endpoint.
    restarting: bool = False
    methods: tuple[str, ...] = ()
    attributes: tuple[str, ...] = ()
    # Clients holding a handle to it (its creator first), and handle copies on their way to
    # another process (token -> count; a count below 0: the copy arrived before its sender said
    # it left). A non-detached, refcounted actor with neither is released.
    holders: set[str] = field(default_factory=set)
    tokens: dict[str, int] = field(default_factory=dict)
    # Copies no longer counted before their receiver claimed them (their sender left, or the
    # receiver died with the call that carried them): a claim that comes after all is ignored
    # (the newest VOIDED_KEPT; a claim comes soon after, if at all: its receiver is gone).
    voided: OrderedDict[str, None] = field(default_factory=OrderedDict)
    # Copies in calls to this actor that failed without an answer while its process lived, as
    # (actor id, token): void when the process ends, unless claimed by then.
    voids: list[tuple[str, str]] = field(default_factory=list)
    senders: set[str] = field(default_factory=set)  # clients that sent a copy (their ``sent`` lists it)
    # False for an actor a restarted master learned of from its worker, or placed again from its
    # creator's word: who holds it is not known for sure (a client's AddRef may have come before
    # the worker, a handle copy may have been on its way), so it is never released for lack of
    # holders: it ends with its creator (unless detached), or by a kill.
    refcounted: bool = True

    def may_restart(self) -> bool:
        return self.max_restarts < 0 or self.restarts < self.max_restarts


@dataclass
class Client:
    client_id: str
    hostname: str
    pid: int
    connected: bool = True
    lost_at: float | None = None
    actors: set[str] = field(default_factory=set)  # those it created
    holding: set[str] = field(default_factory=set)  # those it holds a handle to
    sent: set[str] = field(default_factory=set)  # those it sent handle copies of (tokens)
    # The actor whose own process this client is: the actors it created die with that actor.
    actor_id: str = ""


@dataclass(frozen=True)
class Request:
    client_id: str
    request_id: int
    num_cpus: int = 1
    num_gpus: int = 0
    max_memory_mb: int = 0
    class_name: str = ""
    timeout_s: float = 0.0  # how long it may wait in the queue; 0: forever
    name: str = ""
    detached: bool = False
    max_restarts: int = 0
    spread: bool = False  # the node with the most free cpus; else pack (the fewest that fit)
    node: str = ""  # a worker_id: place there only
    methods: tuple[str, ...] = ()
    attributes: tuple[str, ...] = ()
    restart_of: str = ""  # the actor this request places again after its process died


@dataclass(frozen=True)
class Placement:
    request: Request
    actor_id: str
    worker_id: str
    node: str
    slot: int
    endpoint: str
    gpu_ids: tuple[int, ...]
    again: bool = False  # the answer to a request placed before (resent after a reconnect): no new start
    # A restart's placement that also answers its creator's resent request (``Actor.answers``).
    answers: int = 0


@dataclass(frozen=True)
class Ended:
    """An actor's process ended (or its node was lost): ``restarting`` if it is placed again."""

    actor: Actor
    restarting: bool
    cause: str
    delay_s: float = 0.0  # a restart's backoff


@dataclass(frozen=True)
class DeadActor:
    actor_id: str
    class_name: str
    worker_id: str
    node: str
    cause: str


_Key = tuple[int, int]  # (cpus_free, ready slots) of a worker that has a ready slot


def _pending(key: tuple[str, int]) -> str:
    """How ``names`` marks a name reserved by a queued request."""
    return f"{key[0]}/{key[1]}"


class ClusterTable:
    def __init__(self, clock: Callable[[], float] = time.monotonic, dead_kept: int = DEAD_ACTORS_KEPT) -> None:
        self.clock = clock
        self.workers: dict[str, Worker] = {}
        self.actors: dict[str, Actor] = {}
        self.clients: dict[str, Client] = {}
        # Waiting requests by (client_id, request_id), oldest first.
        self.queue: dict[tuple[str, int], Request] = {}
        self.placements_total = 0
        self.placements_failed = 0
        # Actors already reported dead (bounded, oldest first): a worker that rejoins after a
        # partition may still host them, but their owners were told they died, so they must not
        # come back; `actorrt logs` finds the worker that hosted them.
        self.dead: OrderedDict[str, DeadActor] = OrderedDict()
        self.dead_kept = dead_kept
        self._worker_seq = itertools.count(1)
        # The free-slot index: key -> workers with that key (insertion-ordered), keys sorted.
        self._index: dict[_Key, dict[str, None]] = {}
        self._index_keys: list[_Key] = []
        self._key_of: dict[str, _Key] = {}
        # Placement deadlines of queued requests: (deadline, client_id, request_id), a min-heap;
        # entries of requests no longer queued are skipped when they come up.
        self._deadlines: list[tuple[float, str, int]] = []
        # Names of live actors (and of queued requests, which reserve theirs) -> actor id, or
        # "client_id/request_id" while queued.
        self.names: dict[str, str] = {}
        # Actors whose refcount hit zero (or that were killed while restarting): the caller
        # stops them (``take_released``).
        self._released: list[Actor] = []
        # Queued requests that place a restarting actor again: actor id -> queue key.
        self._restart_keys: dict[str, tuple[str, int]] = {}
        # Actors a rejoining worker still hosted a stale copy of, which it was told to stop:
        # actor id -> those workers. The actor is not placed again until every copy's exit is in.
        self._stale_copies: dict[str, set[str]] = {}
        # (client_id, request_id) -> the live actor that request placed: a request resent after
        # a reconnect (its ActorPlaced lost with the old stream) is answered again, not placed twice.
        self._placed_by: dict[tuple[str, int], str] = {}
        # Restarts waiting out a backoff: actor id -> when it ends (the table's clock). Only
        # ``place_waiting`` ends one (and then tries to place it), so a restart outside this map
        # that fits a ready slot is a bug ``validate`` catches.
        self._backoff: dict[str, float] = {}
        self._restart_seq = itertools.count(1)

    # ---- workers ----------------------------------------------------------------------------

    def add_worker(
        self,
        *,
        node: str,
        node_ip: str,
        cpus: int,
        gpus: int,
        memory_bytes: int = 0,
        pid: int = 0,
        worker_id: str = "",
        live_actors: Iterable[Actor] = (),
    ) -> tuple[Worker, list[Actor]]:
        """Register a worker; a known ``worker_id`` re-registers it with the actors it still hosts.

        Returns the worker and the live actors it must stop: those already reported dead.
        """
        if cpus < 1:
            raise ValueError(f"a worker needs at least 1 cpu, got {cpus}")
        if worker_id in self.workers:
            self.remove_worker(worker_id, keep=self.still_hosted(worker_id, live_actors))
        worker_id = worker_id or f"w{next(self._worker_seq)}-{secrets.token_hex(3)}"
        worker = Worker(
            worker_id=worker_id,
            node=node,
            node_ip=node_ip,
            cpus=cpus,
            gpus=gpus,
            memory_bytes=memory_bytes,
            pid=pid,
            cpus_free=cpus,
            gpus_free=set(range(gpus)),
            last_seen=self.clock(),
        )
        self.workers[worker_id] = worker
        stale = []
        for actor in live_actors:
            known = self.actors.get(actor.actor_id)
            if known is not None and known.worker_id == worker_id and known.slot == actor.slot and not known.restarting:
                # the same instance (kept by remove_worker): what the table knew of it stays
                worker.actors.add(known.actor_id)
                worker.held[known.slot] = known.actor_id
                worker.cpus_free -= known.num_cpus
                worker.gpus_free -= set(known.gpu_ids)
                if known.stopping:  # its stop went to the stream that broke and may be lost: again
                    stale.append(known)
                continue
            actor.worker_id = worker_id
            if actor.actor_id in self.dead:
                actor.stopping = f"it was reported dead: {self.dead[actor.actor_id].cause}"
                stale.append(actor)
                continue
            if actor.actor_id in self.actors or actor.slot in worker.held:
                actor.stopping = "reported twice by its worker"
                stale.append(actor)
                if actor.actor_id in self.actors:
                    self._stale_copies.setdefault(actor.actor_id, set()).add(worker_id)
                continue
            actor.num_gpus = len(actor.gpu_ids)
            actor.holders = {actor.client_id}
            actor.placed_at = self.clock()  # as far as this table knows
            actor.refcounted = False  # who else holds it is not known for sure
            if actor.name and actor.name in self.names:  # another live actor has it: keep theirs
                actor.name = ""
            if actor.name:
                self.names[actor.name] = actor.actor_id
            self.actors[actor.actor_id] = actor
            worker.actors.add(actor.actor_id)
            worker.held[actor.slot] = actor.actor_id
            worker.cpus_free -= actor.num_cpus
            worker.gpus_free -= set(actor.gpu_ids)
            client = self.clients.get(actor.client_id)
            if client is None:  # its client has not reconnected (yet): it has the grace period
                client = Client(actor.client_id, "", 0, connected=False, lost_at=self.clock())
                self.clients[actor.client_id] = client
            client.actors.add(actor.actor_id)
            client.holding.add(actor.actor_id)
        return worker, stale

    def record_death(self, actor: Actor, cause: str, node: str = "") -> DeadActor:
        """Remember that ``actor`` was reported dead (its owner was told so). ``node``: where it
        ran, when its worker has already left the table."""
        worker = self.workers.get(actor.worker_id)
        dead = DeadActor(actor.actor_id, actor.class_name, actor.worker_id, worker.node if worker else node, cause)
        return self._remember(dead)

    def record_lost(self, actor_id: str, cause: str) -> DeadActor:
        """Remember an actor this table never listed as reported dead: a worker that registers
        with it later must stop it, not bring it back."""
        return self._remember(DeadActor(actor_id, "", "", "", cause))

    def readopt(self, actor: Actor, *, held: bool) -> bool:
        """A restartable actor that no worker brought back to this (restarted) table, described
        by its creator (``actor.client_id``; ``held``: it holds a handle): queued to be placed
        again, as its own restart would be (one more restart counted; ``place_waiting`` places
        it), when its limit allows and its creator has not left (one away waits as for any
        restart). Never released for lack of holders (``Actor.refcounted``)."""
        creator = self.clients.get(actor.client_id)
        if actor.actor_id in self.actors or creator is None or not actor.may_restart():
            return False
        actor.restarts += 1
        actor.restarting = True
        actor.worker_id, actor.slot, actor.endpoint, actor.gpu_ids = "", -1, "", ()
        actor.holders, actor.refcounted = set(), False
        if actor.name and actor.name in self.names:  # taken meanwhile: the other keeps it
            actor.name = ""
        if actor.name:
            self.names[actor.name] = actor.actor_id
        self.actors[actor.actor_id] = actor
        creator.actors.add(actor.actor_id)
        if held:
            self.add_ref(actor.client_id, actor.actor_id)
        self._queue_restart(actor)
        return True

    def _queue_restart(self, actor: Actor) -> None:
        """Queue the request that places a restarting actor again."""
        self._enqueue(
            Request(
                client_id=actor.client_id,
                request_id=-next(self._restart_seq),  # never a client's: theirs are > 0
                num_cpus=actor.num_cpus,
                num_gpus=actor.num_gpus,
                max_memory_mb=actor.max_memory_mb,
                class_name=actor.class_name,
                restart_of=actor.actor_id,
            )
        )

    def _remember(self, dead: DeadActor) -> DeadActor:
        self.dead[dead.actor_id] = dead
        self.dead.move_to_end(dead.actor_id)
        while len(self.dead) > self.dead_kept:
            self.dead.popitem(last=False)
        return dead

    def seen(self, worker_id: str, load: float | None = None, rss: Mapping[str, int] | None = None) -> None:
        worker = self.workers.get(worker_id)
        if worker is None:
            return
        worker.last_seen = self.clock()
        if load is not None:
            worker.load = load
        for actor_id, value in (rss or {}).items():
            actor = self.actors.get(actor_id)
            if actor is not None:
                actor.rss_bytes = value

    def excuse(self, seconds: float) -> None:
        """The master did not run for ``seconds`` (its process was stopped, or busy: an embedded
        master shares its loop with the user's code). It could read no heartbeat and serve no
        reconnecting client meanwhile, so that time does not count as anyone's silence."""
        now = self.clock()
        for worker in self.workers.values():
            worker.last_seen = min(now, worker.last_seen + seconds)
        for client in self.clients.values():
            if client.lost_at is not None:
                client.lost_at = min(now, client.lost_at + seconds)

    def stale_workers(self, timeout_s: float) -> list[str]:
        deadline = self.clock() - timeout_s
        return [w.worker_id for w in self.workers.values() if w.last_seen < deadline]

    def remove_worker(
        self, worker_id: str, cause: str = "", keep: Collection[str] = (), causes: Mapping[str, str] | None = None
    ) -> list[Ended]:
        """Drop a worker and everything on it; returns how each of its actors ended (placed
        again, or dead). ``keep``: actors it still hosts as it registers again (``add_worker``
        with the same id takes them back as they were: ``still_hosted``). ``causes``: how some
        of them ended, instead of ``cause`` (exits it reports as it registers again)."""
        worker = self.workers.get(worker_id)
        if worker is None:
            return []
        actor_ids = [a for a in worker.actors if a not in keep]
        worker.connected = False  # no placement there, nor in the index, while its actors end
        self._unindex(worker_id)
        ended = [self._end(a, (causes or {}).get(a, cause)) for a in actor_ids]
        del self.workers[worker_id]
        for actor_id, copies in list(self._stale_copies.items()):  # gone with it
            copies.discard(worker_id)
            if not copies:
                del self._stale_copies[actor_id]
        return [e for e in ended if e is not None]

    def still_hosted(self, worker_id: str, live_actors: Iterable[Actor]) -> set[str]:
        """Which of a known worker's actors its registration reports on the slots the table has
        them on: the same instances (its session came back before the master saw it go)."""
        worker = self.workers.get(worker_id)
        return {
            a.actor_id
            for a in live_actors
            if worker is not None and a.actor_id in worker.actors and self.actors[a.actor_id].slot == a.slot
        }

    def slot_ready(self, worker_id: str, slot: int, endpoint: str) -> list[Placement]:
        """A warm host waits in ``slot``. Ignored while an actor holds the slot: the worker sent
        it before it took that actor's StartActor, and the actor takes this host."""
        worker = self.workers.get(worker_id)
        if worker is None or slot in worker.held:
            return []
        worker.ready[slot] = endpoint
        self._reindex(worker)
        return self.place_waiting()

    def slot_lost(self, worker_id: str, slot: int) -> bool:
        """The slot's warm host exited with no actor: no placement may go there until the slot's
        next ``slot_ready``. Returns whether it was listed ready."""
        worker = self.workers.get(worker_id)
        if worker is None or worker.ready.pop(slot, None) is None:
            return False
        self._reindex(worker)
        return True

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
            copies = self._stale_copies.get(actor_id)
            if copies is None or worker_id not in copies:
                return None, []
            copies.discard(worker_id)  # a stale copy's exit: the actor may be placed again now
            if not copies:
                del self._stale_copies[actor_id]
            return None, self.place_waiting()
        ended = self._end(actor_id, cause)
        return ended, self.place_waiting() if ended is not None else []

    def _end(self, actor_id: str, cause: str) -> Ended | None:
        actor = self.actors.get(actor_id)
        if actor is None or actor.restarting:
            return None
        self._process_ended(actor)
        owner = self.clients.get(actor.client_id)
        # Its slot was not ready: never constructed there. A first placement ends (its creator
        # places it again itself); a restart's placement is queued again, not counted as a restart.
        not_ready = cause.startswith(SLOT_NOT_READY)
        never_built = not_ready and actor.restarts == 0
        restartable = not actor.stopping and (actor.may_restart() or not_ready) and not never_built
        if restartable and owner is not None and owner.connected:
            now = self.clock()
            delay = 0.0
            if not not_ready:
                quick = now - actor.placed_at < RESTART_STABLE_S
                actor.quick_exits = actor.quick_exits + 1 if quick else 0
                delay = restart_delay(actor.quick_exits)
            actor.num_gpus = len(actor.gpu_ids)
            self._free(actor)
            actor.restarts += 0 if not_ready else 1
            actor.restarting = True
            actor.worker_id, actor.slot, actor.endpoint, actor.gpu_ids, actor.rss_bytes = "", -1, "", (), 0
            self._queue_restart(actor)
            if delay > 0:
                self._backoff[actor_id] = now + delay
            return Ended(actor, True, cause, delay)
        if restartable and actor.max_restarts != 0:
            cause = f"{cause}; {NOT_RESTARTED}"
        elif actor.max_restarts != 0 and not actor.stopping and not never_built:
            cause = f"{cause} (after {actor.restarts} restarts, the last allowed)"
        self._drop_actor(actor_id)
        return Ended(actor, False, actor.stopping or cause)

    def _free(self, actor: Actor) -> None:
        """Give the actor's slot and resources back (it stays in the table)."""
        worker = self.workers.get(actor.worker_id)
        if worker is not None:
            worker.actors.discard(actor.actor_id)
            if worker.held.get(actor.slot) == actor.actor_id:
                del worker.held[actor.slot]
            worker.cpus_free += actor.num_cpus
            worker.gpus_free |= set(actor.gpu_ids)
            self._reindex(worker)

    def _drop_actor(self, actor_id: str) -> Actor | None:
        actor = self.actors.pop(actor_id, None)
        if actor is None:
            return None
        self._process_ended(actor)
        if actor.name and self.names.get(actor.name) == actor_id:
            del self.names[actor.name]
        if self._placed_by.get((actor.client_id, actor.request_id)) == actor_id:
            del self._placed_by[(actor.client_id, actor.request_id)]
        for holder in actor.holders:
            held = self.clients.get(holder)
            if held is not None:
                held.holding.discard(actor_id)
        key = self._restart_keys.pop(actor_id, None)
        if key is not None:
            self.queue.pop(key, None)
        self._stale_copies.pop(actor_id, None)
        self._backoff.pop(actor_id, None)
        self._free(actor)
        client = self.clients.get(actor.client_id)
        if client is not None:
            client.actors.discard(actor_id)
        for sender_id in actor.senders:  # a long-lived client must not remember every actor it sent
            sender = self.clients.get(sender_id)
            if sender is not None:
                sender.sent.discard(actor_id)
        return actor

    def release_actor(self, client_id: str, actor_id: str, reason: str) -> Actor | None:
        """Mark an actor to be stopped (a kill: it is not restarted), when ``client_id`` created
        or holds it (empty: the table itself). A placed actor's resources free when its worker
        reports the exit; a restarting one ends now (``take_released``)."""
        actor = self.actors.get(actor_id)
        if actor is None or (client_id and client_id != actor.client_id and client_id not in actor.holders):
            return None
        actor.stopping = actor.stopping or reason
        if actor.restarting:
            self._drop_actor(actor_id)
            self._released.append(actor)
        return actor

    def take_released(self) -> list[Actor]:
        """Actors released since the last call: those placed must be stopped (``stopping`` says
        why); those that were restarting are already gone and must be reported dead."""
        released, self._released = self._released, []
        return released

    # ---- references and names -----------------------------------------------------------------

    def add_ref(self, client_id: str, actor_id: str, token: str = "") -> None:
        """``client_id`` holds a handle to the actor (no token), or sent a copy (token)."""
        actor = self.actors.get(actor_id)
        client = self.clients.get(client_id)
        if actor is None or client is None:
            return
        if token:
            self._count_token(actor, token, +1)
            client.sent.add(actor_id)
            actor.senders.add(client_id)
        else:
            actor.holders.add(client_id)
            client.holding.add(actor_id)

    def drop_ref(self, client_id: str, actor_id: str, token: str = "") -> None:
        """``client_id`` dropped its last handle (no token), or a copy with ``token`` arrived
        there. An actor nobody holds any more is released (``take_released``)."""
        actor = self.actors.get(actor_id)
        if actor is None:
            return
        if token in actor.voided:  # the claim of a copy voided before it came
            del actor.voided[token]
        elif token:
            self._count_token(actor, token, -1)
        else:
            actor.holders.discard(client_id)
            client = self.clients.get(client_id)
            if client is not None:
                client.holding.discard(actor_id)
        self._release_if_unheld(actor)

    def void_copy(self, client_id: str, actor_id: str, token: str, receiver: str) -> None:
        """The call that carried copy ``token`` of a handle to ``actor_id`` to the actor
        ``receiver`` failed without an answer (its sender, ``client_id``, says so): unless the
        receiver claimed it, nobody will, and once the receiver's process is gone it holds the
        actor no longer. While that process lives (the sender may have given up on a live one,
        whose claim may still come) it waits for its end (``Actor.voids``)."""
        actor = self.actors.get(actor_id)
        if actor is None or not token.startswith(client_id + ".") or actor.tokens.get(token, 0) <= 0:
            return  # gone, not this client's copy, or claimed
        got = self.actors.get(receiver)
        if got is not None and not got.restarting and not got.stopping:
            got.voids.append((actor_id, token))
            return
        self._void(actor, token)

    def _void(self, actor: Actor, token: str) -> None:
        """Copy ``token`` of a handle to ``actor``, if not claimed, holds it no longer; its claim,
        if it comes after all, is ignored."""
        if actor.tokens.get(token, 0) <= 0:
            return
        del actor.tokens[token]
        actor.voided[token] = None
        while len(actor.voided) > VOIDED_KEPT:
            actor.voided.popitem(last=False)
        self._release_if_unheld(actor)

    def _process_ended(self, actor: Actor) -> None:
        """``actor``'s process is gone (it restarts, or ends): the copies in calls it failed to
        answer that it never claimed are void."""
        voids, actor.voids = actor.voids, []
        for target_id, token in voids:
            target = self.actors.get(target_id)
            if target is not None:
                self._void(target, token)

    def _count_token(self, actor: Actor, token: str, step: int) -> None:
        count = actor.tokens.get(token, 0) + step
        if count:
            actor.tokens[token] = count
        else:
            actor.tokens.pop(token, None)

    def _release_if_unheld(self, actor: Actor) -> None:
        if actor.holders or actor.tokens or actor.detached or not actor.refcounted or actor.stopping:
            return
        self.release_actor("", actor.actor_id, "released: no handle to it remains")
        if not actor.restarting:
            self._released.append(actor)

    def lookup(self, client_id: str, name: str, actor_id: str = "") -> Actor | None:
        """The live (or restarting) actor named ``name`` (or with that id); ``client_id`` now
        holds it."""
        actor = self.actors.get(actor_id or self.names.get(name, ""))
        if actor is None or actor.stopping:
            return None
        self.add_ref(client_id, actor.actor_id)
        return actor

    # ---- clients ----------------------------------------------------------------------------

    def open_client(self, client_id: str, hostname: str, pid: int, actor_id: str = "") -> Client:
        client = self.clients.get(client_id)
        if client is None:
            client = Client(client_id, hostname, pid)
            self.clients[client_id] = client
        client.connected, client.lost_at = True, None
        client.hostname, client.pid = hostname or client.hostname, pid or client.pid
        client.actor_id = actor_id or client.actor_id
        return client

    def moved_actors_of(self, client_id: str) -> list[Actor]:
        """The live actors ``client_id`` created or holds that were placed again after a restart
        (and are not being stopped)."""
        client = self.clients.get(client_id)
        if client is None:
            return []
        found = (self.actors.get(a) for a in sorted(client.actors | client.holding))
        return [a for a in found if a is not None and a.restarts and not a.restarting and not a.stopping]

    def clients_of_actor(self, actor_id: str) -> list[str]:
        """The clients that are ``actor_id``'s own process (the actors they created die with it)."""
        return [c.client_id for c in self.clients.values() if c.actor_id == actor_id]

    def client_lost(self, client_id: str) -> None:
        client = self.clients.get(client_id)
        if client is not None and client.connected:
            client.connected, client.lost_at = False, self.clock()
        self._drop_requests_of(client_id)

    def expired_clients(self, grace_s: float) -> list[str]:
        deadline = self.clock() - grace_s
        return [
            c.client_id
            for c in self.clients.values()
            if not c.connected and c.lost_at is not None and c.lost_at <= deadline
        ]

    def remove_client(self, client_id: str) -> list[Actor]:
        """Forget a client; returns its actors, which the caller must stop (also those released
        because it held their last handle: ``take_released``). Its detached actors live on,
        with no creator, except one waiting to be placed again (restarting): it ends."""
        client = self.clients.pop(client_id, None)
        self._drop_requests_of(client_id)
        if client is None:
            return []
        actors = []
        for actor_id in client.actors:
            actor = self.actors.get(actor_id)
            if actor is None:
                continue
            if actor.detached and not actor.restarting:
                self._placed_by.pop((actor.client_id, actor.request_id), None)  # its client's requests are over
                actor.client_id = ""
                continue
            # a detached one waiting to be placed again ends too: nobody is left to construct it
            actor.stopping = actor.stopping or (NOT_RESTARTED if actor.detached else "its client is gone")
            actors.append(actor)
        for actor_id in client.holding:
            held = self.actors.get(actor_id)
            if held is not None:
                held.holders.discard(client_id)
        prefix = client_id + "."
        for actor_id in client.holding | client.sent:  # its copies on their way are never claimed
            held = self.actors.get(actor_id)
            if held is not None:
                for token in [t for t in held.tokens if t.startswith(prefix)]:
                    if held.tokens[token] > 0:  # on its way still: a claim that comes is ignored
                        self._void(held, token)
                    else:
                        del held.tokens[token]
                self._release_if_unheld(held)
        for actor in actors:
            if actor.restarting:  # nothing to stop: it ends now
                self._drop_actor(actor.actor_id)
                self._released.append(actor)
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
        for key in [k for k in self.queue if k[0] == client_id and k[1] > 0]:
            self._unqueue(key)
        client = self.clients.get(client_id)
        for actor_id in client.actors if client is not None else ():
            actor = self.actors.get(actor_id)
            if actor is not None:
                actor.answers = 0  # a client back from a lost session asks again

    def _unqueue(self, key: tuple[str, int]) -> Request | None:
        req = self.queue.pop(key, None)
        if req is not None and req.name and self.names.get(req.name) == _pending(key):
            del self.names[req.name]
        return req

    # ---- placement --------------------------------------------------------------------------

    def request(self, req: Request) -> Placement | None:
        """Place ``req`` now, or queue it (None). Raises PlacementError if no node ever could,
        ActorNameTakenError if its name is taken."""
        if req.num_cpus < 1 or req.num_gpus < 0:
            raise PlacementError(f"{req.class_name}: num_cpus must be >= 1 and num_gpus >= 0")
        candidates = [self.workers[req.node]] if req.node in self.workers else list(self.workers.values())
        if req.node and req.node not in self.workers:
            self.placements_failed += 1
            raise PlacementError(f"{req.class_name or 'actor'}: no node {req.node!r} in the cluster (see status)")
        if candidates and not any(w.cpus >= req.num_cpus and w.gpus >= req.num_gpus for w in candidates):
            self.placements_failed += 1
            biggest = max(candidates, key=lambda w: (w.cpus, w.gpus))
            where = f"node {req.node}" if req.node else "the largest node"
            raise PlacementError(
                f"{req.class_name or 'actor'} asks for num_cpus={req.num_cpus}, num_gpus={req.num_gpus}, "
                f"but {where} has cpus={biggest.cpus}, gpus={biggest.gpus}"
            )
        key = (req.client_id, req.request_id)
        placed = self._placed_by.get(key)
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
        if req.name:
            holder = self.names.get(req.name)
            if holder is not None and holder != _pending(key):
                self.placements_failed += 1
                raise ActorNameTakenError(f"the actor name {req.name!r} is taken: {self._named(holder)}")
        self._unqueue(key)  # the same request again (resent after a reconnect) goes last
        placement = self._try_place(req)
        if placement is None:
            self._enqueue(req)
        return placement

    def _named(self, holder: str) -> str:
        actor = self.actors.get(holder)
        if actor is not None:
            return f"actor {holder} ({actor.class_name}) has it"
        return "a request still waiting for a slot has it"

    def _enqueue(self, req: Request) -> None:
        key = (req.client_id, req.request_id)
        self.queue[key] = req
        if req.restart_of:
            self._restart_keys[req.restart_of] = key
        if req.name:
            self.names[req.name] = _pending(key)
        if req.timeout_s > 0:
            heapq.heappush(self._deadlines, (self.clock() + req.timeout_s, req.client_id, req.request_id))

    def next_deadline(self) -> float | None:
        """When the earliest queued request's placement timeout ends (the table's clock), if any."""
        while self._deadlines:
            deadline, client_id, request_id = self._deadlines[0]
            req = self.queue.get((client_id, request_id))
            if req is not None and req.timeout_s > 0:
                return deadline
            heapq.heappop(self._deadlines)
        return None

    def next_wakeup(self) -> float | None:
        """When the table next needs the clock looked at (``expire_requests`` and
        ``place_waiting``): the earliest placement timeout, or the end of a restart's backoff."""
        deadline = self.next_deadline()
        backoff = min(self._backoff.values(), default=None)
        return min((t for t in (deadline, backoff) if t is not None), default=None)

    def expire_requests(self) -> list[Request]:
        """Drop the queued requests whose placement timeout has ended; returns them."""
        now = self.clock()
        expired = []
        while (deadline := self.next_deadline()) is not None and deadline <= now:
            _, client_id, request_id = heapq.heappop(self._deadlines)
            req = self._unqueue((client_id, request_id))
            assert req is not None  # next_deadline skips what is no longer queued
            self.placements_failed += 1
            expired.append(req)
        return expired

    def place_waiting(self) -> list[Placement]:
        """Place queued requests, oldest first, as far as free slots allow."""
        placed: list[Placement] = []
        if self._backoff:
            now = self.clock()
            for actor_id in [a for a, until in self._backoff.items() if until <= now]:
                del self._backoff[actor_id]
        if not self.queue:
            return placed
        for key, req in list(self.queue.items()):
            if not self._index_keys:  # no ready slot anywhere: nothing more can be placed
                break
            placement = self._try_place(req)
            if placement is not None:
                del self.queue[key]
                placed.append(placement)
        return placed

    def _fits(self, worker: Worker, req: Request) -> bool:
        return worker.cpus_free >= req.num_cpus and len(worker.gpus_free) >= req.num_gpus and bool(worker.ready)

    def _pick(self, req: Request) -> Worker | None:
        """Where ``req`` goes: its pinned node if that fits now; else, spread, the worker with
        the most free cpus (then ready slots), or, pack, the one with the fewest that fit."""
        if req.node:
            worker = self.workers.get(req.node)
            return worker if worker is not None and self._key_of.get(req.node) and self._fits(worker, req) else None
        if req.spread:
            keys: Iterable[_Key] = reversed(self._index_keys)
        else:
            first = bisect.bisect_left(self._index_keys, (req.num_cpus, 0))
            keys = itertools.islice(self._index_keys, first, None)
        for key in keys:
            if key[0] < req.num_cpus:
                return None
            for worker_id in self._index[key]:
                worker = self.workers[worker_id]
                if len(worker.gpus_free) >= req.num_gpus:
                    return worker
        return None

    def _waits(self, req: Request) -> bool:
        """A restart that may not be placed yet: its backoff runs, a stale copy of the actor is
        still being stopped, or its creator (who constructs it) is away: it would be placed and
        never constructed, the notice saying so lost with the creator's session."""
        if not req.restart_of:
            return False
        if req.restart_of in self._stale_copies or req.restart_of in self._backoff:
            return True
        creator = self.clients.get(req.client_id)
        return creator is None or not creator.connected

    def _try_place(self, req: Request) -> Placement | None:
        if self._waits(req):
            return None
        worker = self._pick(req)
        if worker is None:
            return None
        slot = min(worker.ready)
        endpoint = worker.ready.pop(slot)
        gpu_ids = tuple(sorted(worker.gpus_free)[: req.num_gpus])
        worker.gpus_free -= set(gpu_ids)
        worker.cpus_free -= req.num_cpus
        actor = self.actors.get(req.restart_of) if req.restart_of else None
        answers = 0
        if actor is not None:  # the same actor, placed again
            self._restart_keys.pop(actor.actor_id, None)
            actor.worker_id, actor.slot, actor.endpoint, actor.gpu_ids = worker.worker_id, slot, endpoint, gpu_ids
            actor.restarting, actor.placed_at = False, self.clock()
            answers, actor.answers = actor.answers, 0
        else:
            actor = Actor(
                actor_id=secrets.token_hex(8),
                worker_id=worker.worker_id,
                slot=slot,
                endpoint=endpoint,
                client_id=req.client_id,
                class_name=req.class_name,
                num_cpus=req.num_cpus,
                gpu_ids=gpu_ids,
                max_memory_mb=req.max_memory_mb,
                num_gpus=req.num_gpus,
                name=req.name,
                detached=req.detached,
                max_restarts=req.max_restarts,
                methods=req.methods,
                attributes=req.attributes,
                holders={req.client_id},
                placed_at=self.clock(),
                request_id=req.request_id,
            )
            self.actors[actor.actor_id] = actor
            if req.request_id > 0:
                self._placed_by[(req.client_id, req.request_id)] = actor.actor_id
            client = self.clients.get(req.client_id)
            if client is not None:
                client.actors.add(actor.actor_id)
                client.holding.add(actor.actor_id)
            if req.name:
                self.names[req.name] = actor.actor_id
        worker.actors.add(actor.actor_id)
        worker.held[slot] = actor.actor_id
        self._reindex(worker)
        self.placements_total += 1
        return Placement(req, actor.actor_id, worker.worker_id, worker.node, slot, endpoint, gpu_ids, answers=answers)

    # ---- the free-slot index ----------------------------------------------------------------

    @staticmethod
    def _key(worker: Worker) -> _Key | None:
        """The worker's index key, or None: it cannot take a placement now."""
        if not worker.connected or not worker.ready or worker.cpus_free < 1:
            return None
        return (worker.cpus_free, len(worker.ready))

    def _reindex(self, worker: Worker) -> None:
        key = self._key(worker)
        if self._key_of.get(worker.worker_id) == key:
            return
        self._unindex(worker.worker_id)
        if key is None:
            return
        bucket = self._index.get(key)
        if bucket is None:
            bucket = self._index[key] = {}
            bisect.insort(self._index_keys, key)
        bucket[worker.worker_id] = None
        self._key_of[worker.worker_id] = key

    def _unindex(self, worker_id: str) -> None:
        key = self._key_of.pop(worker_id, None)
        if key is None:
            return
        bucket = self._index[key]
        del bucket[worker_id]
        if not bucket:
            del self._index[key]
            del self._index_keys[bisect.bisect_left(self._index_keys, key)]

    # ---- summary ----------------------------------------------------------------------------

    def slots(self) -> tuple[int, int]:
        """(cpus used, cpus total) over all workers."""
        total = sum(w.cpus for w in self.workers.values())
        free = sum(w.cpus_free for w in self.workers.values())
        return total - free, total

    # ---- invariants -------------------------------------------------------------------------

    def validate(self) -> None:
        """Check every invariant of the table; raises ``TableInvariantError`` naming the first
        broken one. O(workers x slots + actors + clients + queue): for tests and
        ``ACTORRT_VALIDATE=1``, not for every event of a large cluster."""

        def check(ok: bool, what: str) -> None:
            if not ok:
                raise TableInvariantError(what)

        for wid, w in self.workers.items():
            check(w.worker_id == wid, f"worker {wid} is filed under another id ({w.worker_id})")
            mine = [self.actors.get(a) for a in w.actors]
            check(
                all(a is not None and a.worker_id == wid for a in mine),
                f"worker {wid} lists actors the table does not place on it: {sorted(w.actors)}",
            )
            placed = [a for a in mine if a is not None]
            check(len({a.slot for a in placed}) == len(placed), f"worker {wid}: two actors on one slot")
            check(
                w.held == {a.slot: a.actor_id for a in placed},
                f"worker {wid}: slots held {w.held} do not match its actors' slots",
            )
            check(
                not set(w.held) & set(w.ready),
                f"worker {wid}: slots {set(w.held) & set(w.ready)} are both "
                "ready and held by an actor (a slot counted twice)",
            )
            check(
                w.cpus_free == w.cpus - sum(a.num_cpus for a in placed),
                f"worker {wid}: cpus_free={w.cpus_free}, but cpus={w.cpus} minus its actors' cpus is "
                f"{w.cpus - sum(a.num_cpus for a in placed)}",
            )
            gpus_used = [g for a in placed for g in a.gpu_ids]
            check(len(gpus_used) == len(set(gpus_used)), f"worker {wid}: a gpu given to two actors: {gpus_used}")
            check(
                w.gpus_free == set(range(w.gpus)) - set(gpus_used),
                f"worker {wid}: gpus_free={sorted(w.gpus_free)} does not match its actors' gpus {gpus_used}",
            )
            check(
                self._key_of.get(wid) == self._key(w),
                f"worker {wid}: indexed under {self._key_of.get(wid)}, its state says {self._key(w)}",
            )
        check(set(self._backoff) <= set(self.actors), "a restart backoff is kept for an actor no longer listed")
        for aid, a in self.actors.items():
            check(a.actor_id == aid, f"actor {aid} is filed under another id ({a.actor_id})")
            if a.restarting:
                key = self._restart_keys.get(aid)
                check(
                    key is not None and key in self.queue and self.queue[key].restart_of == aid,
                    f"actor {aid} is restarting but no request places it again",
                )
                check(not a.worker_id and a.slot == -1, f"actor {aid} is restarting but still on a slot")
                creator = self.clients.get(a.client_id)
                check(
                    not a.answers or (creator is not None and creator.connected),
                    f"actor {aid} answers request {a.answers} of {a.client_id}, which is not connected",
                )
            else:
                check(not a.answers, f"actor {aid} is placed but still answers request {a.answers}")
                check(aid not in self._backoff, f"actor {aid} waits out a restart backoff but is placed")
                worker = self.workers.get(a.worker_id)
                check(
                    worker is not None and aid in worker.actors,
                    f"actor {aid}: its worker {a.worker_id} is not in the table or does not list it",
                )
            client = self.clients.get(a.client_id)
            check(
                client is not None or bool(a.stopping) or (a.detached and not a.client_id),
                f"actor {aid}: its client {a.client_id} is gone and nobody is stopping it",
            )
            check(client is None or aid in client.actors, f"actor {aid}: its client {a.client_id} does not list it")
            check(
                all(h in self.clients and aid in self.clients[h].holding for h in a.holders),
                f"actor {aid}: holders {sorted(a.holders)} are not all clients holding it",
            )
            check(all(a.tokens.values()), f"actor {aid}: a handle copy counted zero times is kept")
            check(not a.voided.keys() & a.tokens.keys(), f"actor {aid}: a handle copy both counted and voided")
            check(not a.name or self.names.get(a.name) == aid, f"actor {aid}: its name {a.name!r} points elsewhere")
            check(
                bool(a.holders or a.tokens or a.detached or a.stopping or not a.refcounted),
                f"actor {aid}: nobody holds it, but it was not released",
            )
        for name, holder in self.names.items():
            actor = self.actors.get(holder)
            owner, _, number = holder.rpartition("/")
            request = self.queue.get((owner, int(number))) if owner else None
            check(
                (actor is not None and actor.name == name) or (request is not None and request.name == name),
                f"the name {name!r} is held by {holder}, which is neither a live actor nor a queued request of it",
            )
        for (cid, rid), aid in self._placed_by.items():
            actor = self.actors.get(aid)
            check(
                actor is not None and (actor.client_id, actor.request_id) == (cid, rid),
                f"request {cid}/{rid} is recorded as having placed {aid}, which is not that request's live actor",
            )
        for cid, c in self.clients.items():
            check(c.client_id == cid, f"client {cid} is filed under another id ({c.client_id})")
            check(c.connected == (c.lost_at is None), f"client {cid}: connected={c.connected}, lost_at={c.lost_at}")
            check(
                all(a in self.actors and self.actors[a].client_id == cid for a in c.actors),
                f"client {cid} lists actors that are not its own live actors",
            )
            check(
                all(a in self.actors and cid in self.actors[a].holders for a in c.holding),
                f"client {cid} holds actors that do not list it as a holder",
            )
            check(all(a in self.actors for a in c.sent), f"client {cid} lists copies sent of actors that are gone")
        for aid, copies in self._stale_copies.items():
            check(aid in self.actors and bool(copies), f"stale copies of {aid}: {copies}, but it is not a live actor")
            check(all(w in self.workers for w in copies), f"stale copies of {aid} on workers not in the table")
        for (cid, rid), req in self.queue.items():
            check((req.client_id, req.request_id) == (cid, rid), f"request {cid}/{rid} is filed under another key")
            client = self.clients.get(cid)
            check(
                client is not None and (client.connected or rid < 0),
                f"request {cid}/{rid} waits for a client that is not here",
            )
        timed = {(cid, rid) for _, cid, rid in self._deadlines}
        check(
            all(k in timed for k, r in self.queue.items() if r.timeout_s > 0),
            "a queued request with a timeout has no deadline",
        )
        indexed = {wid for bucket in self._index.values() for wid in bucket}
        check(indexed == set(self._key_of), "the free-slot index and its reverse map disagree")
        check(
            all(self._key_of[wid] == key for key, bucket in self._index.items() for wid in bucket),
            "a worker sits in the wrong bucket of the free-slot index",
        )
        check(
            self._index_keys == sorted(self._index) and all(self._index.values()),
            "the free-slot index's keys are not sorted, or a bucket is empty",
        )
        check(
            not any(self._pick(r) for r in self.queue.values() if not self._waits(r)),
            "a queued request fits a ready slot but was not placed",
        )
        check(len(self.dead) <= self.dead_kept, f"{len(self.dead)} dead actors kept, the bound is {self.dead_kept}")
        check(
            not any(a in self.actors for a in self.dead)
            or all(self.actors[a].stopping for a in self.dead if a in self.actors),
            "an actor reported dead is live again",
        )
