"""Quickstart: REINFORCE (policy gradient with a baseline) on CartPole-v1.

The four pieces of ``rl``, wired by hand so that each one is visible:

1. a **Model** (``rl.ActorCritic``): a policy network and a value network;
2. an **Algorithm** (``rl.PolicyGradient``): the loss and the optimizer; it never sees the env;
3. an **Agent**: numpy in, numpy out, around the algorithm (``sample``, ``learn``, ``save``);
4. a **Collector**: steps a vector of gymnasium envs with the agent and returns a rollout.

    python examples/quickstart_cartpole.py              # ~200k steps, about 10 s
    python examples/quickstart_cartpole.py --help
    tensorboard --logdir runs                           # curves; runs/quickstart/curve.png too
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

import rl
from rl.collector import env_spaces
from rl.trainer import TrainResult


@dataclass
class Config:
    """REINFORCE on CartPole-v1."""

    env_id: str = "CartPole-v1"
    """gymnasium environment id."""
    seed: int = 0
    """Seed for torch and the environments."""
    total_steps: int = 500_000
    """Environment steps to train for (a run stops at the first rollout that reaches them)."""
    num_envs: int = 4
    """Environments stepped together."""
    num_steps: int = 256
    """Steps per environment per rollout (one gradient step per rollout)."""
    lr: float = 5e-3
    """Adam learning rate."""
    gamma: float = 0.99
    """Discount factor."""
    solved_return: float = 475.0
    """Mean return over the last 20 training episodes that counts as solved."""
    stop_when_solved: bool = True
    """Stop training as soon as the task is solved."""
    run_dir: str = "runs/quickstart"
    """Where TensorBoard events, CSV logs and the PNG curve go."""
    tensorboard: bool = True
    """Write TensorBoard scalars."""
    progress: bool = True
    """Show a progress bar (on stderr)."""
    save: str | None = None
    """Save the agent to this path at the end."""
    restore: str | None = None
    """Restore the agent from this path before training."""


def main(config: Config) -> TrainResult:
    """Train REINFORCE and return the result."""
    rl.use_torch_threads()
    torch.manual_seed(config.seed)
    collector_config = rl.CollectorConfig(config.env_id, config.num_envs, config.num_steps, config.seed)
    obs_space, action_space = env_spaces(collector_config)

    model = rl.ActorCritic(obs_space, action_space)  # 1. Model
    algorithm = rl.PolicyGradient(model, lr=config.lr, gamma=config.gamma)  # 2. Algorithm
    agent = rl.Agent(algorithm)  # 3. Agent
    if config.restore:
        agent.restore(config.restore)
    collector = rl.Collector(collector_config, agent)  # 4. Collector

    logger = rl.TrainingLogger(
        config.run_dir, config.total_steps, tensorboard=config.tensorboard, progress=config.progress
    )
    returns: list[float] = []
    solved = False
    try:
        while collector.total_steps < config.total_steps:
            rollout = collector.collect()  # numpy arrays, [T, B]
            stats = agent.learn(rollout)  # one REINFORCE step
            returns.extend(rollout.episode_returns.tolist())
            logger.log_episodes(collector.total_steps, rollout.episode_returns, rollout.episode_lengths)
            logger.log_update(collector.total_steps, stats)
            solved = solved or (len(returns) >= 20 and bool(np.mean(returns[-20:]) >= config.solved_return))
            if solved and config.stop_when_solved:
                break
    finally:
        collector.close()
        logger.close()
    logger.plot(f"REINFORCE on {config.env_id}", config.solved_return)
    if config.save:
        agent.save(config.save)
    mean = float(np.mean(returns[-20:])) if returns else float("nan")
    return TrainResult(solved, collector.total_steps, logger.wall_s, mean, len(returns))


if __name__ == "__main__":
    with rl.user_errors():
        cfg = rl.parse_config(Config)
        print(rl.result_line(cfg.env_id, "PolicyGradient", main(cfg)), flush=True)
