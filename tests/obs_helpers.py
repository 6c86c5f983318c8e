"""Shared by the observability tests: a process cluster with metrics on, and scraping."""

from __future__ import annotations

import urllib.request
from dataclasses import dataclass, field
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from tests.conftest import ProcCluster, free_port


@dataclass
class MetricsCluster(ProcCluster):
    """A master (metrics on) and worker daemons (metrics on), each its own process."""

    master_metrics: int = 0
    worker_metrics: list[int] = field(default_factory=list)

    def start(
        self,
        workers: int = 2,
        cpus_per_worker: int = 1,
        master_args: tuple[str, ...] = (),
        worker_args: tuple[str, ...] = (),
        status_args: tuple[str, ...] = (),
    ) -> MetricsCluster:
        import os

        self.status_args = status_args
        self.home.mkdir(parents=True, exist_ok=True)
        self.env = dict(os.environ, ACTORRT_HOME=str(self.home))
        self.env.pop("ACTORRT_TOKEN", None)
        self.env.pop("ACTORRT_ADDRESS", None)
        port, self.master_metrics = free_port(), free_port()
        self.spawn(
            "start",
            "--port",
            str(port),
            "--cpus",
            "0",
            "--worker-timeout",
            "3",
            "--client-grace",
            "2",
            "--metrics-port",
            str(self.master_metrics),
            *master_args,
        )
        self.address = f"127.0.0.1:{port}"
        self.token = (self.home / "token").read_text().strip()
        for _ in range(workers):
            metrics = free_port()
            self.worker_metrics.append(metrics)
            self.spawn(
                "connect",
                "--address",
                self.address,
                "--cpus",
                str(cpus_per_worker),
                "--token",
                self.token,
                "--metrics-port",
                str(metrics),
                *worker_args,
            )
        return self

    @property
    def metrics_targets(self) -> list[str]:
        return [f"127.0.0.1:{p}" for p in [self.master_metrics, *self.worker_metrics]]


def scrape(target: str) -> dict[str, list[tuple[dict[str, str], float]]]:
    """sample name -> [(labels, value)] from http://target/metrics."""
    with urllib.request.urlopen(f"http://{target}/metrics", timeout=5) as r:
        text = r.read().decode()
    samples: dict[str, list[tuple[dict[str, str], float]]] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            samples.setdefault(s.name, []).append((dict(s.labels), float(s.value)))
    return samples


def scrape_all(targets: list[str]) -> dict[str, list[tuple[dict[str, str], float]]]:
    merged: dict[str, list[tuple[dict[str, str], float]]] = {}
    for t in targets:
        for name, values in scrape(t).items():
            merged.setdefault(name, []).extend(values)
    return merged


def total(samples: dict[str, list[tuple[dict[str, str], float]]], name: str, **labels: Any) -> float:
    return sum(v for lab, v in samples.get(name, []) if all(lab.get(k) == str(x) for k, x in labels.items()))
