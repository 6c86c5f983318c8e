"""Prometheus metrics: the pieces without processes, then a real cluster scraped over HTTP."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, generate_latest

import actorrt
from actorrt.host.stats import CallStats
from actorrt.master.metrics import MasterMetrics, death_category
from actorrt.master.records import Request
from actorrt.master.table import ClusterTable
from actorrt.metrics import LATENCY_BUCKETS, METRIC_NAMES
from actorrt.worker.metrics import WorkerMetrics
from tests.conftest import actorrt_cli, free_port, wait_until
from tests.obs_helpers import MetricsCluster, scrape, scrape_all, total


@pytest.mark.parametrize(
    "cause, category",
    [
        ("killed by actorrt.kill()", "killed"),
        ("stopped: killed by actorrt.kill()", "killed"),
        ("memory limit exceeded: 300 MB used, max_memory_mb=100", "memory_limit"),
        ("node lost: no heartbeat for 3s", "node_lost"),
        ("its client is gone", "client_gone"),
        ("its constructor failed", "constructor_failed"),
        ("killed by signal 9 (SIGKILL)", "signal"),
        ("its process exited with code 1", "crashed"),
        ("its owner closed it", "exited"),
        ("something new", "other"),
    ],
)
def test_death_causes_map_to_a_bounded_label(cause: str, category: str) -> None:
    assert death_category(cause) == category


def test_worker_adds_host_deltas_per_class() -> None:
    registry = CollectorRegistry()
    metrics = WorkerMetrics(registry=registry)
    a = CallStats("Counter")
    for seconds in (0.00005, 0.002, 3.0):
        a.observe(seconds)
    a.errors, a.bytes_in, a.bytes_out = 1, 100, 50
    metrics.add_report(101, a.snapshot())
    a.observe(0.002)
    metrics.add_report(101, a.snapshot())  # cumulative: only the new call counts
    b = CallStats("Counter")
    b.observe(0.02)
    metrics.add_report(202, b.snapshot())  # another host of the same class adds to it
    metrics.host_gone(101)
    text = generate_latest(registry).decode()
    assert 'actorrt_actor_calls_total{class="Counter"} 5.0' in text
    assert 'actorrt_actor_call_errors_total{class="Counter"} 1.0' in text
    assert 'actorrt_actor_received_bytes_total{class="Counter"} 100.0' in text
    assert 'actorrt_call_latency_seconds_bucket{class="Counter",le="0.0001"} 1.0' in text
    assert 'actorrt_call_latency_seconds_bucket{class="Counter",le="0.0025"} 3.0' in text
    assert 'actorrt_call_latency_seconds_bucket{class="Counter",le="+Inf"} 5.0' in text
    assert 'actorrt_call_latency_seconds_count{class="Counter"} 5.0' in text
    assert len(LATENCY_BUCKETS) + 1 == len(a.buckets)


def test_master_metrics_read_the_table() -> None:
    table = ClusterTable()
    metrics = MasterMetrics(table)
    w = table.workers.join(node="n1", node_ip="127.0.0.1", cpus=2, gpus=1)
    table.slot_ready(w.worker_id, 0, "127.0.0.1:1")
    table.clients.open("c1", "h", 1)
    req = Request("c1", 1, class_name="Counter")
    metrics.placement_requested("c1", 1)
    placement = table.request(req)
    assert placement is not None
    metrics.placement_done(req)
    metrics.actor_died("killed by signal 9 (SIGKILL)")
    text = generate_latest(metrics.registry).decode()
    for line in [
        "actorrt_nodes 1.0",
        'actorrt_slots{kind="cpu",state="used"} 1.0',
        'actorrt_slots{kind="cpu",state="free"} 1.0',
        'actorrt_slots{kind="gpu",state="free"} 1.0',
        f'actorrt_node_slots{{kind="cpu",node="n1",state="used",worker_id="{w.worker_id}"}} 1.0',
        'actorrt_actors{class="Counter"} 1.0',
        'actorrt_clients{state="connected"} 1.0',
        "actorrt_placements_total 1.0",
        "actorrt_placement_latency_seconds_count 1.0",
        'actorrt_actor_deaths_total{cause="signal"} 1.0',
    ]:
        assert line in text, line
    exported = {f.name for f in metrics.registry.collect()}
    assert {
        n.removesuffix("_total") for n in METRIC_NAMES if n.startswith(("actorrt_nodes", "actorrt_slots"))
    } <= exported


# ---- a real cluster --------------------------------------------------------------------------


@actorrt.remote_class
class Worky:
    def work(self, n: int) -> bytes:
        return b"x" * n

    def fail(self) -> None:
        raise ValueError("no")


@pytest.fixture(scope="module")
def metrics_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MetricsCluster]:
    c = MetricsCluster(tmp_path_factory.mktemp("actorrt-metrics")).start()
    try:
        yield c
    finally:
        c.stop()


async def test_a_running_cluster_exports_its_metrics(metrics_cluster: MetricsCluster) -> None:
    c = metrics_cluster
    async with c.connect():
        a = await Worky.remote()
        b = await Worky.remote()
        await asyncio.gather(*[a.work(1000) for _ in range(40)], *[b.work(10) for _ in range(10)])
        with pytest.raises(ValueError):
            await a.fail()
        await actorrt.kill(b)

        def counted() -> bool:
            s = scrape_all(c.metrics_targets)
            return total(s, "actorrt_actor_calls_total", **{"class": "Worky"}) >= 51

        assert await asyncio.to_thread(wait_until, counted, 10)
        s = await asyncio.to_thread(scrape_all, c.metrics_targets)
        master = await asyncio.to_thread(scrape, c.metrics_targets[0])
        assert total(master, "actorrt_nodes") == 2
        assert total(master, "actorrt_slots", kind="cpu") == 2
        assert total(master, "actorrt_slots", kind="cpu", state="used") == 1
        assert total(master, "actorrt_actors", **{"class": "Worky"}) == 1
        assert total(master, "actorrt_clients", state="connected") == 1
        assert total(master, "actorrt_placements_total") >= 2
        assert total(master, "actorrt_placement_latency_seconds_count") >= 2
        assert total(master, "actorrt_actor_deaths_total", cause="killed") >= 1
        assert total(s, "actorrt_actor_calls_total", **{"class": "Worky"}) == 51
        assert total(s, "actorrt_actor_call_errors_total", **{"class": "Worky"}) == 1
        assert total(s, "actorrt_call_latency_seconds_count", **{"class": "Worky"}) == 51
        assert total(s, "actorrt_call_latency_seconds_bucket", **{"class": "Worky", "le": "+Inf"}) == 51
        assert total(s, "actorrt_actor_sent_bytes_total", **{"class": "Worky"}) > 40 * 1000
        assert total(s, "actorrt_actor_received_bytes_total", **{"class": "Worky"}) > 0
        assert total(s, "actorrt_worker_slots") == 2
        assert total(s, "actorrt_worker_hosts", state="busy") == 1
        rss = s["actorrt_actor_memory_rss_bytes"]
        assert [lab["actor_id"] for lab, _ in rss] == [a.actor_id] and rss[0][1] > 10 * 2**20
        assert total(s, "actorrt_actor_cpu_seconds_total", actor_id=a.actor_id) > 0
        for name in METRIC_NAMES:  # every family is there under its documented name
            assert any(k == name or k.startswith(name + "_") for k in s), name
        await actorrt.kill(a)


def test_a_busy_metrics_port_is_one_clear_line(fresh_home: Path) -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        busy = s.getsockname()[1]
        out = actorrt_cli("start", "--port", str(free_port()), "--cpus", "1", "--metrics-port", str(busy))
    assert out.returncode == 1, out.stdout
    assert "cannot serve metrics" in out.stderr and "Traceback" not in out.stderr
    assert out.stderr.strip().count("\n") == 0
    assert not list((fresh_home / "processes").glob("*.json"))


@actorrt.remote_class
class Doomed:
    def pid(self) -> int:
        import os

        return os.getpid()


async def test_calls_just_before_a_sigterm_are_counted(metrics_cluster: MetricsCluster) -> None:
    import os
    import signal

    c = metrics_cluster
    async with c.connect():
        a = await Doomed.remote()
        pids = await asyncio.gather(*[a.pid() for _ in range(10)])
        os.kill(pids[0], signal.SIGTERM)  # well within the host's 1 s reporting period

        def counted() -> bool:
            s = scrape_all(c.metrics_targets)
            return total(s, "actorrt_actor_calls_total", **{"class": "Doomed"}) == 10

        assert await asyncio.to_thread(wait_until, counted, 10)

        def died_of_the_signal() -> bool:  # it still dies of it
            return total(scrape(c.metrics_targets[0]), "actorrt_actor_deaths_total", cause="signal") == 1

        assert await asyncio.to_thread(wait_until, died_of_the_signal, 10)
