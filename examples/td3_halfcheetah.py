"""TD3 on MuJoCo HalfCheetah-v5 with remote collectors feeding the learner's replay.

Needs the mujoco extra: ``pip install actorrt[mujoco]`` (``gymnasium[mujoco]``, CPU only).

    python examples/td3_halfcheetah.py                         # embedded cluster, 2 collectors
    python examples/td3_halfcheetah.py --num-collectors 0      # collect in the learner's process
    python examples/td3_halfcheetah.py --address HOST:PORT     # a running cluster
    python examples/td3_halfcheetah.py --total-steps 5000      # a smoke run
    python examples/td3_halfcheetah.py --bf16 --compile        # bfloat16 updates, losses through torch.compile

Collectors step their environments with the weights they last received and send rollouts of
``--num-envs x --num-steps`` steps; the learner stores them and takes ``--updates-per-step``
updates per env step received (uniformly random actions for the first ``--learning-starts``
steps), broadcasting weights every ``--broadcast-every`` updates. The defaults are those of the
TD3 authors' later code (256 x 256 networks, batches of 256, Adam 3e-4, 25k random steps, noise
0.1, policy delay 2); the paper had 400 x 300 networks, batches of 100, Adam 1e-3 and 10k random
steps. On a CPU an update of these networks takes several milliseconds, so the 1M steps of the
paper take hours; "solved" is the environment's reward threshold (4800) over the last 20 training
episodes. rl-zoo's Adam 1e-3 (``--lr 1e-3``) learns faster early on HalfCheetah: in
``bench/README_rl.md``'s runs (10k random steps, one process) it reached a return of 3,000 in
45-61k env steps on six seeds, against 57k and 60k on two seeds with 3e-4, which missed 3,000
within 70k on a third.
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
    """Train TD3 on HalfCheetah-v5 with remote collectors and a replay in the learner."""

    env_id: str = "HalfCheetah-v5"
    """gymnasium MuJoCo environment id."""
    total_steps: int = 1_000_000
    """Environment steps to train for (a run stops at the first rollout that reaches them)."""
    num_envs: int = 1
    """Environments per collector."""
    num_steps: int = 64
    """Steps per environment per rollout (what a collector sends at once)."""
    learning_starts: int = 25_000
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
    """Adam learning rate of actor and critics."""
    tau: float = 0.005
    """Target-network Polyak rate."""
    exploration_noise: float = 0.1
    """Acting noise, as a fraction of each action's half-range."""
    policy_delay: int = 2
    """Critic updates per actor (and target) update."""
    bf16: bool = False
    """The updates' forward passes in bfloat16 (``autocast=torch.bfloat16``): faster on CPUs with AMX."""
    compile: bool = False
    """The updates' losses through ``torch.compile`` (``rl.TD3(compile=True)``): a few seconds to
    build at the first update, then a faster step."""
    solved_return: float = 4800.0
    """Mean return over the last 20 training episodes that counts as solved (the env's threshold)."""
    run_dir: str = "runs/td3_halfcheetah"
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
            rl.TD3(
                rl.DeterministicActor(obs, act, h),
                rl.TwinQCritic(obs, act, h),
                actor_lr=c.lr,
                critic_lr=c.lr,
                gamma=c.gamma,
                tau=c.tau,
                autocast=torch.bfloat16 if c.bf16 else None,
                compile=c.compile,
                exploration_noise=c.exploration_noise,
                policy_delay=c.policy_delay,
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
        "TD3",
        learner_options=learner_options,
    )
