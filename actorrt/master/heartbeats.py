"""The heartbeat budget: how often the master asks its workers for a heartbeat.

Each worker beats every ``base_s`` seconds while the cluster is small. Past ``per_s`` x
``base_s`` workers the interval grows with the cluster, so that all of them together send about
``per_s`` heartbeats a second, up to a quarter of the worker timeout: a large cluster's idle
master does not spend a core reading heartbeats, and a silent worker is still found within the
timeout. The workers are told again (``retune``) only once the cluster's size moved the interval
by more than a fifth since they were last told. Plain state on the master's loop, no I/O.
"""

from __future__ import annotations

__all__ = ["HEARTBEATS_PER_S", "Heartbeats"]

# Heartbeats per second the master budgets for all its workers together.
HEARTBEATS_PER_S = 1000.0


class Heartbeats:
    """The interval for the cluster's size, and the one its workers were last told."""

    def __init__(self, base_s: float, worker_timeout_s: float, per_s: float = HEARTBEATS_PER_S) -> None:
        self.base_s = base_s
        self.worker_timeout_s = worker_timeout_s
        self.per_s = per_s
        self.told_s = base_s  # the interval the workers were last told

    def interval(self, workers: int) -> float:
        """The interval for ``workers`` workers: the base interval, or longer so that all of them
        together send about ``per_s``, but at most a quarter of the worker timeout."""
        return max(self.base_s, min(workers / self.per_s, self.worker_timeout_s / 4))

    def retune(self, workers: int) -> float | None:
        """The interval to tell every worker now that there are ``workers``, or None while it
        is within a fifth of the one they were told."""
        interval = self.interval(workers)
        if abs(interval - self.told_s) <= 0.2 * self.told_s:
            return None
        self.told_s = interval
        return interval
