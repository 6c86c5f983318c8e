"""Training loops: wire a Collector, an Agent (and a replay) together.

The loops own no maths: the Algorithm learns, the Collector acts. They stop at ``total_steps`` or,
with ``stop_when_solved``, once the mean of the last ``window`` training-episode returns reaches
``solved_return``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from rl.agent import Agent
from rl.algorithms._off_policy import OffPolicyAlgorithm
from rl.algorithms.dqn import DQN
from rl.bookkeeping import BetaAnnealing, ReturnWindow, UpdateRatio, learn_from_replay, linear_schedule
from rl.collector import Collector, CollectorConfig
from rl.config import use_torch_threads
from rl.logger import TrainingLogger
from rl.replay import UniformReplay

__all__ = [
    "TrainResult",
    "TrainingRun",
    "result_line",
    "run_training",
    "train_dqn",
    "train_off_policy",
    "train_on_policy",
]


@dataclass
class TrainResult:
    """Outcome of a training run (what the examples print as their final JSON line)."""

    solved: bool
    env_steps: int
    wall_s: float
    mean_return: float
    episodes: int


@dataclass
class TrainingRun:
    """Options every single-process training script shares (its Config subclasses this)."""

    solved_return: float = 475.0
    """Mean return over the last 20 training episodes that counts as solved."""
    stop_when_solved: bool = True
    """Stop training as soon as the task is solved."""
    run_dir: str = "runs/train"
    """Where TensorBoard events, CSV logs and the PNG curve go."""
    tensorboard: bool = True
    """Write TensorBoard scalars."""
    progress: bool = True
    """Show a progress bar (on stderr)."""
    save: str | None = None
    """Save the agent (models and optimizer) to this path at the end."""
    restore: str | None = None
    """Restore the agent from this path before training: models, optimizers, counters. A warm
    start: the env step count, exploration schedules and replay start over (the distributed
    learners' ``Learner.save``/``restore`` resume those too)."""


def run_training(
    run: TrainingRun,
    agent: Agent,
    collector_config: CollectorConfig,
    total_steps: int,
    train: Callable[[Collector, TrainingLogger], TrainResult],
    title: str,
) -> TrainResult:
    """Restore, collect and train with logging, then save and plot: what every script does.

    Training stopped by Ctrl-C (``KeyboardInterrupt``) still saves what it trained (to
    ``run.save``), then re-raises; an error in training saves nothing (its state may be bad)."""
    if total_steps < 1:
        raise ValueError(f"total_steps must be >= 1, got {total_steps}")
    use_torch_threads()
    if run.restore:
        agent.restore(run.restore)
    logger = TrainingLogger(run.run_dir, total_steps, tensorboard=run.tensorboard, progress=run.progress)
    try:
        collector = Collector(collector_config, agent)  # its env processes start last: nothing after can leak them
    except BaseException:
        logger.close()
        raise
    try:
        result = train(collector, logger)
    except KeyboardInterrupt:
        if run.save:
            agent.save(run.save)
            logger.note(f"stopped: the agent as trained so far is saved in {run.save}")
        raise
    finally:
        collector.close()
        logger.close()
    if run.save:
        agent.save(run.save)
    logger.plot(title, run.solved_return)
    return result


def train_on_policy(
    agent: Agent,
    collector: Collector,
    total_steps: int,
    solved_return: float | None = None,
    stop_when_solved: bool = True,
    window: int = 20,
    logger: TrainingLogger | None = None,
) -> TrainResult:
    """Collect a rollout, learn from it, repeat (PolicyGradient, A2C, PPO, IMPALA)."""
    if isinstance(agent.algorithm, (DQN, OffPolicyAlgorithm)):
        name = type(agent.algorithm).__name__
        use = "train_dqn" if isinstance(agent.algorithm, DQN) else "train_off_policy"
        raise TypeError(
            f"train_on_policy learns from rollouts (PolicyGradient, A2C, PPO, IMPALA); {name} learns from a replay: use rl.{use}"
        )
    start = time.perf_counter()
    returns = ReturnWindow(window)
    ever_solved = False
    while collector.total_steps < total_steps:
        rollout = collector.collect()
        stats = agent.learn(rollout)
        returns.add(rollout.episode_returns)
        if logger is not None:
            logger.log_episodes(collector.total_steps, rollout.episode_returns, rollout.episode_lengths)
            logger.log_update(collector.total_steps, stats)
        ever_solved = ever_solved or returns.solved(solved_return)
        if stop_when_solved and ever_solved:
            break
    return TrainResult(ever_solved, collector.total_steps, time.perf_counter() - start, returns.mean, returns.episodes)


def _check_learning_starts(learning_starts: int, total_steps: int) -> None:
    """A run that would end before its first update is a mistake (the default ``learning_starts``
    is 1000), not a run."""
    if 0 < total_steps < learning_starts:
        raise ValueError(
            f"learning_starts={learning_starts} > total_steps={total_steps}: the run would end before its "
            "first update; lower learning_starts"
        )


def train_dqn(
    agent: Agent,
    collector: Collector,
    buffer: UniformReplay,
    total_steps: int,
    learning_starts: int = 1000,
    batch_size: int = 64,
    gradient_steps: int = 1,
    epsilon_start: float = 1.0,
    epsilon_end: float = 0.05,
    exploration_fraction: float = 0.1,
    solved_return: float | None = None,
    stop_when_solved: bool = True,
    window: int = 20,
    logger: TrainingLogger | None = None,
) -> TrainResult:
    """Off-policy loop: collect ``num_steps x num_envs`` steps into the buffer, then
    ``gradient_steps`` updates on sampled batches. The collector's agent must wrap a :class:`DQN`.
    With a :class:`rl.replay.PrioritizedReplay` (prioritised DQN), priorities follow each batch's TD
    errors and ``beta`` is annealed linearly to 1 at ``total_steps``, as in :func:`train_off_policy`.
    """
    algo = agent.algorithm
    if not isinstance(algo, DQN):
        raise TypeError("train_dqn needs an agent around a DQN algorithm")
    _check_learning_starts(learning_starts, total_steps)
    start = time.perf_counter()
    returns = ReturnWindow(window)
    ever_solved = False
    beta = BetaAnnealing(buffer)
    while collector.total_steps < total_steps:
        algo.epsilon = linear_schedule(
            epsilon_start, epsilon_end, exploration_fraction, collector.total_steps / total_steps
        )
        beta.anneal(buffer, collector.total_steps / total_steps)
        rollout = collector.collect()
        buffer.add_rollout(rollout)
        returns.add(rollout.episode_returns)
        stats: dict[str, float] = dict.fromkeys(("td_loss", "q_mean", "grad_norm"), float("nan"))
        if collector.total_steps >= learning_starts and gradient_steps > 0:
            stats = learn_from_replay(agent, buffer, batch_size, gradient_steps)
        if logger is not None:
            logger.log_episodes(collector.total_steps, rollout.episode_returns, rollout.episode_lengths)
            logger.log_update(collector.total_steps, {**stats, "epsilon": algo.epsilon})
        ever_solved = ever_solved or returns.solved(solved_return)
        if stop_when_solved and ever_solved:
            break
    return TrainResult(ever_solved, collector.total_steps, time.perf_counter() - start, returns.mean, returns.episodes)


def train_off_policy(
    agent: Agent,
    collector: Collector,
    replay: UniformReplay,
    total_steps: int,
    learning_starts: int = 1000,
    batch_size: int = 256,
    updates_per_step: float = 1.0,
    solved_return: float | None = None,
    stop_when_solved: bool = True,
    window: int = 20,
    logger: TrainingLogger | None = None,
    log_every: int = 1000,
) -> TrainResult:
    """Off-policy loop for DDPG, TD3 and SAC at a fixed update-to-data ratio.

    Uniformly random actions until ``learning_starts`` env steps, then the policy's. After each
    ``collect`` (``num_steps x num_envs`` transitions into ``replay``), as many updates as keep
    ``updates / env steps`` at ``updates_per_step``, counting from the collect that reached
    ``learning_starts`` (fractions carry over). With a :class:`rl.replay.PrioritizedReplay`, priorities follow each batch's TD errors
    and its importance-sampling exponent ``beta`` is annealed linearly to 1 at ``total_steps``.
    """
    algo = agent.algorithm
    if not isinstance(algo, OffPolicyAlgorithm):
        raise TypeError("train_off_policy needs an agent around DDPG, TD3 or SAC")
    if updates_per_step <= 0:
        raise ValueError(f"updates_per_step must be > 0, got {updates_per_step}")
    _check_learning_starts(learning_starts, total_steps)
    start = time.perf_counter()
    returns = ReturnWindow(window)
    ever_solved = False
    ratio = UpdateRatio(updates_per_step)
    next_log = 0
    stats: dict[str, float] = {}
    beta = BetaAnnealing(replay)
    while collector.total_steps < total_steps:
        algo.uniform_exploration = collector.total_steps < learning_starts
        beta.anneal(replay, collector.total_steps / total_steps)
        rollout = collector.collect()
        replay.add_rollout(rollout)
        returns.add(rollout.episode_returns)
        if collector.total_steps >= learning_starts and (owed := ratio.owed(rollout.num_steps)):
            stats = learn_from_replay(agent, replay, batch_size, owed)
        if logger is not None:
            logger.log_episodes(collector.total_steps, rollout.episode_returns, rollout.episode_lengths)
            if stats and collector.total_steps >= next_log:  # one row per ~log_every steps, not per update
                logger.log_update(collector.total_steps, {**stats, "updates": float(algo.updates)})
                next_log = collector.total_steps + log_every
        ever_solved = ever_solved or returns.solved(solved_return)
        if stop_when_solved and ever_solved:
            break
    return TrainResult(ever_solved, collector.total_steps, time.perf_counter() - start, returns.mean, returns.episodes)


def result_line(env_id: str, algo: str, result: TrainResult) -> str:
    """The examples' final stdout line: ``{"env", "algo", "solved", "env_steps", "wall_s", "mean_return"}``.

    Values are converted to JSON's own types (a numpy bool or integer is not serialisable), and a
    mean return of NaN (no episode finished) is written as ``null``.
    """
    import json
    import math

    mean = float(result.mean_return)
    return json.dumps(
        {
            "env": env_id,
            "algo": algo,
            "solved": bool(result.solved),
            "env_steps": int(result.env_steps),
            "wall_s": round(float(result.wall_s), 3),
            "mean_return": None if math.isnan(mean) else round(mean, 2),
        }
    )
