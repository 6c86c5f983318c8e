"""Double DQN with a target network and a replay buffer on CartPole-v1.

    python examples/dqn_cartpole.py                  # outputs under runs/dqn_cartpole/
    python examples/dqn_cartpole.py --seed 1 --save runs/dqn.pt
    python examples/dqn_cartpole.py --restore runs/dqn.pt --epsilon-start 0.05

The defaults solve CartPole-v1 (mean of the last 20 training returns >= 475) on seeds 0-4 in
49k-59k env steps (13-31 s on a loaded 2-core machine). What mattered: the squared TD error
(the Huber loss lets Q diverge here, see :mod:`rl.algorithms.dqn`) and a target network synced
often enough (every 50 updates, i.e. every 200 env steps) for values to propagate over the
~100-step horizon of gamma .99. The rl-zoo settings (lr 2.3e-3, 128 updates per 256 steps) did
not reach 475 on seeds 0 and 1: SB3's DQN within 100k steps, ours (squared loss) within 60k.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
import torch

import rl
from rl.collector import env_spaces


@dataclass
class Config(rl.TrainingRun):
    """Train double DQN on CartPole-v1."""

    env_id: str = "CartPole-v1"
    """gymnasium environment id (discrete actions)."""
    seed: int = 0
    """Seed for torch, the environments and the replay buffer."""
    total_steps: int = 100_000
    """Environment steps to train for (a run stops at the first rollout that reaches them)."""
    num_envs: int = 8
    """Environments stepped together."""
    num_steps: int = 4
    """Steps per environment between bursts of updates."""
    gradient_steps: int = 8
    """Updates after each ``num_envs x num_steps`` environment steps (1 per 4 env steps)."""
    batch_size: int = 64
    """Transitions per update."""
    buffer_size: int = 100_000
    """Replay buffer capacity."""
    learning_starts: int = 1000
    """Environment steps before the first update."""
    lr: float = 1e-3
    """Adam learning rate."""
    gamma: float = 0.99
    """Discount factor."""
    hidden: int = 128
    """Width of the two hidden layers of the Q-network."""
    target_update_interval: int = 50
    """Updates between target-network synchronisations."""
    tau: float = 1.0
    """Target update rate (1: hard copy)."""
    loss: Literal["mse", "huber"] = "mse"
    """TD loss."""
    epsilon_start: float = 1.0
    """Initial exploration rate."""
    epsilon_end: float = 0.02
    """Final exploration rate."""
    exploration_fraction: float = 0.1
    """Fraction of ``total_steps`` over which epsilon decays linearly."""
    run_dir: str = "runs/dqn_cartpole"
    """Where TensorBoard events, CSV logs and the PNG curve go."""


def main(config: Config) -> rl.TrainResult:
    """Train, log, plot, save; return the result."""
    torch.manual_seed(config.seed)
    collector_config = rl.CollectorConfig(config.env_id, config.num_envs, config.num_steps, config.seed)
    obs_space, action_space = env_spaces(collector_config)
    algorithm = rl.DQN(
        rl.QNetwork(obs_space, action_space, hidden=(config.hidden, config.hidden)),
        lr=config.lr,
        gamma=config.gamma,
        target_update_interval=config.target_update_interval,
        tau=config.tau,
        loss=config.loss,
    )
    agent = rl.Agent(algorithm)
    assert obs_space.shape is not None
    buffer = rl.UniformReplay(config.buffer_size, obs_space.shape, action_dtype=np.int64, seed=config.seed)

    def train(collector: rl.Collector, logger: rl.TrainingLogger) -> rl.TrainResult:
        return rl.train_dqn(
            agent,
            collector,
            buffer,
            config.total_steps,
            learning_starts=config.learning_starts,
            batch_size=config.batch_size,
            gradient_steps=config.gradient_steps,
            epsilon_start=config.epsilon_start,
            epsilon_end=config.epsilon_end,
            exploration_fraction=config.exploration_fraction,
            solved_return=config.solved_return,
            stop_when_solved=config.stop_when_solved,
            logger=logger,
        )

    return rl.run_training(config, agent, collector_config, config.total_steps, train, f"DQN on {config.env_id}")


if __name__ == "__main__":
    with rl.user_errors():
        cfg = rl.parse_config(Config)
        print(rl.result_line(cfg.env_id, "DQN", main(cfg)), flush=True)
