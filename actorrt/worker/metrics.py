"""The worker daemon's Prometheus metrics: per-class call totals from its hosts' reports, and
the pool, RSS and CPU of every live actor at scrape time.

``read_host_stats`` (daemon loop) reads each host's statistics pipe (``transport.stats_pipe``)
into ``WorkerMetrics``; ``WorkerMetrics.collect`` runs on the HTTP server's thread and takes
``list(...)`` snapshots (atomic under the GIL), never iterating live dicts. Label values are
bounded: class names and fixed state sets; actor ids appear only on the per-actor RSS/CPU series
of live actors, never on histograms.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from prometheus_client import CollectorRegistry
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from actorrt.transport.stats_pipe import LATENCY_BUCKETS

__all__ = ["WORKER_METRIC_NAMES", "SlotView", "WorkerMetrics", "process_cpu_rss", "read_host_stats"]

log = logging.getLogger("actorrt.metrics")

# Every family exported here, as Prometheus names them (counters with their _total).
WORKER_METRIC_NAMES = (
    "actorrt_actor_calls_total",
    "actorrt_actor_call_errors_total",
    "actorrt_call_latency_seconds",
    "actorrt_actor_received_bytes_total",
    "actorrt_actor_sent_bytes_total",
    "actorrt_actor_memory_rss_bytes",
    "actorrt_actor_cpu_seconds_total",
    "actorrt_worker_hosts",
    "actorrt_worker_slots",
)


@dataclass
class _ClassTotals:
    calls: int = 0
    errors: int = 0
    bytes_in: int = 0
    bytes_out: int = 0
    buckets: list[int] = field(default_factory=lambda: [0] * (len(LATENCY_BUCKETS) + 1))
    sum: float = 0.0


@dataclass
class SlotView:
    """What the daemon's collector needs from one slot (built by the daemon at scrape time)."""

    state: str  # "ready" | "busy" | "starting"
    pid: int = 0
    actor_id: str = ""
    class_name: str = ""


_CLK_TCK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def process_cpu_rss(pid: int) -> tuple[float, int]:
    """(CPU seconds user+system, RSS bytes) of a process from /proc; zeros if it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / _CLK_TCK, int(fields[21]) * _PAGE
    except (OSError, IndexError, ValueError):
        return 0.0, 0


class WorkerMetrics(Collector):
    """Per-class call totals from host reports, and the pool, RSS and CPU at scrape time.

    ``add_report`` runs on the daemon's loop; ``collect`` on the HTTP thread (under a lock).
    """

    def __init__(
        self, slots: Callable[[], Iterable[SlotView]] | None = None, registry: CollectorRegistry | None = None
    ) -> None:
        self._slots: Callable[[], Iterable[SlotView]] = slots or (lambda: [])
        self._lock = threading.Lock()
        self._classes: dict[str, _ClassTotals] = {}
        self._last: dict[int, dict[str, Any]] = {}  # host pid -> its last snapshot
        self._arrived: dict[int, float] = {}  # host pid -> when it came (time.monotonic)
        # host pid -> why its actor ended itself, until the daemon reports that exit
        self.exit_causes: dict[int, str] = {}
        # host pid -> clients that wrote shared-memory files for it; when the host exits, the
        # daemon removes those of clients that are gone too
        self.shm_peers: dict[int, set[int]] = {}
        if registry is not None:
            registry.register(self)

    def add_report(self, host_pid: int, snapshot: dict[str, Any]) -> None:
        """Add what changed since this host's previous snapshot to its class's totals."""
        if "shm_peer" in snapshot:  # a client that shares /dev/shm with this host
            self.shm_peers.setdefault(host_pid, set()).add(int(snapshot["shm_peer"]))
            return
        last = self._last.get(host_pid)
        self._last[host_pid] = snapshot
        self._arrived[host_pid] = time.monotonic()
        if snapshot.get("exit_cause"):  # taken by the daemon when it reports the exit
            self.exit_causes[host_pid] = str(snapshot["exit_cause"])[:1000]
        name = str(snapshot.get("class") or "unknown")
        buckets = snapshot.get("buckets") or []
        if len(buckets) != len(LATENCY_BUCKETS) + 1:
            return
        with self._lock:
            t = self._classes.setdefault(name, _ClassTotals())
            prev = last or {}
            t.calls += int(snapshot["calls"]) - int(prev.get("calls", 0))
            t.errors += int(snapshot["errors"]) - int(prev.get("errors", 0))
            t.bytes_in += int(snapshot["bytes_in"]) - int(prev.get("bytes_in", 0))
            t.bytes_out += int(snapshot["bytes_out"]) - int(prev.get("bytes_out", 0))
            t.sum += float(snapshot["sum"]) - float(prev.get("sum", 0.0))
            old = prev.get("buckets") or [0] * len(buckets)
            for i, (new_count, old_count) in enumerate(zip(buckets, old, strict=True)):
                t.buckets[i] += int(new_count) - int(old_count)

    def calls(self, host_pid: int) -> tuple[float, int] | None:
        """(when it arrived, by ``time.monotonic``; the calls it counts) of the host's latest
        report, or None before its first. Daemon loop (the heartbeat's ``LoadMeter``)."""
        last = self._last.get(host_pid)
        if last is None:
            return None
        return self._arrived[host_pid], int(last.get("calls", 0))

    def host_gone(self, host_pid: int) -> None:
        self._last.pop(host_pid, None)
        self._arrived.pop(host_pid, None)

    def describe(self) -> Iterable[Metric]:
        return []  # computed at scrape time; nothing to check at registration

    def collect(self) -> Iterator[Metric]:
        calls = CounterMetricFamily("actorrt_actor_calls", "Method calls run by actors, by class.", labels=["class"])
        errors = CounterMetricFamily(
            "actorrt_actor_call_errors", "Method calls that raised (or named no method), by class.", labels=["class"]
        )
        received = CounterMetricFamily(
            "actorrt_actor_received_bytes", "Bytes of call batches received by actor hosts, by class.", labels=["class"]
        )
        sent = CounterMetricFamily(
            "actorrt_actor_sent_bytes", "Bytes of reply batches sent by actor hosts, by class.", labels=["class"]
        )
        latency = HistogramMetricFamily(
            "actorrt_call_latency_seconds",
            "Time a method call ran inside its actor host (not counting the network), by class.",
            labels=["class"],
        )
        with self._lock:
            classes = [
                (k, _ClassTotals(v.calls, v.errors, v.bytes_in, v.bytes_out, list(v.buckets), v.sum))
                for k, v in self._classes.items()
            ]
        for name, t in sorted(classes):
            calls.add_metric([name], t.calls)
            errors.add_metric([name], t.errors)
            received.add_metric([name], t.bytes_in)
            sent.add_metric([name], t.bytes_out)
            cumulative, running = [], 0
            for bound, count in zip([*map(_bound, LATENCY_BUCKETS), "+Inf"], t.buckets, strict=True):
                running += count
                cumulative.append((bound, running))
            latency.add_metric([name], cumulative, t.sum)
        yield from (calls, errors, received, sent, latency)

        views: list[SlotView] = list(self._slots())
        hosts = GaugeMetricFamily(
            "actorrt_worker_hosts", "Actor host processes of this daemon's pool, by state.", labels=["state"]
        )
        for state in ("ready", "busy", "starting"):
            hosts.add_metric([state], sum(1 for v in views if v.state == state))
        yield hosts
        yield GaugeMetricFamily("actorrt_worker_slots", "CPU slots this worker daemon offers.", value=len(views))
        rss = GaugeMetricFamily(
            "actorrt_actor_memory_rss_bytes",
            "Resident memory of each live actor's process.",
            labels=["actor_id", "class"],
        )
        cpu = CounterMetricFamily(
            "actorrt_actor_cpu_seconds",
            "CPU time (user+system) of each live actor's process.",
            labels=["actor_id", "class"],
        )
        for v in views:
            if v.state == "busy" and v.pid:
                seconds, used = process_cpu_rss(v.pid)
                rss.add_metric([v.actor_id, v.class_name], used)
                cpu.add_metric([v.actor_id, v.class_name], seconds)
        yield rss
        yield cpu


def _bound(value: float) -> str:
    return repr(float(value))


async def read_host_stats(fd: int, proc: Any, metrics: WorkerMetrics) -> None:
    """Daemon loop: feed one host's snapshot lines into ``metrics`` until it exits.

    Ends at EOF, or at most a second after the host process exited (so a write end that
    leaked somewhere can never hold up the daemon reporting the exit).
    """
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    transport, _ = await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(fd, "rb", 0))

    async def consume() -> None:
        while line := await reader.readline():
            try:
                metrics.add_report(proc.pid, json.loads(line))
            except (ValueError, KeyError, TypeError) as e:
                log.warning("bad statistics line from actor host %d: %s", proc.pid, e)

    consumer = asyncio.ensure_future(consume())
    exited = asyncio.ensure_future(proc.wait())
    try:
        done, _ = await asyncio.wait({consumer, exited}, return_when=asyncio.FIRST_COMPLETED)
        if consumer not in done:
            await asyncio.wait({consumer}, timeout=1.0)  # the final snapshot follows the exit
    finally:
        for task in (consumer, exited):
            task.cancel()
        transport.close()
        metrics.host_gone(proc.pid)
