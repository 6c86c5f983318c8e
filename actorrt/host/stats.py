"""``CallStats``: an actor host's call counters, reported to its daemon over the statistics pipe.

A few integer adds and one bucket index per call (the host's hot path). The host writes a
snapshot as one JSON line (``transport.stats_pipe``) about once a second and once more when its
actor ends; the daemon's ``WorkerMetrics`` turns the deltas into Prometheus series.
"""

from __future__ import annotations

import bisect
from typing import Any

from actorrt.transport.stats_pipe import LATENCY_BUCKETS, report_line

__all__ = ["CallStats"]


class CallStats:
    """Cumulative call counters of one actor host. Host loop only; ``observe`` is the hot path."""

    __slots__ = ("_reported", "buckets", "bytes_in", "bytes_out", "class_name", "errors", "exit_cause", "sum")

    def __init__(self, class_name: str = "") -> None:
        self.class_name = class_name
        self.errors = 0
        self.bytes_in = 0
        self.bytes_out = 0
        self.buckets = [0] * (len(LATENCY_BUCKETS) + 1)  # the last one is +Inf
        self.sum = 0.0
        self.exit_cause = ""  # set when the actor ends itself (sys.exit in a method)
        self._reported = -1

    def observe(
        self, seconds: float, _index: Any = bisect.bisect_left, _bounds: tuple[float, ...] = LATENCY_BUCKETS
    ) -> None:
        """One call took ``seconds``. The host's sync path inlines these two lines."""
        self.sum += seconds
        self.buckets[_index(_bounds, seconds)] += 1

    @property
    def calls(self) -> int:
        return sum(self.buckets)

    def snapshot(self) -> dict[str, Any]:
        return {
            "class": self.class_name,
            "calls": self.calls,
            "errors": self.errors,
            "bytes_in": self.bytes_in,
            "bytes_out": self.bytes_out,
            "buckets": list(self.buckets),
            "sum": self.sum,
            **({"exit_cause": self.exit_cause} if self.exit_cause else {}),
        }

    def report(self, fd: int) -> None:
        """Write a snapshot line to the daemon's pipe if anything changed since the last one."""
        marker = self.calls + self.errors + self.bytes_in + self.bytes_out
        if marker == self._reported and not self.exit_cause:
            return
        self._reported = marker
        report_line(fd, self.snapshot())
