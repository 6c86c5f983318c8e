"""PPO (clipped, GAE, Gaussian policy) on Pendulum-v1: mean of the last 20 returns >= -200.

python examples/ppo_pendulum.py                 # train; outputs under runs/ppo_pendulum/
python examples/ppo_pendulum.py --seed 3 --save runs/ppo_pendulum.pt
python examples/ppo_pendulum.py --restore runs/ppo_pendulum.pt --total-steps 10000
tensorboard --logdir runs
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

import rl
from rl.collector import env_spaces


@dataclass
class Config(rl.TrainingRun):
    """Train PPO on Pendulum-v1 (continuous actions)."""

    env_id: str = "Pendulum-v1"
    """gymnasium environment id."""
    seed: int = 0
    """Seed for torch and the environments."""
    total_steps: int = 300_000
    """Environment steps to train for (a run stops at the first rollout that reaches them)."""
    num_envs: int = 4
    """Environments stepped in parallel (one process)."""
    num_steps: int = 1024
    """Steps per environment per rollout."""
    lr: float = 1e-3
    """Adam learning rate."""
    gamma: float = 0.9
    """Discount factor."""
    gae_lambda: float = 0.95
    """GAE lambda."""
    clip_range: float = 0.2
    """PPO clipping epsilon."""
    num_epochs: int = 10
    """Passes over each rollout."""
    num_minibatches: int = 64
    """Minibatches per pass."""
    ent_coef: float = 0.0
    """Entropy bonus coefficient."""
    vf_coef: float = 0.5
    """Value loss coefficient."""
    max_grad_norm: float = 0.5
    """Gradient norm clip."""
    log_std_init: float = 0.0
    """Initial log standard deviation of the Gaussian policy."""
    solved_return: float = -200.0
    """Mean return over the last 20 training episodes that counts as solved."""
    run_dir: str = "runs/ppo_pendulum"
    """Where TensorBoard events, CSV logs and the PNG curve go."""


def main(config: Config) -> rl.TrainResult:
    """Train, log, plot, save; return the result."""
    torch.manual_seed(config.seed)
    collector_config = rl.CollectorConfig(config.env_id, config.num_envs, config.num_steps, config.seed)
    obs_space, action_space = env_spaces(collector_config)
    algorithm = rl.PPO(
        rl.ActorCritic(obs_space, action_space, log_std_init=config.log_std_init),
        lr=config.lr,
        gamma=config.gamma,
        gae_lambda=config.gae_lambda,
        clip_range=config.clip_range,
        num_epochs=config.num_epochs,
        num_minibatches=config.num_minibatches,
        ent_coef=config.ent_coef,
        vf_coef=config.vf_coef,
        max_grad_norm=config.max_grad_norm,
        seed=config.seed,
    )
    agent = rl.Agent(algorithm)

    def train(collector: rl.Collector, logger: rl.TrainingLogger) -> rl.TrainResult:
        return rl.train_on_policy(
            agent, collector, config.total_steps, config.solved_return, config.stop_when_solved, logger=logger
        )

    return rl.run_training(config, agent, collector_config, config.total_steps, train, f"PPO on {config.env_id}")


if __name__ == "__main__":
    with rl.user_errors():
        cfg = rl.parse_config(Config)
        print(rl.result_line(cfg.env_id, "PPO", main(cfg)), flush=True)
