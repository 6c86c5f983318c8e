"""Prometheus metrics of the master, the worker daemons and the actor hosts.

- ``MasterMetrics``: cluster-wide gauges read from the ``ClusterTable`` at scrape time, plus the
  placement latency histogram and deaths by cause, which the master's servicer feeds.
- ``CallStats`` lives in each actor host: a few integer adds and one bucket index per call. The
  host writes a snapshot of it as one JSON line to a pipe its daemon passed at spawn
  (``ACTORRT_METRICS_FD``), about once a second and once more when its actor ends. That pipe is
  not the stdout stream that carries the user's prints.
- ``WorkerMetrics``: the daemon's side. It adds each host's deltas to per-class totals (calls,
  errors, bytes, latency buckets) and reads the pool and every live actor's RSS and CPU time
  from its slots at scrape time.
- ``serve()``: ``/metrics`` over HTTP (prometheus-client's server, on its own thread).

Names follow Prometheus conventions: ``actorrt_`` prefix, base units, ``_total`` counters. Label
values are bounded: class names, node names, fixed state and cause sets; actor ids appear only
on the per-actor RSS/CPU series of live actors, never on histograms. ``METRIC_NAMES`` lists every
family this module exports; the dashboard test checks the dashboard against what a running
cluster really serves.

Collectors run on the HTTP server's thread while the loop mutates the table: they take
``list(...)`` snapshots (atomic under the GIL) and never iterate live dicts.
"""

from __future__ import annotations

import bisect
import json
import logging
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

if TYPE_CHECKING:
    from actorrt.master.table import ClusterTable, Request

__all__ = [
    "LATENCY_BUCKETS",
    "METRICS_FD_ENV",
    "METRIC_NAMES",
    "PLACEMENT_BUCKETS",
    "CallStats",
    "MasterMetrics",
    "MetricsServer",
    "WorkerMetrics",
    "death_category",
    "serve",
]

log = logging.getLogger("actorrt.metrics")

METRICS_FD_ENV = "ACTORRT_METRICS_FD"
# Seconds. Actor calls run from microseconds (a counter) to minutes (a training step).
LATENCY_BUCKETS: tuple[float, ...] = (
    0.0001,
    0.00025,
    0.0005,
    0.001,
    0.0025,
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
METRIC_NAMES = MASTER_METRIC_NAMES + WORKER_METRIC_NAMES


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


# ---- actor host side (the hot path) ------------------------------------------------------------


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


def report_line(fd: int, fields: dict[str, Any]) -> None:
    """Write one JSON line to the daemon's pipe (a few hundred bytes: one atomic write)."""
    try:
        os.write(fd, (json.dumps(fields, separators=(",", ":")) + "\n").encode())
    except OSError:
        pass


def metrics_fd_from_env() -> int | None:
    """The pipe the daemon passed for call statistics, made non-inheritable; None if there is none."""
    value = os.environ.pop(METRICS_FD_ENV, "")
    if not value.isdigit():
        return None
    fd = int(value)
    try:
        os.set_inheritable(fd, False)
    except OSError:
        return None
    return fd


# ---- worker daemon side ----------------------------------------------------------------------


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

    def host_gone(self, host_pid: int) -> None:
        self._last.pop(host_pid, None)

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


# ---- master side -------------------------------------------------------------------------------


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


# ---- the HTTP endpoint ---------------------------------------------------------------------------


class MetricsServer:
    """``/metrics`` for one registry on ``host:port``; ``close()`` stops it and joins its thread."""

    def __init__(self, registry: CollectorRegistry, port: int, host: str = "127.0.0.1") -> None:
        from prometheus_client import start_http_server

        try:
            self._server, self._thread = start_http_server(port, addr=host, registry=registry)
        except OSError as e:
            raise OSError(f"cannot serve metrics on {host}:{port}: {e.strerror or e}") from e
        self.host = host
        self.port = int(self._server.server_address[1])

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}/metrics"

    def stop(self) -> None:
        """Stop serving and join the server thread. Any thread but the server's own."""
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5)

    async def close(self) -> None:
        """``stop()`` without blocking the caller's event loop (the shutdown polls for ~0.5 s)."""
        import asyncio

        await asyncio.to_thread(self.stop)


def serve(registry: CollectorRegistry, port: int, host: str = "127.0.0.1") -> MetricsServer:
    """Serve ``registry`` at ``http://host:port/metrics`` (port 0: any free port)."""
    from prometheus_client import disable_created_metrics

    disable_created_metrics()  # type: ignore[no-untyped-call]  # prometheus-client leaves it unannotated; the *_created series only double what scrapes already show
    server = MetricsServer(registry, port, host)
    log.info("serving metrics at %s", server.url)
    return server


# ---- the host -> daemon statistics pipe ------------------------------------------------------------


def stats_pipe() -> tuple[int, int]:
    """(read end for the daemon, write end to pass to one host with ``pass_fds``).

    Both ends are non-inheritable: ``pass_fds`` hands the write end to its own host only. An
    inheritable one would leak into hosts spawned meanwhile (uvloop does not close other fds),
    and the read end would then never see EOF.
    """
    return os.pipe()


async def read_host_stats(fd: int, proc: Any, metrics: WorkerMetrics) -> None:
    """Daemon loop: feed one host's snapshot lines into ``metrics`` until it exits.

    Ends at EOF, or at most a second after the host process exited (so a write end that
    leaked somewhere can never hold up the daemon reporting the exit).
    """
    import asyncio

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
