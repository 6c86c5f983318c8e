"""The cluster table: nodes, slots, actors, clients and the placement queue.

A plain synchronous state object with no I/O: the master's servicer turns protobuf into
calls on it and turns what it returns (placements to announce, actors to stop, deaths to report)
back into messages. Not thread-safe: the master calls it from its event loop only.
"""

from __future__ import annotations

import itertools
import secrets
import time
from collections import OrderedDict, deque
from dataclasses import dataclass, field
from typing import Callable, Iterable

from actorrt._errors import PlacementError

__all__ = ["ClusterTable", "Worker", "Actor", "Client", "Request", "Placement"]


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


@dataclass(frozen=True)
class Placement:
    request: Request
    actor_id: str
    worker_id: str
    node: str
    slot: int
    endpoint: str
    gpu_ids: tuple[int, ...]


class ClusterTable:
    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.workers: dict[str, Worker] = {}
        self.actors: dict[str, Actor] = {}
        self.clients: dict[str, Client] = {}
        self.queue: deque[Request] = deque()
        self.placements_total = 0
        self.placements_failed = 0
        # Actors already reported dead (bounded): a worker that rejoins after a partition may
        # still host them, but their owners were told they died, so they must not come back.
        self.dead: OrderedDict[str, str] = OrderedDict()
        self._worker_seq = itertools.count(1)

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
                actor.stopping = f"it was reported dead: {self.dead[actor.actor_id]}"
                stale.append(actor)
                continue
            self.actors[actor.actor_id] = actor
            worker.actors.add(actor.actor_id)
            worker.cpus_free -= actor.num_cpus
            worker.gpus_free -= set(actor.gpu_ids)
            client = self.clients.get(actor.client_id)
            if client is None:  # its client has not reconnected (yet): it has the grace period
                client = Client(actor.client_id, "", 0, connected=False, lost_at=self.clock())
                self.clients[actor.client_id] = client
            client.actors.add(actor.actor_id)
        return worker, stale

    def record_death(self, actor_id: str, cause: str, keep: int = 10_000) -> None:
        self.dead[actor_id] = cause
        while len(self.dead) > keep:
            self.dead.popitem(last=False)

    def seen(self, worker_id: str, load: float | None = None, rss: dict[str, int] | None = None) -> None:
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
        worker = self.workers.pop(worker_id, None)
        if worker is None:
            return []
        dead = [self._drop_actor(a) for a in list(worker.actors)]
        return [a for a in dead if a is not None]

    def slot_ready(self, worker_id: str, slot: int, endpoint: str) -> list[Placement]:
        worker = self.workers.get(worker_id)
        if worker is None:
            return []
        worker.ready[slot] = endpoint
        return self.place_waiting()

    def slot_lost(self, worker_id: str, slot: int) -> bool:
        """The slot's warm host exited with no actor: no placement may go there until the slot's
        next ``slot_ready``. Returns whether it was listed ready."""
        worker = self.workers.get(worker_id)
        return worker is not None and worker.ready.pop(slot, None) is not None

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
            worker.cpus_free += actor.num_cpus
            worker.gpus_free |= set(actor.gpu_ids)
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
        self.queue = deque(r for r in self.queue if r.client_id != client_id)

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
        self.queue = deque(r for r in self.queue if r.client_id != client_id)
        if client is None:
            return []
        actors = [self.actors[a] for a in client.actors if a in self.actors]
        for actor in actors:
            actor.stopping = actor.stopping or "its client is gone"
        return actors

    # ---- placement --------------------------------------------------------------------------

    def request(self, req: Request) -> Placement | None:
        """Place ``req`` now, or queue it (None). Raises PlacementError if no node ever could."""
        if req.num_cpus < 1 or req.num_gpus < 0:
            raise PlacementError(f"{req.class_name}: num_cpus must be >= 1 and num_gpus >= 0")
        if self.workers and not any(
            w.cpus >= req.num_cpus and w.gpus >= req.num_gpus for w in self.workers.values()
        ):
            self.placements_failed += 1
            biggest = max(self.workers.values(), key=lambda w: (w.cpus, w.gpus))
            raise PlacementError(
                f"{req.class_name or 'actor'} asks for num_cpus={req.num_cpus}, num_gpus={req.num_gpus}, "
                f"but the largest node has cpus={biggest.cpus}, gpus={biggest.gpus}"
            )
        placement = self._try_place(req)
        if placement is None:
            self.queue.append(req)
        return placement

    def cancel_request(self, client_id: str, request_id: int) -> bool:
        for req in self.queue:
            if req.client_id == client_id and req.request_id == request_id:
                self.queue.remove(req)
                self.placements_failed += 1
                return True
        return False

    def place_waiting(self) -> list[Placement]:
        """Place queued requests, oldest first, as far as free slots allow."""
        placed: list[Placement] = []
        for req in list(self.queue):
            placement = self._try_place(req)
            if placement is not None:
                self.queue.remove(req)
                placed.append(placement)
        return placed

    def _try_place(self, req: Request) -> Placement | None:
        candidates = [
            w
            for w in self.workers.values()
            if w.connected and w.ready and w.cpus_free >= req.num_cpus and len(w.gpus_free) >= req.num_gpus
        ]
        if not candidates:
            return None
        worker = max(candidates, key=lambda w: (w.cpus_free, len(w.ready)))  # spread the load
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
        client = self.clients.get(req.client_id)
        if client is not None:
            client.actors.add(actor.actor_id)
        self.placements_total += 1
        return Placement(req, actor.actor_id, worker.worker_id, worker.node, slot, endpoint, gpu_ids)

    # ---- summary ----------------------------------------------------------------------------

    def slots(self) -> tuple[int, int]:
        """(cpus used, cpus total) over all workers."""
        total = sum(w.cpus for w in self.workers.values())
        free = sum(w.cpus_free for w in self.workers.values())
        return total - free, total
