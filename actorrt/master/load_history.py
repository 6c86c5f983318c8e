"""``LoadHistory``: the cluster's CPU % and calls/s over the last ten minutes, for the status
page's history line.

The dashboard's sampler feeds it the cluster table once a second; each ``PERIOD_S`` closes a
point, the mean of that period's samples, and the newest ``POINTS`` are kept (a ring of 60
points: ten minutes). A sample is O(nodes): it reads what each worker's heartbeat left on its
record (``Worker.cpu_percent``, ``Worker.calls_per_s``, the sum of its actors'), never the
actors. Cluster CPU % is the nodes' CPU %, each weighted by its cpus (slots); calls/s is the sum
of every actor's. Plain state on the master's loop; times from the caller.
"""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from actorrt.master.table import ClusterTable

__all__ = ["PERIOD_S", "POINTS", "LoadHistory", "cluster_load"]

PERIOD_S = 10.0
POINTS = 60


def cluster_load(table: ClusterTable) -> tuple[float, float]:
    """(CPU % of the connected nodes, weighted by their cpus; calls/s of every actor) now."""
    weighted = cpus = 0.0
    calls = 0.0
    for worker in table.workers.values():
        if worker.connected:
            weighted += worker.cpu_percent * worker.cpus
            cpus += worker.cpus
            calls += worker.calls_per_s
    return (weighted / cpus if cpus else 0.0), calls


class LoadHistory:
    """Points ``(end time, mean CPU %, mean calls/s)``, oldest first, one per ``period_s``."""

    def __init__(self, period_s: float = PERIOD_S, points: int = POINTS) -> None:
        self.period_s = period_s
        self.points: deque[tuple[float, float, float]] = deque(maxlen=points)
        self._start: float | None = None  # when the open period began
        self._sums = [0.0, 0.0]
        self._samples = 0

    def add(self, now: float, cpu_percent: float, calls_per_s: float) -> None:
        """One sample at ``now``; closes the open period first once it is ``period_s`` old."""
        if self._start is None:
            self._start = now
        elif now - self._start >= self.period_s:
            if self._samples:
                self.points.append(
                    (self._start + self.period_s, self._sums[0] / self._samples, self._sums[1] / self._samples)
                )
            # the next period starts where this one ended, unless the master stood still past it
            self._start = self._start + self.period_s if now - self._start < 2 * self.period_s else now
            self._sums, self._samples = [0.0, 0.0], 0
        self._sums[0] += cpu_percent
        self._sums[1] += calls_per_s
        self._samples += 1

    def sample(self, table: ClusterTable, now: float) -> None:
        """Sample ``table`` (``cluster_load``) at ``now``."""
        self.add(now, *cluster_load(table))

    def to_json(self) -> dict[str, Any]:
        """What ``/api/status`` carries as ``history``."""
        return {
            "period_s": self.period_s,
            "span_s": self.period_s * (self.points.maxlen or 0),
            "points": [
                {"t": round(t, 1), "cpu_percent": round(cpu, 1), "calls_per_s": round(calls, 2)}
                for t, cpu, calls in self.points
            ],
        }
