"""The master's Prometheus metrics: cluster-wide gauges read from the ``ClusterTable`` at scrape
time, the placement latency histogram and deaths and restarts by cause, which the servicer feeds.

Hooks run on the master's loop; ``collect`` on the HTTP server's thread, taking ``list(...)``
snapshots of the table (atomic under the GIL), never iterating live dicts. Causes are free text
in the table; ``death_category`` maps them onto a bounded label set.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

if TYPE_CHECKING:
    from actorrt.master.records import Request
    from actorrt.master.table import ClusterTable

__all__ = ["DEATH_CAUSES", "MASTER_METRIC_NAMES", "PLACEMENT_BUCKETS", "MasterMetrics", "death_category"]

PLACEMENT_BUCKETS: tuple[float, ...] = (
    0.001,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    30.0,
    60.0,
)
DEATH_CAUSES = (
    "killed",
    "released",
    "client_gone",
    "constructor_failed",
    "exited",
    "crashed",
    "signal",
    "memory_limit",
    "node_lost",
    "other",
)

# Every family exported here, as Prometheus names them (counters with their _total).
MASTER_METRIC_NAMES = (
    "actorrt_nodes",
    "actorrt_slots",
    "actorrt_node_slots",
    "actorrt_actors",
    "actorrt_clients",
    "actorrt_placements_total",
    "actorrt_placements_failed_total",
    "actorrt_placements_waiting",
    "actorrt_placement_latency_seconds",
    "actorrt_actor_deaths_total",
    "actorrt_master_uptime_seconds",
)


def death_category(cause: str) -> str:
    """Map a free-text death cause onto the bounded ``cause`` label of ``actorrt_actor_deaths_total``."""
    c = cause.lower()
    if "actorrt.kill" in c:
        return "killed"
    if c.startswith("memory limit"):
        return "memory_limit"
    if c.startswith("node lost") or "worker daemon reconnected" in c:
        return "node_lost"
    if "constructor" in c:
        return "constructor_failed"
    if "client is gone" in c or "client closed" in c or "placement was abandoned" in c:
        return "client_gone"
    if "released" in c:
        return "released"
    if c.startswith("killed by signal"):
        return "signal"
    if "exited with code" in c:
        return "crashed"
    if "owner closed" in c:
        return "exited"
    return "other"


class MasterMetrics(Collector):
    """The master's metrics. Hooks run on the master's loop; ``collect`` on the HTTP thread."""

    PENDING_LIMIT = 100_000  # placement start times kept; beyond this the oldest are forgotten

    def __init__(self, table: ClusterTable, registry: CollectorRegistry | None = None) -> None:
        self.table = table
        self.registry = registry if registry is not None else CollectorRegistry()
        self.started = time.monotonic()
        self.placement_latency = Histogram(
            "actorrt_placement_latency_seconds",
            "From a placement request reaching the master to its actor being assigned a slot.",
            buckets=PLACEMENT_BUCKETS,
            registry=self.registry,
        )
        self.deaths = Counter(
            "actorrt_actor_deaths",
            "Actors that ended, by cause (killed, released, client_gone, crashed, signal, memory_limit, ...).",
            ["cause"],
            registry=self.registry,
        )
        for cause in DEATH_CAUSES:
            self.deaths.labels(cause)
        self.restarts = Counter(
            "actorrt_actor_restarts",
            "Actors placed and constructed again after their process died (max_restarts), by cause.",
            ["cause"],
            registry=self.registry,
        )
        self._pending: OrderedDict[tuple[str, int], float] = OrderedDict()
        self.registry.register(self)

    # hooks (master loop)

    def placement_requested(self, client_id: str, request_id: int) -> None:
        self._pending[(client_id, request_id)] = time.monotonic()
        while len(self._pending) > self.PENDING_LIMIT:
            self._pending.popitem(last=False)

    def placement_done(self, request: Request, placed: bool = True) -> None:
        started = self._pending.pop((request.client_id, request.request_id), None)
        if started is not None and placed:
            self.placement_latency.observe(time.monotonic() - started)

    def placement_dropped(self, client_id: str, request_id: int) -> None:
        self._pending.pop((client_id, request_id), None)

    def actor_died(self, cause: str) -> None:
        self.deaths.labels(death_category(cause)).inc()

    def actor_restarted(self, cause: str) -> None:
        self.restarts.labels(death_category(cause)).inc()

    # scrape (HTTP thread)

    def describe(self) -> Iterable[Metric]:
        return []

    def collect(self) -> Iterator[Metric]:
        t = self.table
        workers = list(t.workers.values())
        actors = list(t.actors.values())
        clients = list(t.clients.values())
        yield GaugeMetricFamily("actorrt_nodes", "Worker daemons (nodes) registered.", value=len(workers))
        slots = GaugeMetricFamily(
            "actorrt_slots", "Slots of the whole cluster, by state and kind.", labels=["state", "kind"]
        )
        node_slots = GaugeMetricFamily(
            "actorrt_node_slots",
            "Slots of each node, by state and kind.",
            labels=["node", "worker_id", "state", "kind"],
        )
        totals = {("free", "cpu"): 0, ("used", "cpu"): 0, ("free", "gpu"): 0, ("used", "gpu"): 0}
        for w in workers:
            free_gpus = len(w.gpus_free)
            per = {
                ("free", "cpu"): w.cpus_free,
                ("used", "cpu"): w.cpus - w.cpus_free,
                ("free", "gpu"): free_gpus,
                ("used", "gpu"): w.gpus - free_gpus,
            }
            for (state, kind), value in per.items():
                totals[(state, kind)] += value
                node_slots.add_metric([w.node, w.worker_id, state, kind], value)
        for (state, kind), value in totals.items():
            slots.add_metric([state, kind], value)
        yield slots
        yield node_slots
        by_class: dict[str, int] = {}
        for a in actors:
            by_class[a.class_name or "unknown"] = by_class.get(a.class_name or "unknown", 0) + 1
        alive = GaugeMetricFamily("actorrt_actors", "Live actors, by class.", labels=["class"])
        for name, count in sorted(by_class.items()):
            alive.add_metric([name], count)
        yield alive
        conn = GaugeMetricFamily("actorrt_clients", "Client sessions, by state.", labels=["state"])
        conn.add_metric(["connected"], sum(1 for c in clients if c.connected))
        conn.add_metric(["lost"], sum(1 for c in clients if not c.connected))
        yield conn
        yield CounterMetricFamily("actorrt_placements", "Actors placed on a slot.", value=t.placements_total)
        yield CounterMetricFamily(
            "actorrt_placements_failed",
            "Placement requests that failed (no node could ever fit them, or their timeout ended).",
            value=t.placements_failed,
        )
        yield GaugeMetricFamily(
            "actorrt_placements_waiting", "Placement requests waiting for a free slot.", value=len(t.queue)
        )
        yield GaugeMetricFamily(
            "actorrt_master_uptime_seconds", "Seconds since the master started.", value=time.monotonic() - self.started
        )
