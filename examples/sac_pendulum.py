"""SAC (twin Q, automatic entropy temperature) on Pendulum-v1: mean of the last 10 returns >= -200.

    python examples/sac_pendulum.py                      # train; outputs under runs/sac_pendulum/
    python examples/sac_pendulum.py --algo td3           # TD3 (or ddpg) with the same loop
    python examples/sac_pendulum.py --prioritized        # prioritised replay
    python examples/sac_pendulum.py --seed 3 --save runs/sac_pendulum.pt
    tensorboard --logdir runs

One process: a single env stepped one step at a time, one update per env step (uniformly
random actions for the first ``--learning-starts`` steps). Small networks (64 x 64) and batches
of 128 keep an update near 2-3 ms on one CPU core; the defaults solve in 5-10k env steps.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

import rl
from rl.collector import env_spaces


@dataclass
class Config(rl.TrainingRun):
    """Train SAC (or TD3, DDPG) on Pendulum-v1."""

    env_id: str = "Pendulum-v1"
    """gymnasium environment id (a bounded Box action space)."""
    algo: str = "sac"
    """``sac``, ``td3`` or ``ddpg``."""
    seed: int = 0
    """Seed for torch, the environments and the replay."""
    total_steps: int = 30_000
    """Environment steps at most."""
    num_envs: int = 1
    """Environments stepped together."""
    learning_starts: int = 1000
    """Environment steps of uniformly random actions before the first update."""
    updates_per_step: float = 1.0
    """Updates per environment step (the update-to-data ratio)."""
    batch_size: int = 128
    """Transitions per update."""
    buffer_size: int = 100_000
    """Replay capacity."""
    prioritized: bool = False
    """Prioritised replay (proportional, alpha 0.6, beta 0.4) instead of uniform."""
    hidden: int = 64
    """Width of the two hidden layers of actor and critics."""
    lr: float = 1e-3
    """Adam learning rate of actor, critics (and temperature)."""
    gamma: float = 0.99
    """Discount factor."""
    tau: float = 0.005
    """Target-network Polyak rate."""
    solved_return: float = -200.0
    """Mean return over the last 10 training episodes that counts as solved."""
    window: int = 10
    """Episodes in the solved mean."""
    run_dir: str = "runs/sac_pendulum"
    """Where TensorBoard events, CSV logs and the PNG curve go."""


def make_algorithm(algo: str, obs_space, action_space, hidden: int, lr: float, gamma: float, tau: float):  # type: ignore[no-untyped-def]
    """SAC, TD3 or DDPG with ``hidden x hidden`` networks and one learning rate."""
    h = (hidden, hidden)
    if algo == "sac":
        return rl.SAC(rl.SquashedGaussianActor(obs_space, action_space, h), rl.TwinQCritic(obs_space, action_space, h),
                      actor_lr=lr, critic_lr=lr, alpha_lr=lr, gamma=gamma, tau=tau)
    if algo == "td3":
        return rl.TD3(rl.DeterministicActor(obs_space, action_space, h), rl.TwinQCritic(obs_space, action_space, h),
                      actor_lr=lr, critic_lr=lr, gamma=gamma, tau=tau)
    if algo == "ddpg":
        return rl.DDPG(rl.DeterministicActor(obs_space, action_space, h), rl.QCritic(obs_space, action_space, h),
                       actor_lr=lr, critic_lr=lr, gamma=gamma, tau=tau)
    raise ValueError(f"unknown algo {algo!r} (sac, td3 or ddpg)")


def main(config: Config) -> rl.TrainResult:
    """Train, log, plot, save; return the result."""
    torch.manual_seed(config.seed)
    collector_config = rl.CollectorConfig(config.env_id, config.num_envs, 1, config.seed)
    obs_space, action_space = env_spaces(collector_config)
    algorithm = make_algorithm(config.algo, obs_space, action_space, config.hidden, config.lr, config.gamma, config.tau)
    agent = rl.Agent(algorithm)
    assert obs_space.shape is not None and action_space.shape is not None
    replay_cls = rl.PrioritizedReplay if config.prioritized else rl.UniformReplay
    replay = replay_cls(config.buffer_size, obs_space.shape, action_space.shape, seed=config.seed)

    def train(collector: rl.Collector, logger: rl.TrainingLogger) -> rl.TrainResult:
        return rl.train_off_policy(
            agent,
            collector,
            replay,
            config.total_steps,
            learning_starts=config.learning_starts,
            batch_size=config.batch_size,
            updates_per_step=config.updates_per_step,
            solved_return=config.solved_return,
            stop_when_solved=config.stop_when_solved,
            window=config.window,
            logger=logger,
        )

    title = f"{config.algo.upper()} on {config.env_id}"
    return rl.run_training(config, agent, collector_config, config.total_steps, train, title)


if __name__ == "__main__":
    cfg = rl.parse_config(Config)
    print(rl.result_line(cfg.env_id, cfg.algo.upper(), main(cfg)), flush=True)
