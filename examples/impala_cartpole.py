"""IMPALA on CartPole-v1 with remote collectors: the main demo.

Collectors are actorrt actors, each stepping a vector of environments with the weights it has
and returning whole rollouts; the learner takes rollouts as they arrive, corrects for their
policy lag with V-trace, and broadcasts new weights without ever stalling the collectors.

    python examples/impala_cartpole.py                        # embedded cluster on this machine
    python examples/impala_cartpole.py --address HOST:PORT    # a running cluster (actorrt start)
    tensorboard --logdir runs

Exits 0 when solved (mean of the last 20 training-episode returns >= 475).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from dataclasses import dataclass

import torch

import actorrt
import rl
from rl.collector import env_spaces
from rl.learners import Learner, impala_scheme
from rl.metrics import LearnerMetrics


@dataclass
class Config:
    """Train IMPALA on CartPole-v1 with remote collectors."""

    env_id: str = "CartPole-v1"
    """gymnasium environment id."""
    seed: int = 0
    """Seed for torch and the environments (collector i adds its own offset)."""
    total_steps: int = 2_000_000
    """Environment steps at most."""
    num_collectors: int = 2
    """Remote collector actors."""
    num_envs: int = 32
    """Environments per collector."""
    num_steps: int = 16
    """Steps per environment per rollout (rollout length T)."""
    broadcast_every: int = 1
    """Learner updates between weight broadcasts."""
    lr: float = 1.5e-3
    """RMSprop learning rate."""
    gamma: float = 0.99
    """Discount factor."""
    ent_coef: float = 0.0
    """Entropy bonus coefficient."""
    max_grad_norm: float = 0.5
    """Gradient norm clip."""
    solved_return: float = 475.0
    """Mean return over the last 20 training episodes that counts as solved."""
    address: str | None = None
    """Master HOST:PORT of a running cluster; default: an embedded cluster."""
    run_dir: str = "runs/impala_cartpole"
    """Where TensorBoard events, CSV logs and the PNG curve go."""
    tensorboard: bool = True
    """Write TensorBoard scalars."""
    progress: bool = True
    """Show the live progress line (on stderr)."""
    metrics_port: int = 0
    """Serve the learner's Prometheus metrics (actorrt_rl_*) on this port; 0: off."""
    save: str | None = None
    """Save a learner checkpoint to this path at the end."""
    restore: str | None = None
    """Resume from a learner checkpoint."""


class MakeAgent:
    """Builds the agent; runs in the learner and in every collector's process (picklable)."""

    def __init__(self, config: Config) -> None:
        self.config = config

    def __call__(self) -> rl.Agent:
        c = self.config
        obs_space, action_space = env_spaces(rl.CollectorConfig(c.env_id))
        model = rl.ActorCritic(obs_space, action_space)
        algorithm = rl.IMPALA(model, lr=c.lr, gamma=c.gamma, ent_coef=c.ent_coef, max_grad_norm=c.max_grad_norm)
        return rl.Agent(algorithm)


async def main(config: Config) -> dict:
    torch.manual_seed(config.seed)
    collector_config = rl.CollectorConfig(config.env_id, config.num_envs, config.num_steps, config.seed)
    logger = rl.TrainingLogger(config.run_dir, config.total_steps, tensorboard=config.tensorboard,
                               progress=config.progress)
    slots = max(os.cpu_count() or 1, config.num_collectors)  # embedded: a slot per collector
    async with actorrt.connect(config.address, num_cpus=slots, preload=["rl.learners"]):
        metrics = LearnerMetrics("impala")
        server = metrics.serve(config.metrics_port) if config.metrics_port else None
        learner = Learner(MakeAgent(config), collector_config,
                          impala_scheme(config.num_collectors, config.broadcast_every), logger=logger, metrics=metrics)
        if config.restore:
            learner.restore(config.restore)
        async with learner:
            result = await learner.train(config.total_steps, config.solved_return)
            if config.save:
                learner.save(config.save)
        if server is not None:
            server.stop()
    logger.close()
    logger.plot(f"IMPALA on {config.env_id} ({config.num_collectors} remote collectors)", config.solved_return)
    return {"env": config.env_id, "algo": "IMPALA", **result.json_fields()}


if __name__ == "__main__":
    cfg = rl.parse_config(Config)
    line = actorrt.run(main(cfg))
    print(json.dumps(line), flush=True)
    sys.exit(0 if line["solved"] else 1)
