"""A learner's progress: what it counts as it trains, where each rollout's numbers are reported,
and what ``train`` returns (:class:`LearnerResult`)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from rl.bookkeeping import ReturnWindow
from rl.logger import TrainingLogger
from rl.metrics import LearnerMetrics

__all__ = ["LearnerResult", "Progress"]


@dataclass
class LearnerResult:
    """What a learner's ``train`` returns (:class:`rl.learners.Learner`, :class:`rl.learners.ESLearner`);
    :meth:`json_fields` are the distributed examples' final JSON line."""

    solved: bool
    env_steps: int
    wall_s: float
    mean_return: float
    episodes: int
    updates: int
    frames_per_s: float
    mean_weight_lag: float
    replaced_workers: int

    def json_fields(self) -> dict[str, Any]:
        return {
            "solved": self.solved,
            "env_steps": self.env_steps,
            "wall_s": round(self.wall_s, 3),
            "mean_return": None if np.isnan(self.mean_return) else round(self.mean_return, 2),
            "frames_per_s": round(self.frames_per_s, 1),
            "updates": self.updates,
            "mean_weight_lag": round(self.mean_weight_lag, 2),
            "replaced_workers": self.replaced_workers,
        }


class Progress:
    """The counters a learner's checkpoint keeps (env steps, updates, the weights' version), the
    window of its last training returns and the weight lag of every rollout it learned from; and,
    for the ``train`` call running, where it stops (:meth:`done`). Each rollout's numbers also go
    to the Prometheus metrics and the training logger (:meth:`record`). Event loop only."""

    def __init__(self, window: int, logger: TrainingLogger | None, metrics: LearnerMetrics | None) -> None:
        self.env_steps = 0
        self.updates = 0
        self.version = 0
        """The version of the learner's weights: one more at each broadcast (or, with gradient
        workers, each step); a rollout's weight lag is how many versions behind its weights were."""
        self.returns = ReturnWindow(window)
        self.lags: list[int] = []
        self.logger = logger
        self.metrics = metrics
        self.total_steps = 0
        """Where the ``train`` call running stops, in env steps."""
        self.stop_at: float | None = None
        """The mean return at which it stops early (``None``: not before ``total_steps``)."""
        self._started = 0.0
        self._start_steps = 0

    def begin(self, total_steps: int, stop_at: float | None) -> None:
        """A ``train`` call starts: until ``total_steps`` env steps or a mean return of ``stop_at``."""
        self._started = time.perf_counter()
        self._start_steps = self.env_steps
        self.total_steps = total_steps
        self.stop_at = stop_at

    def done(self) -> bool:
        """Whether the ``train`` call running has reached its step count, or its ``stop_at``."""
        return self.env_steps >= self.total_steps or self.returns.solved(self.stop_at)

    @property
    def fraction(self) -> float:
        """How far the ``train`` call running is: env steps over its ``total_steps``."""
        return self.env_steps / max(1, self.total_steps)

    def restore(self, env_steps: int, updates: int, version: int) -> None:
        """The counters of a checkpoint."""
        self.env_steps, self.updates, self.version = env_steps, updates, version

    def record(
        self, returns: np.ndarray, lengths: np.ndarray, steps: int, stats: dict[str, float], lag: int, updates: int = 1
    ) -> None:
        """A rollout learned from: its env steps, the episodes that ended in it, the statistics of
        the ``updates`` it gave (``{}``: none, an off-policy warm-up) and its weights' lag."""
        self.env_steps += steps
        self.returns.add(returns)
        self.lags.append(lag)
        if self.metrics is not None:
            self.metrics.frames(steps)
            self.metrics.episodes(returns)
            self.metrics.losses({k: v for k, v in stats.items() if "loss" in k or k == "entropy"})
            self.metrics.update(updates)
            self.metrics.weight_lag(lag)
        if self.logger is not None:
            self.logger.log_episodes(self.env_steps, returns, lengths)
            if not stats:  # off-policy warm-up: no update yet
                return
            fps = (self.env_steps - self._start_steps) / max(1e-9, time.perf_counter() - self._started)
            self.logger.log_update(
                self.env_steps,
                {**stats, "frames_per_s": fps, "weight_lag": float(lag)},
                postfix={"fps": f"{fps:,.0f}", "lag": lag},
            )

    def result(self, solved_return: float | None, replaced_workers: int) -> LearnerResult:
        """What the ``train`` call that is ending returns."""
        wall = time.perf_counter() - self._started
        return LearnerResult(
            solved=self.returns.solved(solved_return),
            env_steps=self.env_steps,
            wall_s=wall,
            mean_return=self.returns.mean,
            episodes=self.returns.episodes,
            updates=self.updates,
            frames_per_s=(self.env_steps - self._start_steps) / max(wall, 1e-9),
            mean_weight_lag=float(np.mean(self.lags)) if self.lags else 0.0,
            replaced_workers=replaced_workers,
        )
