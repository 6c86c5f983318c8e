"""IMPALA on CartPole-v1 with remote collectors: the main demo.

Collectors are actorrt actors, each stepping a vector of environments with the weights it has
and returning whole rollouts; the learner takes rollouts as they arrive, corrects for their
policy lag with V-trace, and broadcasts new weights without ever stalling the collectors.

    python examples/impala_cartpole.py                        # embedded cluster on this machine
    python examples/impala_cartpole.py --address HOST:PORT    # a running cluster (actorrt start)
    tensorboard --logdir runs

Shows a live line (frames/s, mean return, weight lag), writes TensorBoard scalars, CSV logs and
a PNG curve under --run-dir, prints a final JSON line, and exits 0 when solved (mean of the last
20 training-episode returns >= 475).
"""

from __future__ import annotations

from dataclasses import dataclass

import rl
from rl.collector import env_spaces
from rl.learners import impala_scheme
from rl.learners.run import DistributedRun, main


@dataclass
class Config(DistributedRun):
    """Train IMPALA on CartPole-v1 with remote collectors."""

    total_steps: int = 2_000_000
    """Environment steps to train for (a run stops at the first rollout that reaches them)."""
    num_envs: int = 32
    """Environments per collector."""
    num_steps: int = 16
    """Steps per environment per rollout (rollout length T)."""
    broadcast_every: int = 1
    """Learner updates between weight broadcasts (IMPALA's K)."""
    lr: float = 1.5e-3
    """RMSprop learning rate."""
    rmsprop_eps: float = 0.01
    """RMSprop's epsilon; the paper's 0.01 (with 1e-5, some runs run off to a deterministic policy)."""
    ent_coef: float = 0.01
    """Entropy bonus coefficient (without it, some seeds collapse to a deterministic policy)."""
    max_grad_norm: float = 40.0
    """Gradient norm clip (the paper's 40)."""
    run_dir: str = "runs/impala_cartpole"
    """Where TensorBoard events, CSV logs and the PNG curve go."""


class MakeAgent:
    """Builds the agent; runs in the learner and in every collector's process (picklable)."""

    def __init__(self, config: Config) -> None:
        self.config = config

    def __call__(self) -> rl.Agent:
        c = self.config
        obs_space, action_space = env_spaces(rl.CollectorConfig(c.env_id))
        model = rl.ActorCritic(obs_space, action_space)
        return rl.Agent(
            rl.IMPALA(
                model, lr=c.lr, gamma=c.gamma, ent_coef=c.ent_coef, max_grad_norm=c.max_grad_norm, eps=c.rmsprop_eps
            )
        )


if __name__ == "__main__":
    main(Config, MakeAgent, lambda c: impala_scheme(c.num_collectors, c.broadcast_every), "IMPALA")
