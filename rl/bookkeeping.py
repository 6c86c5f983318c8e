"""The bookkeeping every training loop keeps, written once.

- :class:`ReturnWindow`: the mean of the last ``window`` episode returns, and the solved test on it
  (:func:`rl.train_on_policy` and the other loops, :class:`rl.TrainingLogger`,
  :class:`rl.learners.Learner`, :class:`rl.learners.ESLearner`).
- :class:`UpdateRatio`: updates owed at a fixed update-to-data ratio, fractions carried over
  (:func:`rl.train_off_policy`, the off-policy :class:`rl.learners.Learner`, HER's loop).
- :class:`BetaAnnealing` and :func:`learn_from_replay`: prioritised replay's importance-sampling
  exponent annealed to 1, and "sample, learn, update the priorities" (:func:`rl.train_dqn`,
  :func:`rl.train_off_policy`, the off-policy :class:`rl.learners.Learner`).
"""

from __future__ import annotations

from collections import deque

import numpy as np

from rl.agent import Agent
from rl.algorithms._off_policy import OffPolicyAlgorithm
from rl.algorithms.dqn import DQN
from rl.replay import PrioritizedReplay, UniformReplay

__all__ = ["BetaAnnealing", "ReturnWindow", "UpdateRatio", "learn_from_replay", "linear_schedule"]


class ReturnWindow:
    """The returns of the last ``window`` episodes, and how many episodes were added in all."""

    def __init__(self, window: int) -> None:
        self.window = window
        self.recent: deque[float] = deque(maxlen=window)
        self.episodes = 0
        """Episodes added since the window was made (not only those still in it)."""

    def add(self, returns: np.ndarray) -> None:
        """The returns of episodes that finished, oldest first."""
        self.recent.extend(returns.tolist())
        self.episodes += len(returns)

    def __len__(self) -> int:
        """Returns in the window now (at most ``window``)."""
        return len(self.recent)

    @property
    def mean(self) -> float:
        """Mean of the returns in the window (``nan`` before the first episode)."""
        return float(np.mean(self.recent)) if self.recent else float("nan")

    def solved(self, solved_return: float | None) -> bool:
        """Whether the window is full and its mean reaches ``solved_return`` (never with ``None``)."""
        return solved_return is not None and len(self.recent) == self.window and self.mean >= solved_return


class UpdateRatio:
    """Updates owed at ``updates_per_step`` updates per env step: each :meth:`owed` call adds a
    rollout's steps and returns the whole updates they are owed; a fraction carries over to the next.

    When the updates start (``learning_starts``, a warm-up) is the caller's test: steps of a
    rollout that is owed nothing are never passed in."""

    def __init__(self, updates_per_step: float) -> None:
        self.updates_per_step = updates_per_step
        self.due = 0.0
        """The fraction of an update carried over."""

    def owed(self, num_steps: int) -> int:
        """Whole updates owed for ``num_steps`` more env steps (the fraction left is kept)."""
        self.due += self.updates_per_step * num_steps
        owed = int(self.due)
        self.due -= owed
        return owed


def linear_schedule(start: float, end: float, fraction: float, progress: float) -> float:
    """Linear interpolation from ``start`` to ``end`` over the first ``fraction`` of training."""
    if fraction <= 0:
        return end
    return start + (end - start) * min(1.0, progress / fraction)


class BetaAnnealing:
    """Prioritised replay's importance-sampling exponent ``beta``, annealed linearly from the
    replay's own to 1 at the end of training (Schaul et al. 2016, §3.4); nothing for a uniform replay."""

    def __init__(self, replay: UniformReplay) -> None:
        self.start = replay.beta if isinstance(replay, PrioritizedReplay) else None
        """``beta`` at the start of training (``None``: a uniform replay, nothing to anneal)."""

    def at(self, progress: float) -> float | None:
        """``beta`` at ``progress`` (env steps so far / the run's total), or ``None``."""
        if self.start is None:
            return None
        return linear_schedule(self.start, 1.0, 1.0, progress)

    def anneal(self, replay: UniformReplay, progress: float) -> None:
        """Set a prioritised ``replay``'s ``beta`` to :meth:`at` ``progress``."""
        beta = self.at(progress)
        if beta is not None and isinstance(replay, PrioritizedReplay):
            replay.beta = beta


def learn_from_replay(agent: Agent, replay: UniformReplay, batch_size: int, updates: int) -> dict[str, float]:
    """``updates`` times: sample a batch, learn from it, and set the sampled rows' priorities from
    its TD errors (a uniform replay ignores them). Returns the last update's statistics (``{}``
    for none)."""
    algo = agent.algorithm
    assert isinstance(algo, (DQN, OffPolicyAlgorithm)), "learning from a replay needs DQN, DDPG, TD3 or SAC"
    stats: dict[str, float] = {}
    for _ in range(updates):
        batch = replay.sample(batch_size)
        stats = agent.learn(batch)
        replay.update_priorities(batch.indices, algo.td_errors)
    return stats
