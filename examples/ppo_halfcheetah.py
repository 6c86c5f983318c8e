"""PPO on MuJoCo HalfCheetah-v5 with observation and reward normalisation and remote collectors.

Needs the mujoco extra: ``pip install actorrt[mujoco]`` (``gymnasium[mujoco]``, CPU only).

    python examples/ppo_halfcheetah.py                         # embedded cluster, 2 collectors
    python examples/ppo_halfcheetah.py --num-collectors 0      # collect in the learner's process
    python examples/ppo_halfcheetah.py --address HOST:PORT     # a running cluster
    python examples/ppo_halfcheetah.py --total-steps 8192      # a smoke run

Synchronous collection (A2C-style: every collector acts with the newest weights, one PPO update
on all their rollouts). Observations are standardised and rewards divided by the running
standard deviation of the discounted return (:class:`rl.normalization.NormalizingAgent`); the
statistics are part of the model's weights, so every collector normalises as the learner does,
and reported returns are the environment's own. The defaults are the usual MuJoCo settings
(2048 steps per update, 10 epochs of 32 minibatches, Adam 3e-4, GAE 0.95, clip 0.2).
"""

from __future__ import annotations

from dataclasses import dataclass

import rl
from rl.collector import env_spaces
from rl.learners import Scheme, a2c_scheme
from rl.learners.run import DistributedRun, main
from rl.normalization import NormalizingAgent


@dataclass
class Config(DistributedRun):
    """Train PPO on HalfCheetah-v5 with normalisation and remote collectors."""

    env_id: str = "HalfCheetah-v5"
    """gymnasium MuJoCo environment id."""
    total_steps: int = 1_000_000
    """Environment steps to train for (a run stops at the first rollout that reaches them)."""
    num_envs: int = 1
    """Environments per collector."""
    num_steps: int = 1024
    """Steps per environment per rollout (2 collectors x 1 env x 1024 = 2048 per update)."""
    lr: float = 3e-4
    """Adam learning rate."""
    gae_lambda: float = 0.95
    """GAE lambda."""
    clip_range: float = 0.2
    """PPO clipping epsilon."""
    num_epochs: int = 10
    """Passes over each batch of rollouts."""
    num_minibatches: int = 32
    """Minibatches per pass."""
    vf_coef: float = 0.5
    """Value loss coefficient."""
    ent_coef: float = 0.0
    """Entropy bonus coefficient."""
    max_grad_norm: float = 0.5
    """Gradient norm clip."""
    normalize_obs: bool = True
    """Standardise observations with running statistics."""
    normalize_reward: bool = True
    """Divide rewards by the running standard deviation of the discounted return."""
    solved_return: float = 4800.0
    """Mean return over the last 20 training episodes that counts as solved (the env's threshold)."""
    run_dir: str = "runs/ppo_halfcheetah"
    """Where TensorBoard events, CSV logs and the PNG curve go."""


class MakeAgent:
    """Builds the agent; runs in the learner and in every collector's process (picklable)."""

    def __init__(self, config: Config) -> None:
        self.config = config

    def __call__(self) -> rl.Agent:
        c = self.config
        obs, act = env_spaces(rl.CollectorConfig(c.env_id))
        algorithm = rl.PPO(
            rl.ActorCritic(obs, act),
            lr=c.lr,
            gamma=c.gamma,
            gae_lambda=c.gae_lambda,
            clip_range=c.clip_range,
            num_epochs=c.num_epochs,
            num_minibatches=c.num_minibatches,
            ent_coef=c.ent_coef,
            vf_coef=c.vf_coef,
            max_grad_norm=c.max_grad_norm,
            seed=c.seed,
        )
        assert obs.shape is not None
        return NormalizingAgent(
            algorithm, obs.shape, c.gamma, normalize_obs=c.normalize_obs, normalize_reward=c.normalize_reward
        )


if __name__ == "__main__":
    main(
        Config,
        MakeAgent,
        lambda c: a2c_scheme(c.num_collectors) if c.num_collectors else Scheme(collection="local"),
        "PPO",
    )
