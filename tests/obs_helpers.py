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
        super().start(workers, cpus_per_worker, master_args, worker_args, status_args)
        return self

    def _master_extra(self) -> tuple[str, ...]:
        self.master_metrics = free_port()
        return ("--metrics-port", str(self.master_metrics))

    def _worker_extra(self) -> tuple[str, ...]:
        metrics = free_port()
        self.worker_metrics.append(metrics)
        return ("--metrics-port", str(metrics))

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
