"""``LoadMeter``: the rates a worker daemon's heartbeat carries (``Heartbeat.cpu_percent`` and
``actor_load``), computed here, where the counters are, so the master only stores them.

- The node's CPU %: busy ticks over all ticks of ``/proc/stat``'s ``cpu`` line.
- An actor's CPU %: the CPU time of its host's process tree per second of wall time, in
  percent of one core. Counted per process, so a child that ends takes none of the past with
  it and a new one adds its own.
- An actor's calls/s: its host's call counter (``host/stats.py`` ``CallStats``), as the
  statistics pipe brought it (``WorkerMetrics.calls``), against the time each report arrived.
  A host reports about once a second while its counters move and not at all once they stand
  still, so a report older than ``STALE_S`` means no call since: the counter is taken as it
  stands, now.

Each rate is over the last ``WINDOW_S`` of samples (one per heartbeat; a counter that a report
brings once a second is steady at that scale). Plain state, no I/O: the daemon feeds it the
readings with their times. Daemon loop only.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Collection, Mapping

__all__ = ["REPORT_PERIOD_S", "STALE_S", "WINDOW_S", "LoadMeter", "Window"]

WINDOW_S = 5.0
REPORT_PERIOD_S = 1.0  # how often a host reports its counters while they move (host/server.py)
STALE_S = REPORT_PERIOD_S + 0.5


class Window:
    """Samples ``(time, counters)`` over the last ``window_s``, and what the counters grew by
    between its oldest and newest sample: the oldest kept is the newest one at least
    ``window_s`` old (so a rate spans a full window once there is one)."""

    def __init__(self, window_s: float = WINDOW_S) -> None:
        self.window_s = window_s
        self.samples: deque[tuple[float, tuple[float, ...]]] = deque()

    def add(self, t: float, *counters: float) -> None:
        """A sample at ``t``; one not after the newest is ignored."""
        if self.samples and t <= self.samples[-1][0]:
            return
        self.samples.append((t, counters))
        while len(self.samples) > 2 and self.samples[1][0] <= t - self.window_s:
            self.samples.popleft()

    def growth(self) -> tuple[float, tuple[float, ...]]:
        """(seconds, each counter's growth) from the oldest sample to the newest; (0, ()) with
        fewer than two."""
        if len(self.samples) < 2:
            return 0.0, ()
        (t0, first), (t1, last) = self.samples[0], self.samples[-1]
        return t1 - t0, tuple(b - a for a, b in zip(first, last, strict=True))


class _Actor:
    """One actor's counters: its tree's CPU ticks by process at the last sample, their sum of
    growth so far, and the windows of CPU and calls."""

    def __init__(self, window_s: float) -> None:
        self.ticks: dict[int, int] | None = None  # None until its first sample (the baseline)
        self.cpu_ticks = 0  # grown since the baseline
        self.cpu = Window(window_s)
        self.calls = Window(window_s)


class LoadMeter:
    """The node's and each actor's rates, from readings the daemon takes every heartbeat."""

    def __init__(self, clock_ticks: int, window_s: float = WINDOW_S) -> None:
        self.clock_ticks = clock_ticks  # /proc's CPU ticks per second
        self.window_s = window_s
        self._node = Window(window_s)
        self._actors: dict[str, _Actor] = {}

    def node(self, now: float, busy_ticks: int, total_ticks: int) -> float:
        """The node's CPU busy over the window, in percent of all its cores (0 to 100)."""
        if total_ticks:
            self._node.add(now, busy_ticks, total_ticks)
        _, grown = self._node.growth()
        if not grown or grown[1] <= 0:
            return 0.0
        return max(0.0, min(100.0, 100.0 * grown[0] / grown[1]))

    def actor(
        self, actor_id: str, now: float, tree_ticks: Mapping[int, int], calls: tuple[float, int] | None
    ) -> tuple[float, float]:
        """(CPU %, calls/s) of ``actor_id`` over the window. ``tree_ticks``: CPU ticks so far of
        each process of its tree, now; ``calls``: (when it arrived, the count) of its host's
        latest report, None before the first."""
        a = self._actors.get(actor_id)
        if a is None:
            a = self._actors[actor_id] = _Actor(self.window_s)
        if a.ticks is not None:
            a.cpu_ticks += sum(max(0, ticks - a.ticks.get(pid, 0)) for pid, ticks in tree_ticks.items())
        a.ticks = dict(tree_ticks)
        a.cpu.add(now, a.cpu_ticks)
        if calls is not None:
            arrived, count = calls
            a.calls.add(arrived if now - arrived < STALE_S else now, count)
        seconds, grown = a.cpu.growth()
        cpu = 100.0 * grown[0] / self.clock_ticks / seconds if seconds > 0 else 0.0
        seconds, grown = a.calls.growth()
        rate = grown[0] / seconds if seconds > 0 else 0.0
        return max(0.0, cpu), max(0.0, rate)

    def keep(self, live: Collection[str]) -> None:
        """Forget the actors not in ``live`` (they ended)."""
        for actor_id in [a for a in self._actors if a not in live]:
            del self._actors[actor_id]
