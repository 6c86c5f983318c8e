"""IMPALA on Atari Pong (ALE) with remote collectors, frames/s reported.

Needs the atari extra: ``pip install .[atari]`` (ale-py ships the ROMs; opencv resizes frames).
Standard preprocessing: no sticky actions, 30 no-op starts, frame skip 4, 84x84 grayscale, 4
stacked frames; the Nature-DQN convolutional actor-critic.

    python examples/impala_atari.py                          # embedded cluster on this machine
    python examples/impala_atari.py --address HOST:PORT      # a running cluster, more collectors
    python examples/impala_atari.py --total-steps 40000      # a throughput run

Pong is solved near a mean return of +18; that takes millions of frames, far more than two CPU
cores give in minutes, so this example is first a throughput demonstration here.
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass

import numpy as np
import torch

import actorrt
import rl
from rl.atari import AtariEnv, ConvActorCritic, frames
from rl.learners import Learner, impala_scheme
from rl.metrics import LearnerMetrics


@dataclass
class Config:
    """Train IMPALA on an Atari game with remote collectors."""

    env_id: str = "ALE/Pong-v5"
    """ALE game id."""
    seed: int = 0
    """Seed for torch and the environments."""
    total_steps: int = 10_000_000
    """Agent steps at most (each is 4 emulator frames)."""
    num_collectors: int = 2
    """Remote collector actors."""
    num_envs: int = 8
    """Environments per collector."""
    num_steps: int = 20
    """Steps per environment per rollout."""
    lr: float = 6e-4
    """RMSprop learning rate."""
    gamma: float = 0.99
    """Discount factor."""
    ent_coef: float = 0.01
    """Entropy bonus coefficient."""
    max_grad_norm: float = 40.0
    """Gradient norm clip (the paper's)."""
    solved_return: float = 18.0
    """Mean return over the last 20 training episodes that counts as solved."""
    address: str | None = None
    """Master HOST:PORT of a running cluster; default: an embedded cluster."""
    run_dir: str = "runs/impala_atari"
    """Where TensorBoard events, CSV logs and the PNG curve go."""
    tensorboard: bool = True
    """Write TensorBoard scalars."""
    progress: bool = True
    """Show the live progress line (on stderr)."""
    metrics_port: int = 0
    """Serve the learner's Prometheus metrics on this port; 0: off."""
    save: str | None = None
    """Save a learner checkpoint to this path at the end."""
    restore: str | None = None
    """Resume from a learner checkpoint."""


class AtariAgent(rl.Agent):
    """Frames stay uint8 until the model scales them: rollouts are 4x smaller on the wire."""

    def preprocess_obs(self, obs: np.ndarray) -> np.ndarray:
        return obs


class MakeAgent:
    def __init__(self, config: Config) -> None:
        self.config = config

    def __call__(self) -> rl.Agent:
        c = self.config
        env = AtariEnv(c.env_id)()
        model = ConvActorCritic(env.observation_space, env.action_space)
        env.close()
        algorithm = rl.IMPALA(model, lr=c.lr, gamma=c.gamma, ent_coef=c.ent_coef, max_grad_norm=c.max_grad_norm)
        return AtariAgent(algorithm)


async def main(config: Config) -> dict:
    torch.manual_seed(config.seed)
    collector_config = rl.CollectorConfig(config.env_id, config.num_envs, config.num_steps, config.seed)
    logger = rl.TrainingLogger(config.run_dir, config.total_steps, tensorboard=config.tensorboard,
                               progress=config.progress)
    slots = max(os.cpu_count() or 1, config.num_collectors)
    async with actorrt.connect(config.address, num_cpus=slots, preload=["rl.learners", "rl.atari"]):
        metrics = LearnerMetrics("impala_atari")
        server = metrics.serve(config.metrics_port) if config.metrics_port else None
        learner = Learner(MakeAgent(config), collector_config, impala_scheme(config.num_collectors), logger=logger,
                          metrics=metrics, env_fn=AtariEnv(config.env_id))
        if config.restore:
            learner.restore(config.restore)
        async with learner:
            result = await learner.train(config.total_steps, config.solved_return)
            if config.save:
                learner.save(config.save)
        if server is not None:
            server.stop()
    logger.close()
    logger.plot(f"IMPALA on {config.env_id}", config.solved_return)
    line = {"env": config.env_id, "algo": "IMPALA", **result.json_fields()}
    line["emulator_frames_per_s"] = round(frames(1) * result.frames_per_s, 1)
    return line


if __name__ == "__main__":
    cfg = rl.parse_config(Config)
    out = actorrt.run(main(cfg))
    print(json.dumps(out), flush=True)
    sys.exit(0 if out["solved"] else 1)
