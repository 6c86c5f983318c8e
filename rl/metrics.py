"""Prometheus metrics of the rl learners, named once here.

A learner (A2C, IMPALA, ...) creates one ``LearnerMetrics`` and calls its hooks; the process
serves them with ``serve(port)`` (the same mechanism as the actorrt daemons, see
``actorrt.metrics``). Grafana's RL panels (deploy/grafana/actorrt.json) use these names, and
the dashboard test takes ``RL_METRIC_NAMES`` as what the learners export::

    metrics = LearnerMetrics("impala")
    server = metrics.serve(9320)
    metrics.frames(rollout_steps * num_envs)
    metrics.episodes(finished_returns)
    metrics.losses({"policy": 0.12, "value": 0.4, "entropy": 1.3})
    metrics.update()
    with metrics.broadcast():
        await asyncio.gather(*(c.set_weights(w) for c in collectors))
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from actorrt.metrics import MetricsServer
from actorrt.metrics import serve as _serve

__all__ = ["RL_METRICS", "RL_METRIC_NAMES", "LearnerMetrics", "MetricSpec"]


@dataclass(frozen=True)
class MetricSpec:
    name: str  # as Prometheus exposes it (counters end in _total)
    kind: str  # "counter" | "gauge" | "histogram"
    help: str
    labels: tuple[str, ...] = ("learner",)


RL_METRICS: tuple[MetricSpec, ...] = (
    MetricSpec(
        "actorrt_rl_env_frames_total",
        "counter",
        "Environment frames collected (one per single env step); rate() gives frames/s.",
    ),
    MetricSpec("actorrt_rl_episodes_total", "counter", "Episodes finished (terminated or truncated)."),
    MetricSpec("actorrt_rl_episode_return", "gauge", "Mean return of the episodes finished in the last report."),
    MetricSpec("actorrt_rl_loss", "gauge", "Last value of each loss term of the learner.", ("learner", "loss")),
    MetricSpec("actorrt_rl_learner_updates_total", "counter", "Gradient updates (learn() calls) of the learner."),
    MetricSpec(
        "actorrt_rl_weight_broadcast_seconds",
        "histogram",
        "Time to send new weights to every collector and have them acknowledged.",
    ),
    MetricSpec(
        "actorrt_rl_weight_lag",
        "gauge",
        "Learner updates between the weights that collected the last rollout and the learner's.",
    ),
)
RL_METRIC_NAMES: tuple[str, ...] = tuple(m.name for m in RL_METRICS)
_BROADCAST_BUCKETS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


def _spec(name: str) -> MetricSpec:
    return next(m for m in RL_METRICS if m.name == name)


class LearnerMetrics:
    """The ``actorrt_rl_*`` metrics of one learner (label ``learner``, e.g. "a2c", "impala")."""

    def __init__(self, learner: str, registry: CollectorRegistry | None = None) -> None:
        self.learner = learner
        self.registry = registry if registry is not None else CollectorRegistry()
        r = self.registry

        def counter(name: str) -> Counter:
            s = _spec(name)
            return Counter(name.removesuffix("_total"), s.help, list(s.labels), registry=r)

        self._frames = counter("actorrt_rl_env_frames_total").labels(learner)
        self._episodes = counter("actorrt_rl_episodes_total").labels(learner)
        self._updates = counter("actorrt_rl_learner_updates_total").labels(learner)
        s = _spec("actorrt_rl_episode_return")
        self._return = Gauge(s.name, s.help, list(s.labels), registry=r).labels(learner)
        s = _spec("actorrt_rl_loss")
        self._loss = Gauge(s.name, s.help, list(s.labels), registry=r)
        s = _spec("actorrt_rl_weight_broadcast_seconds")
        self._broadcast = Histogram(s.name, s.help, list(s.labels), buckets=_BROADCAST_BUCKETS, registry=r).labels(
            learner
        )
        s = _spec("actorrt_rl_weight_lag")
        self._lag = Gauge(s.name, s.help, list(s.labels), registry=r).labels(learner)

    def frames(self, n: int) -> None:
        self._frames.inc(n)

    def episodes(self, returns: Iterable[float]) -> None:
        values = [float(x) for x in returns]
        if values:
            self._episodes.inc(len(values))
            self._return.set(sum(values) / len(values))

    def losses(self, values: Mapping[str, float]) -> None:
        for name, value in values.items():
            self._loss.labels(self.learner, name).set(float(value))

    def update(self, n: int = 1) -> None:
        self._updates.inc(n)

    def weight_lag(self, lag: int) -> None:
        self._lag.set(lag)

    @contextmanager
    def broadcast(self) -> Iterator[None]:
        """Time one weight broadcast: ``with metrics.broadcast(): ...``."""
        start = time.perf_counter()
        try:
            yield
        finally:
            self._broadcast.observe(time.perf_counter() - start)

    def serve(self, port: int, host: str = "127.0.0.1") -> MetricsServer:
        return _serve(self.registry, port, host)
