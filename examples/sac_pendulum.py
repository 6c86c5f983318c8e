"""SAC (twin Q, automatic entropy temperature) on Pendulum-v1: mean of the last 10 returns >= -200.

    python examples/sac_pendulum.py                      # train; outputs under runs/sac_pendulum/
    python examples/sac_pendulum.py --algo td3           # TD3 (or ddpg) with the same loop
    python examples/sac_pendulum.py --prioritized        # prioritised replay
    python examples/sac_pendulum.py --seed 3 --save runs/sac_pendulum.pt
    python examples/sac_pendulum.py --num-collectors 2 --num-steps 16   # remote collectors (embedded cluster)
    python examples/sac_pendulum.py --address HOST:PORT --num-collectors 4 --num-steps 16
    tensorboard --logdir runs

By default one process and no cluster: a single env stepped one step at a time, one update per
env step (uniformly random actions for the first ``--learning-starts`` steps). Small networks
(64 x 64) and batches of 128 keep an update near 2-3 ms on one CPU core; the defaults solve in
5-10k env steps. With ``--num-collectors N`` (or ``--address``) N remote collectors feed the
learner's replay (:func:`rl.learners.off_policy_scheme`) at the same update-to-data ratio.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from typing import Literal

import gymnasium as gym
import torch

import actorrt
import rl
from rl.collector import env_spaces
from rl.learners import off_policy_scheme
from rl.learners.run import DistributedRun, run


@dataclass
class Config(DistributedRun):
    """Train SAC (or TD3, DDPG) on Pendulum-v1."""

    env_id: str = "Pendulum-v1"
    """gymnasium environment id (a bounded Box action space)."""
    algo: Literal["sac", "td3", "ddpg"] = "sac"
    """The algorithm."""
    seed: int = 0
    """Seed for torch, the environments and the replay."""
    total_steps: int = 30_000
    """Environment steps to train for (a run stops at the first rollout that reaches them)."""
    num_collectors: int = 0
    """Remote collector actors feeding the replay; 0: collect in this process, no cluster."""
    num_envs: int = 1
    """Environments stepped together (per collector)."""
    num_steps: int = 1
    """Steps per environment between bursts of updates (a remote collector's rollout length: 16 suits)."""
    broadcast_every: int = 16
    """With remote collectors: updates between weight broadcasts (K)."""
    replay: Literal["learner", "actor"] = "learner"
    """With remote collectors: ``learner`` (the replay is in this process) or ``actor`` (a replay
    actor that the collectors feed directly, and this process samples from)."""
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
    save: str | None = None
    """Save a checkpoint here at the end: with --num-collectors N the learner's (models, optimizers,
    counters, replay), else the agent's (models, optimizers, counters)."""
    restore: str | None = None
    """Restore what --save wrote in the same mode: a learner checkpoint resumes its env steps,
    updates and replay; the agent's is a warm start (the replay and step count start over)."""
    window: int = 10
    """Episodes in the solved mean."""
    run_dir: str = "runs/sac_pendulum"
    """Where TensorBoard events, CSV logs and the PNG curve go."""


def make_algorithm(
    algo: str, obs_space: gym.Space, action_space: gym.Space, hidden: int, lr: float, gamma: float, tau: float
) -> rl.SAC | rl.TD3 | rl.DDPG:
    """SAC, TD3 or DDPG with ``hidden x hidden`` networks and one learning rate."""
    h = (hidden, hidden)
    if algo == "sac":
        return rl.SAC(
            rl.SquashedGaussianActor(obs_space, action_space, h),
            rl.TwinQCritic(obs_space, action_space, h),
            actor_lr=lr,
            critic_lr=lr,
            alpha_lr=lr,
            gamma=gamma,
            tau=tau,
        )
    if algo == "td3":
        return rl.TD3(
            rl.DeterministicActor(obs_space, action_space, h),
            rl.TwinQCritic(obs_space, action_space, h),
            actor_lr=lr,
            critic_lr=lr,
            gamma=gamma,
            tau=tau,
        )
    if algo == "ddpg":
        return rl.DDPG(
            rl.DeterministicActor(obs_space, action_space, h),
            rl.QCritic(obs_space, action_space, h),
            actor_lr=lr,
            critic_lr=lr,
            gamma=gamma,
            tau=tau,
        )
    raise ValueError(f"unknown algo {algo!r} (sac, td3 or ddpg)")


class MakeAgent:
    """Builds the agent; runs here and in every remote collector's process (picklable)."""

    def __init__(self, config: Config) -> None:
        self.config = config

    def __call__(self) -> rl.Agent:
        c = self.config
        obs_space, action_space = env_spaces(rl.CollectorConfig(c.env_id))
        return rl.Agent(make_algorithm(c.algo, obs_space, action_space, c.hidden, c.lr, c.gamma, c.tau))


def make_replay(config: Config) -> rl.UniformReplay:
    """Uniform or prioritised replay sized for the environment."""
    obs_space, action_space = env_spaces(rl.CollectorConfig(config.env_id))
    assert obs_space.shape is not None and action_space.shape is not None
    replay_cls = rl.PrioritizedReplay if config.prioritized else rl.UniformReplay
    return replay_cls(config.buffer_size, obs_space.shape, action_space.shape, seed=config.seed)


def main_distributed(config: Config) -> dict:
    """Remote collectors feed the learner's replay; returns the final JSON line's fields."""
    scheme = off_policy_scheme(
        config.num_collectors,
        config.updates_per_step,
        config.broadcast_every,
        config.replay,
    )
    options = {
        "replay": make_replay(config),
        "batch_size": config.batch_size,
        "learning_starts": config.learning_starts,
        "window": config.window,
    }
    line, _ = actorrt.run(run(config, MakeAgent(config), scheme, config.algo.upper(), learner_options=options))
    return line


def main(config: Config) -> rl.TrainResult:
    """Train in this process, log, plot, save; return the result."""
    torch.manual_seed(config.seed)
    collector_config = rl.CollectorConfig(config.env_id, config.num_envs, config.num_steps, config.seed)
    agent = MakeAgent(config)()
    replay = make_replay(config)

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
    with rl.user_errors():
        cfg = rl.parse_config(Config, description=__doc__)
        if cfg.replay == "actor" and cfg.num_collectors == 0:
            sys.exit("--replay actor: a replay actor is fed by remote collectors; give --num-collectors N")
        if cfg.num_collectors > 0 or cfg.address is not None:
            fields = main_distributed(cfg)
            print(json.dumps(fields), flush=True)
            sys.exit(0 if fields["solved"] else 1)
        print(rl.result_line(cfg.env_id, cfg.algo.upper(), main(cfg)), flush=True)
