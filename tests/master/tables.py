"""Helpers for the tests of the cluster table and its parts: a clock the test moves, tables with
workers and clients, and a worker's registration with the actors it still hosts."""

from __future__ import annotations

from actorrt.master.records import Actor
from actorrt.master.recovery import Recovery
from actorrt.master.table import ClusterTable
from actorrt.master.workers import Worker


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def table_with_worker(cpus: int = 2, gpus: int = 0) -> tuple[ClusterTable, str, Clock]:
    clock = Clock()
    t = ClusterTable(clock)
    w = t.workers.join(node="n1", node_ip="127.0.0.1", cpus=cpus, gpus=gpus)
    t.clients.open("c1", "host", 1)
    for slot in range(cpus):
        t.slot_ready(w.worker_id, slot, f"127.0.0.1:{9000 + slot}")
    return t, w.worker_id, clock


def two_nodes(cpus: int = 2) -> tuple[ClusterTable, dict[str, str]]:
    t = ClusterTable()
    t.clients.open("c1", "h", 1)
    ids = {}
    for n in ("a", "b"):
        w = t.workers.join(node=n, node_ip="127.0.0.1", cpus=cpus, gpus=0)
        ids[n] = w.worker_id
        for slot in range(cpus):
            t.slot_ready(w.worker_id, slot, f"{n}:{slot}")
    return t, ids


def big_table(nodes: int, slots: int) -> tuple[ClusterTable, Clock]:
    clock = Clock()
    t = ClusterTable(clock)
    t.clients.open("c1", "h", 1)
    for n in range(nodes):
        w = t.workers.join(node=f"n{n}", node_ip="10.0.0.1", cpus=slots, gpus=0)
        for s in range(slots):
            t.slot_ready(w.worker_id, s, f"10.0.{n}.1:{9000 + s}")
    return t, clock


def register(
    t: ClusterTable, live: list[Actor], *, node: str, cpus: int, worker_id: str = ""
) -> tuple[Worker, list[Actor]]:
    """A worker registers reporting the ``live`` actors it hosts (as the servicer has it: one
    still listed leaves the table first, ``Recovery.worker_returning``). Returns it and the
    actors it must stop."""
    recovery = Recovery(t, settle_after_s=4.0)
    w = t.workers.join(node=node, node_ip="127.0.0.1", cpus=cpus, gpus=0, worker_id=worker_id)
    return w, recovery.worker_registered(w, live)


def released_ids(t: ClusterTable) -> list[str]:
    """The ids of the actors ``t`` released since the last take."""
    return [r.actor.actor_id for r in t.take_released()]
