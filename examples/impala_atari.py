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

from dataclasses import dataclass

import numpy as np

import rl
from rl.atari import AtariEnv, ConvActorCritic, frames
from rl.learners import impala_scheme
from rl.learners.run import DistributedRun, main


@dataclass
class Config(DistributedRun):
    """Train IMPALA on an Atari game with remote collectors."""

    env_id: str = "ALE/Pong-v5"
    """ALE game id."""
    total_steps: int = 10_000_000
    """Agent steps to train for, each 4 emulator frames (it stops at the first rollout that reaches them)."""
    num_steps: int = 20
    """Steps per environment per rollout."""
    lr: float = 6e-4
    """RMSprop learning rate."""
    ent_coef: float = 0.01
    """Entropy bonus coefficient."""
    max_grad_norm: float = 40.0
    """Gradient norm clip (the paper's)."""
    solved_return: float = 18.0
    """Mean return over the last 20 training episodes that counts as solved."""
    run_dir: str = "runs/impala_atari"
    """Where TensorBoard events, CSV logs and the PNG curve go."""


class AtariAgent(rl.Agent):
    """Frames stay uint8 until the model scales them: rollouts are 4x smaller on the wire."""

    def preprocess_obs(self, obs: np.ndarray) -> np.ndarray:
        return obs


class MakeAgent:
    """Builds the agent; runs in the learner and in every collector's process (picklable)."""

    def __init__(self, config: Config) -> None:
        self.config = config

    def __call__(self) -> rl.Agent:
        c = self.config
        env = AtariEnv(c.env_id)()
        model = ConvActorCritic(env.observation_space, env.action_space)
        env.close()
        algorithm = rl.IMPALA(model, lr=c.lr, gamma=c.gamma, ent_coef=c.ent_coef, max_grad_norm=c.max_grad_norm)
        return AtariAgent(algorithm)


if __name__ == "__main__":
    main(
        Config,
        MakeAgent,
        lambda c: impala_scheme(c.num_collectors),
        "IMPALA",
        env_fn=lambda c: AtariEnv(c.env_id),
        preload=("rl.learners", "rl.atari"),
        extra=lambda c, result: {"emulator_frames_per_s": round(frames(1) * result.frames_per_s, 1)},
    )
