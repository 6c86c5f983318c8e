"""SAC on MuJoCo HalfCheetah-v5 with remote collectors feeding the learner's replay.

Needs the mujoco extra: ``pip install actorrt[mujoco]`` (``gymnasium[mujoco]``, CPU only).

    python examples/sac_halfcheetah.py                         # embedded cluster, 2 collectors
    python examples/sac_halfcheetah.py --num-collectors 0      # collect in the learner's process
    python examples/sac_halfcheetah.py --address HOST:PORT     # a running cluster
    python examples/sac_halfcheetah.py --total-steps 5000      # a smoke run
    python examples/sac_halfcheetah.py --bf16                  # updates in bfloat16 (CPUs with AMX)
    python examples/sac_halfcheetah.py --bf16 --compile        # and the losses through torch.compile

Collectors step their environments with the weights they last received and send rollouts of
``--num-envs x --num-steps`` steps; the learner stores them and takes ``--updates-per-step``
updates per env step received (uniformly random actions for the first ``--learning-starts``
steps), broadcasting weights every ``--broadcast-every`` updates. The defaults are the paper's
(256 x 256 networks, batches of 256, Adam 3e-4, one update per step). On a CPU an update of these
networks takes several milliseconds, so the 1M steps of the paper take hours; "solved" is the
environment's reward threshold (4800) over the last 20 training episodes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch

import rl
from rl.collector import env_spaces
from rl.learners import off_policy_scheme
from rl.learners.run import DistributedRun, main


@dataclass
class Config(DistributedRun):
    """Train SAC on HalfCheetah-v5 with remote collectors and a replay in the learner."""

    env_id: str = "HalfCheetah-v5"
    """gymnasium MuJoCo environment id."""
    total_steps: int = 1_000_000
    """Environment steps to train for (a run stops at the first rollout that reaches them)."""
    num_envs: int = 1
    """Environments per collector."""
    num_steps: int = 64
    """Steps per environment per rollout (what a collector sends at once)."""
    learning_starts: int = 10_000
    """Environment steps of uniformly random actions before the first update."""
    updates_per_step: float = 1.0
    """Updates per environment step received (the update-to-data ratio)."""
    broadcast_every: int = 64
    """Updates between weight broadcasts to the collectors (K)."""
    replay: Literal["learner", "actor"] = "learner"
    """``learner`` (the replay is in the learner's process) or ``actor`` (a replay actor that the
    collectors feed directly, and the learner samples from)."""
    batch_size: int = 256
    """Transitions per update."""
    buffer_size: int = 1_000_000
    """Replay capacity."""
    hidden: int = 256
    """Width of the two hidden layers of actor and critics."""
    lr: float = 3e-4
    """Adam learning rate of actor, critics and temperature."""
    tau: float = 0.005
    """Target-network Polyak rate."""
    bf16: bool = False
    """The updates' forward passes in bfloat16 (``autocast=torch.bfloat16``): faster on CPUs with AMX."""
    compile: bool = False
    """The updates' losses through ``torch.compile`` (``rl.SAC(compile=True)``): a few seconds to
    build at the first update, then a faster step (with ``--bf16``, ~0.7x the eager step's time)."""
    solved_return: float = 4800.0
    """Mean return over the last 20 training episodes that counts as solved (the env's threshold)."""
    run_dir: str = "runs/sac_halfcheetah"
    """Where TensorBoard events, CSV logs and the PNG curve go."""


class MakeAgent:
    """Builds the agent; runs in the learner and in every collector's process (picklable)."""

    def __init__(self, config: Config) -> None:
        self.config = config

    def __call__(self) -> rl.Agent:
        c = self.config
        obs, act = env_spaces(rl.CollectorConfig(c.env_id))
        h = (c.hidden, c.hidden)
        return rl.Agent(
            rl.SAC(
                rl.SquashedGaussianActor(obs, act, h),
                rl.TwinQCritic(obs, act, h),
                actor_lr=c.lr,
                critic_lr=c.lr,
                alpha_lr=c.lr,
                gamma=c.gamma,
                tau=c.tau,
                autocast=torch.bfloat16 if c.bf16 else None,
                compile=c.compile,
            )
        )


def learner_options(c: Config) -> dict:
    """The learner's replay and update settings."""
    obs, act = env_spaces(rl.CollectorConfig(c.env_id))
    assert obs.shape is not None and act.shape is not None
    replay = rl.UniformReplay(c.buffer_size, obs.shape, act.shape, seed=c.seed)
    return {"replay": replay, "batch_size": c.batch_size, "learning_starts": c.learning_starts}


if __name__ == "__main__":
    main(
        Config,
        MakeAgent,
        lambda c: off_policy_scheme(c.num_collectors, c.updates_per_step, c.broadcast_every, c.replay),
        "SAC",
        learner_options=learner_options,
    )
