"""A real Prometheus server scrapes a real cluster with deploy/prometheus/prometheus.yml.

Needs the ``prometheus`` binary (Debian's ``prometheus`` package; .ci/run installs it). The test
writes the repo's config with its own targets and a 1 s interval, starts Prometheus on
loopback with a temporary TSDB, runs a workload, queries Prometheus's HTTP API for the series
and values, and stops it by PID.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

import actorrt
from rl.metrics import LearnerMetrics
from tests.conftest import free_port, wait_until
from tests.obs_helpers import MetricsCluster

ROOT = Path(__file__).resolve().parents[2]
PROMETHEUS = shutil.which("prometheus")

pytestmark = pytest.mark.skipif(
    PROMETHEUS is None,
    reason="the prometheus binary is not installed (apt-get install prometheus; .ci/run does it in CI)",
)


def scrape_config(master: str, workers: list[str], learner: str) -> dict[str, Any]:
    """deploy/prometheus/prometheus.yml with this test's targets and a 1 s interval."""
    config = yaml.safe_load((ROOT / "deploy" / "prometheus" / "prometheus.yml").read_text())
    config["global"]["scrape_interval"] = "1s"
    config["global"]["evaluation_interval"] = "1s"
    for job in config["scrape_configs"]:
        for static in job["static_configs"]:
            role = static["labels"]["role"]
            static["targets"] = {"master": [master], "worker": workers, "learner": [learner]}[role]
    return config


class Prometheus:
    def __init__(self, workdir: Path, config: dict[str, Any]) -> None:
        assert PROMETHEUS is not None
        self.port = free_port()
        cfg = workdir / "prometheus.yml"
        cfg.write_text(yaml.safe_dump(config))
        self.log = workdir / "prometheus.log"
        with open(self.log, "wb") as out:
            self.proc = subprocess.Popen(
                [
                    PROMETHEUS,
                    f"--config.file={cfg}",
                    f"--storage.tsdb.path={workdir / 'tsdb'}",
                    f"--web.listen-address=127.0.0.1:{self.port}",
                    "--storage.tsdb.retention.time=1h",
                ],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
            )

    def get(self, path: str, **params: str) -> Any:
        url = f"http://127.0.0.1:{self.port}{path}"
        if params:
            url += "?" + urllib.parse.urlencode(params)
        with urllib.request.urlopen(url, timeout=5) as r:
            body = r.read().decode()
        return json.loads(body) if body.startswith("{") else body

    def ready(self) -> bool:
        if self.proc.poll() is not None:
            raise RuntimeError(f"prometheus exited: {self.log.read_text()[-2000:]}")
        try:
            self.get("/-/ready")
            return True
        except OSError:
            return False

    def query(self, promql: str) -> list[dict[str, Any]]:
        answer = self.get("/api/v1/query", query=promql)
        assert answer["status"] == "success", answer
        return answer["data"]["result"]

    def value(self, promql: str) -> float | None:
        result = self.query(promql)
        return float(result[0]["value"][1]) if len(result) == 1 else None

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


@pytest.fixture(scope="module")
def metrics_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MetricsCluster]:
    c = MetricsCluster(tmp_path_factory.mktemp("actorrt-prom")).start()
    try:
        yield c
    finally:
        c.stop()


@actorrt.remote_class
class Pinger:
    def ping(self, i: int) -> int:
        return i


async def test_prometheus_scrapes_the_cluster(metrics_cluster: MetricsCluster, tmp_path: Path) -> None:
    c = metrics_cluster
    learner = LearnerMetrics("test")
    learner_server = learner.serve(0)
    master, *workers = c.metrics_targets
    prom = Prometheus(tmp_path, scrape_config(master, workers, f"127.0.0.1:{learner_server.port}"))
    try:
        assert await asyncio.to_thread(wait_until, prom.ready, 30), prom.log.read_text()[-2000:]
        async with c.connect():
            p = await Pinger.remote()
            await asyncio.gather(*[p.ping(i) for i in range(30)])
            learner.frames(128)
            learner.episodes([10.0, 20.0])
            learner.update()

            def until(promql: str, expected: float, timeout: float = 20) -> bool:
                return wait_until(lambda: prom.value(promql) == expected, timeout, 0.25)

            targets = 'count(up{job="actorrt"} == 1)'
            assert await asyncio.to_thread(until, targets, 3), prom.query("up")
            assert await asyncio.to_thread(until, 'up{job="actorrt-rl"}', 1)
            assert await asyncio.to_thread(until, 'sum(actorrt_nodes{role="master"})', 2)
            assert await asyncio.to_thread(until, 'sum(actorrt_slots{kind="cpu"})', 2)
            assert await asyncio.to_thread(until, 'sum(actorrt_actors{class="Pinger"})', 1)
            assert await asyncio.to_thread(until, 'sum(actorrt_actor_calls_total{class="Pinger"})', 30)
            assert await asyncio.to_thread(until, 'sum(actorrt_call_latency_seconds_count{class="Pinger"})', 30)
            assert await asyncio.to_thread(until, 'count(actorrt_worker_slots{role="worker"})', 2)
            assert await asyncio.to_thread(until, 'actorrt_rl_env_frames_total{learner="test"}', 128)
            assert await asyncio.to_thread(until, 'actorrt_rl_episode_return{learner="test"}', 15)
            await actorrt.kill(p)
            assert await asyncio.to_thread(until, 'sum(actorrt_actor_deaths_total{cause="killed"})', 1)
            assert await asyncio.to_thread(until, "sum(actorrt_actors) or vector(0)", 0)
        # Over the whole histogram (a rate() would be 0/0 here: the series appeared already at 30).
        p99 = prom.value('histogram_quantile(0.99, sum by (le) (actorrt_call_latency_seconds_bucket{class="Pinger"}))')
        assert p99 is not None and 0 < p99 < 1
    finally:
        prom.stop()
        learner_server.stop()
