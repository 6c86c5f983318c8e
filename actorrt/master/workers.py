"""The workers, their slots, and the index that finds a ready slot without scanning them.

A worker offers one slot per cpu (a warm actor host each, on its node). A slot goes::

    (host starting) --ready(endpoint)--> READY --take: a placement--> HELD --free: its actor's exit--> (host starting)
          ^                                |                           ^
          '------ lost: its host exited ---'                           '-- hold: an actor a registering
                                                                            worker still hosts

A worker is in the free-slot index while it is connected, has a ready slot and a free cpu, under
the key ``(cpus_free, ready slots)``; the keys are kept sorted. ``pick`` is the placement policy:
a request pinned to a node goes there or waits; spread takes the highest key that fits (the most
free cpus); pack the lowest (the fewest free cpus that fit), so its cost grows with the number of
distinct keys, not of workers. Sized for thousands of workers.

Invariants (``validate``): a slot is never both ready and held; a worker's held slots, free cpus
and free gpus are what its actors leave; a placed actor's worker lists it; each worker is indexed
under the key its state gives.
Plain state on the master's loop, no I/O; time (last heartbeats) from the injected ``clock``.
"""

from __future__ import annotations

import bisect
import itertools
import secrets
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from actorrt.master.records import Actor, Request
from actorrt.master.state import Records, check

__all__ = ["Worker", "Workers"]

_Key = tuple[int, int]  # (cpus_free, ready slots) of a worker that has a ready slot


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
    # As its last heartbeat said (``NodeLoad``): CPU busy in percent of all its cores, memory in
    # use; and the sum of its actors' calls/s.
    cpu_percent: float = 0.0
    memory_used_bytes: int = 0
    calls_per_s: float = 0.0


class Workers(Records[str, Worker]):
    """The workers by id, read like a dict, and their slots."""

    def __init__(self, clock: Callable[[], float]) -> None:
        super().__init__({})
        self.clock = clock
        self._seq = itertools.count(1)
        # The free-slot index: key -> workers with that key (insertion-ordered), keys sorted.
        self._index: dict[_Key, dict[str, None]] = {}
        self._index_keys: list[_Key] = []
        self._key_of: dict[str, _Key] = {}

    # ---- joining and leaving ----------------------------------------------------------------

    def join(
        self,
        *,
        node: str,
        node_ip: str,
        cpus: int,
        gpus: int,
        memory_bytes: int = 0,
        pid: int = 0,
        worker_id: str = "",
    ) -> Worker:
        """A worker registers, every cpu and gpu free, no slot ready yet (``Recovery`` takes back
        the actors it still hosts). ``worker_id`` empty: a new id. Raises ValueError for less
        than 1 cpu, or a worker still listed (``ClusterTable.remove_worker`` it first)."""
        if cpus < 1:
            raise ValueError(f"a worker needs at least 1 cpu, got {cpus}")
        if worker_id in self._records:
            raise ValueError(f"worker {worker_id} is listed already")
        worker_id = worker_id or f"w{next(self._seq)}-{secrets.token_hex(3)}"
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
        self._records[worker_id] = worker
        return worker

    def remove(self, worker_id: str) -> Worker | None:
        """The worker left: no placement goes there from now on. Returns it, with the actors it
        listed (the caller ends them), or None if it was not listed."""
        worker = self._records.pop(worker_id, None)
        if worker is not None:
            worker.connected = False
            self._unindex(worker_id)
        return worker

    def never_fits(self, req: Request) -> str:
        """Why no listed worker could ever take ``req`` (its pinned node is not listed, or none
        is that large), or "" (it may wait: with no worker at all, one may still join)."""
        name = req.class_name or "actor"
        if req.node and req.node not in self._records:
            return f"{name}: no node {req.node!r} in the cluster (see status)"
        candidates = [self._records[req.node]] if req.node else list(self._records.values())
        if candidates and not any(w.cpus >= req.num_cpus and w.gpus >= req.num_gpus for w in candidates):
            biggest = max(candidates, key=lambda w: (w.cpus, w.gpus))
            where = f"node {req.node}" if req.node else "the largest node"
            return (
                f"{name} asks for num_cpus={req.num_cpus}, num_gpus={req.num_gpus}, "
                f"but {where} has cpus={biggest.cpus}, gpus={biggest.gpus}"
            )
        return ""

    # ---- liveness ---------------------------------------------------------------------------

    def seen(self, worker_id: str, load: float | None = None) -> bool:
        """A heartbeat (or any event) from the worker; False if it is not listed."""
        worker = self._records.get(worker_id)
        if worker is None:
            return False
        worker.last_seen = self.clock()
        if load is not None:
            worker.load = load
        return True

    def excuse(self, seconds: float) -> None:
        """The master did not run for ``seconds``: that time is not the workers' silence."""
        now = self.clock()
        for worker in self._records.values():
            worker.last_seen = min(now, worker.last_seen + seconds)

    def stale(self, timeout_s: float) -> list[str]:
        """The workers silent for more than ``timeout_s``."""
        deadline = self.clock() - timeout_s
        return [w.worker_id for w in self._records.values() if w.last_seen < deadline]

    def usage(self) -> tuple[int, int]:
        """(cpus used, cpus total) over all workers."""
        total = sum(w.cpus for w in self._records.values())
        free = sum(w.cpus_free for w in self._records.values())
        return total - free, total

    # ---- slots ------------------------------------------------------------------------------

    def ready(self, worker_id: str, slot: int, endpoint: str) -> bool:
        """A warm host waits in ``slot``. Ignored (False) while an actor holds the slot: the
        worker sent it before it took that actor's StartActor, and the actor takes this host."""
        worker = self._records.get(worker_id)
        if worker is None or slot in worker.held:
            return False
        worker.ready[slot] = endpoint
        self._reindex(worker)
        return True

    def lost(self, worker_id: str, slot: int) -> bool:
        """The slot's warm host exited with no actor: no placement may go there until the slot's
        next ``ready``. Returns whether it was listed ready."""
        worker = self._records.get(worker_id)
        if worker is None or worker.ready.pop(slot, None) is None:
            return False
        self._reindex(worker)
        return True

    def pick(self, req: Request) -> Worker | None:
        """Where ``req`` goes now: its pinned node if that fits now; else, spread, the worker
        with the most free cpus (then ready slots), or, pack, the one with the fewest that fit."""
        if req.node:
            worker = self._records.get(req.node)
            if worker is None or not self._key_of.get(req.node):
                return None
            fits = worker.cpus_free >= req.num_cpus and len(worker.gpus_free) >= req.num_gpus and bool(worker.ready)
            return worker if fits else None
        if req.spread:
            keys: Iterable[_Key] = reversed(self._index_keys)
        else:
            first = bisect.bisect_left(self._index_keys, (req.num_cpus, 0))
            keys = itertools.islice(self._index_keys, first, None)
        for key in keys:
            if key[0] < req.num_cpus:
                return None
            for worker_id in self._index[key]:
                worker = self._records[worker_id]
                if len(worker.gpus_free) >= req.num_gpus:
                    return worker
        return None

    def any_ready(self) -> bool:
        """Whether any worker can take a placement now."""
        return bool(self._index_keys)

    def take(self, worker: Worker, actor: Actor) -> None:
        """Place ``actor`` (its ``num_cpus``, ``num_gpus``) on ``worker``'s lowest ready slot,
        which ``pick`` chose: sets the actor's worker, slot, endpoint and gpus."""
        slot = min(worker.ready)
        endpoint = worker.ready.pop(slot)
        gpu_ids = tuple(sorted(worker.gpus_free)[: actor.num_gpus])
        worker.gpus_free -= set(gpu_ids)
        worker.cpus_free -= actor.num_cpus
        actor.worker_id, actor.slot, actor.endpoint, actor.gpu_ids = worker.worker_id, slot, endpoint, gpu_ids
        worker.actors.add(actor.actor_id)
        worker.held[slot] = actor.actor_id
        self._reindex(worker)

    def hold(self, worker: Worker, actor: Actor) -> None:
        """``actor`` runs on ``worker``'s slot ``actor.slot`` (the worker said so as it registered)."""
        worker.actors.add(actor.actor_id)
        worker.held[actor.slot] = actor.actor_id
        worker.cpus_free -= actor.num_cpus
        worker.gpus_free -= set(actor.gpu_ids)
        self._reindex(worker)

    def free(self, actor: Actor) -> None:
        """``actor`` left its slot (its process ended): its cpus and gpus are free again; the
        slot takes a placement once its next warm host is ``ready``."""
        worker = self._records.get(actor.worker_id)
        if worker is not None:
            worker.actors.discard(actor.actor_id)
            if worker.held.get(actor.slot) == actor.actor_id:
                del worker.held[actor.slot]
            worker.cpus_free += actor.num_cpus
            worker.gpus_free |= set(actor.gpu_ids)
            self._reindex(worker)

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

    # ---- invariants -------------------------------------------------------------------------

    def validate(self, actors: Mapping[str, Actor]) -> None:
        """Raises ``TableInvariantError`` naming the first broken invariant; ``actors``: the
        table's live actors. O(workers x slots)."""
        for wid, w in self._records.items():
            check(w.worker_id == wid, f"worker {wid} is filed under another id ({w.worker_id})")
            mine = [actors.get(a) for a in w.actors]
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
        for aid, a in actors.items():
            worker = self._records.get(a.worker_id)
            check(
                a.restarting or (worker is not None and aid in worker.actors),
                f"actor {aid}: its worker {a.worker_id} is not in the table or does not list it",
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
