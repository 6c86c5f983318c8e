"""The cluster table: nodes, slots, actors, clients, the placement queue and recent deaths.

A plain synchronous state object with no I/O: the master's servicer turns protobuf into
calls on it and turns what it returns (placements to announce, actors to stop, deaths to report,
requests whose time ran out) back into messages. Not thread-safe: the master calls it from its
event loop only. Time comes from the injected ``clock``; the master's periodic sweep (and a
wake-up at ``next_deadline()``) drives what depends on it.

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
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from actorrt._errors import PlacementError

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


class TableInvariantError(AssertionError):
    """``ClusterTable.validate()`` found the table inconsistent: a bug in the table or its caller."""


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
    stopping: str = ""  # the reason, once a stop was asked for


@dataclass
class Client:
    client_id: str
    hostname: str
    pid: int
    connected: bool = True
    lost_at: float | None = None
    actors: set[str] = field(default_factory=set)


@dataclass(frozen=True)
class Request:
    client_id: str
    request_id: int
    num_cpus: int = 1
    num_gpus: int = 0
    max_memory_mb: int = 0
    class_name: str = ""
    timeout_s: float = 0.0  # how long it may wait in the queue; 0: forever


@dataclass(frozen=True)
class Placement:
    request: Request
    actor_id: str
    worker_id: str
    node: str
    slot: int
    endpoint: str
    gpu_ids: tuple[int, ...]


@dataclass(frozen=True)
class DeadActor:
    actor_id: str
    class_name: str
    worker_id: str
    node: str
    cause: str


_Key = tuple[int, int]  # (cpus_free, ready slots) of a worker that has a ready slot


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
            self.remove_worker(worker_id)
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
            actor.worker_id = worker_id
            if actor.actor_id in self.dead:
                actor.stopping = f"it was reported dead: {self.dead[actor.actor_id].cause}"
                stale.append(actor)
                continue
            if actor.actor_id in self.actors or actor.slot in worker.held:
                actor.stopping = "reported twice by its worker"
                stale.append(actor)
                continue
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
        return worker, stale

    def record_death(self, actor: Actor, cause: str, node: str = "") -> DeadActor:
        """Remember that ``actor`` was reported dead (its owner was told so). ``node``: where it
        ran, when its worker has already left the table."""
        worker = self.workers.get(actor.worker_id)
        dead = DeadActor(actor.actor_id, actor.class_name, actor.worker_id, worker.node if worker else node, cause)
        self.dead[actor.actor_id] = dead
        self.dead.move_to_end(actor.actor_id)
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

    def stale_workers(self, timeout_s: float) -> list[str]:
        deadline = self.clock() - timeout_s
        return [w.worker_id for w in self.workers.values() if w.last_seen < deadline]

    def remove_worker(self, worker_id: str) -> list[Actor]:
        """Drop a worker and everything on it; returns the actors that died with it."""
        worker = self.workers.get(worker_id)
        if worker is None:
            return []
        dead = [self._drop_actor(a) for a in list(worker.actors)]
        self._unindex(worker_id)
        del self.workers[worker_id]
        return [a for a in dead if a is not None]

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

    def actor_exited(self, actor_id: str) -> tuple[Actor | None, list[Placement]]:
        """The actor's process ended: free its resources; returns it and any new placements."""
        actor = self._drop_actor(actor_id)
        return actor, self.place_waiting() if actor is not None else []

    def _drop_actor(self, actor_id: str) -> Actor | None:
        actor = self.actors.pop(actor_id, None)
        if actor is None:
            return None
        worker = self.workers.get(actor.worker_id)
        if worker is not None:
            worker.actors.discard(actor_id)
            if worker.held.get(actor.slot) == actor_id:
                del worker.held[actor.slot]
            worker.cpus_free += actor.num_cpus
            worker.gpus_free |= set(actor.gpu_ids)
            self._reindex(worker)
        client = self.clients.get(actor.client_id)
        if client is not None:
            client.actors.discard(actor_id)
        return actor

    def release_actor(self, client_id: str, actor_id: str, reason: str) -> Actor | None:
        """Mark an actor to be stopped; its resources free when its worker reports the exit."""
        actor = self.actors.get(actor_id)
        if actor is None or actor.client_id != client_id:
            return None
        actor.stopping = reason
        return actor

    # ---- clients ----------------------------------------------------------------------------

    def open_client(self, client_id: str, hostname: str, pid: int) -> Client:
        client = self.clients.get(client_id)
        if client is None:
            client = Client(client_id, hostname, pid)
            self.clients[client_id] = client
        client.connected, client.lost_at = True, None
        client.hostname, client.pid = hostname or client.hostname, pid or client.pid
        return client

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
        """Forget a client; returns its actors, which the caller must stop."""
        client = self.clients.pop(client_id, None)
        self._drop_requests_of(client_id)
        if client is None:
            return []
        actors = [self.actors[a] for a in client.actors if a in self.actors]
        for actor in actors:
            actor.stopping = actor.stopping or "its client is gone"
        return actors

    def _drop_requests_of(self, client_id: str) -> None:
        for key in [k for k in self.queue if k[0] == client_id]:
            del self.queue[key]

    # ---- placement --------------------------------------------------------------------------

    def request(self, req: Request) -> Placement | None:
        """Place ``req`` now, or queue it (None). Raises PlacementError if no node ever could."""
        if req.num_cpus < 1 or req.num_gpus < 0:
            raise PlacementError(f"{req.class_name}: num_cpus must be >= 1 and num_gpus >= 0")
        if self.workers and not any(w.cpus >= req.num_cpus and w.gpus >= req.num_gpus for w in self.workers.values()):
            self.placements_failed += 1
            biggest = max(self.workers.values(), key=lambda w: (w.cpus, w.gpus))
            raise PlacementError(
                f"{req.class_name or 'actor'} asks for num_cpus={req.num_cpus}, num_gpus={req.num_gpus}, "
                f"but the largest node has cpus={biggest.cpus}, gpus={biggest.gpus}"
            )
        placement = self._try_place(req)
        if placement is None:
            key = (req.client_id, req.request_id)
            self.queue.pop(key, None)  # the same request again (resent after a reconnect) goes last
            self.queue[key] = req
            if req.timeout_s > 0:
                heapq.heappush(self._deadlines, (self.clock() + req.timeout_s, req.client_id, req.request_id))
        return placement

    def next_deadline(self) -> float | None:
        """When the earliest queued request's placement timeout ends (the table's clock), if any."""
        while self._deadlines:
            deadline, client_id, request_id = self._deadlines[0]
            req = self.queue.get((client_id, request_id))
            if req is not None and req.timeout_s > 0:
                return deadline
            heapq.heappop(self._deadlines)
        return None

    def expire_requests(self) -> list[Request]:
        """Drop the queued requests whose placement timeout has ended; returns them."""
        now = self.clock()
        expired = []
        while (deadline := self.next_deadline()) is not None and deadline <= now:
            _, client_id, request_id = heapq.heappop(self._deadlines)
            req = self.queue.pop((client_id, request_id))
            self.placements_failed += 1
            expired.append(req)
        return expired

    def place_waiting(self) -> list[Placement]:
        """Place queued requests, oldest first, as far as free slots allow."""
        placed: list[Placement] = []
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

    def _pick(self, req: Request) -> Worker | None:
        """The worker with the most free cpus (then ready slots) that fits ``req``."""
        for key in reversed(self._index_keys):
            if key[0] < req.num_cpus:
                return None
            for worker_id in self._index[key]:
                worker = self.workers[worker_id]
                if len(worker.gpus_free) >= req.num_gpus:
                    return worker
        return None

    def _try_place(self, req: Request) -> Placement | None:
        worker = self._pick(req)
        if worker is None:
            return None
        slot = min(worker.ready)
        endpoint = worker.ready.pop(slot)
        gpu_ids = tuple(sorted(worker.gpus_free)[: req.num_gpus])
        worker.gpus_free -= set(gpu_ids)
        worker.cpus_free -= req.num_cpus
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
        )
        self.actors[actor.actor_id] = actor
        worker.actors.add(actor.actor_id)
        worker.held[slot] = actor.actor_id
        self._reindex(worker)
        client = self.clients.get(req.client_id)
        if client is not None:
            client.actors.add(actor.actor_id)
        self.placements_total += 1
        return Placement(req, actor.actor_id, worker.worker_id, worker.node, slot, endpoint, gpu_ids)

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
        for aid, a in self.actors.items():
            check(a.actor_id == aid, f"actor {aid} is filed under another id ({a.actor_id})")
            worker = self.workers.get(a.worker_id)
            check(
                worker is not None and aid in worker.actors,
                f"actor {aid}: its worker {a.worker_id} is not in the table or does not list it",
            )
            client = self.clients.get(a.client_id)
            check(
                client is not None or bool(a.stopping),
                f"actor {aid}: its client {a.client_id} is gone and nobody is stopping it",
            )
            check(client is None or aid in client.actors, f"actor {aid}: its client {a.client_id} does not list it")
        for cid, c in self.clients.items():
            check(c.client_id == cid, f"client {cid} is filed under another id ({c.client_id})")
            check(c.connected == (c.lost_at is None), f"client {cid}: connected={c.connected}, lost_at={c.lost_at}")
            check(
                all(a in self.actors and self.actors[a].client_id == cid for a in c.actors),
                f"client {cid} lists actors that are not its own live actors",
            )
        for (cid, rid), req in self.queue.items():
            check((req.client_id, req.request_id) == (cid, rid), f"request {cid}/{rid} is filed under another key")
            client = self.clients.get(cid)
            check(client is not None and client.connected, f"request {cid}/{rid} waits for a client that is not here")
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
            not (self.queue and any(self._pick(r) for r in self.queue.values())),
            "a queued request fits a ready slot but was not placed",
        )
        check(len(self.dead) <= self.dead_kept, f"{len(self.dead)} dead actors kept, the bound is {self.dead_kept}")
        check(
            not any(a in self.actors for a in self.dead)
            or all(self.actors[a].stopping for a in self.dead if a in self.actors),
            "an actor reported dead is live again",
        )
