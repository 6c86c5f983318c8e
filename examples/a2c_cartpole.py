"""Synchronous A2C on CartPole-v1 with remote collectors.

Each update: broadcast the weights, gather one rollout from every collector (each an actorrt
actor stepping its own vector of environments), learn once on all of them together, repeat.

    python examples/a2c_cartpole.py                        # embedded cluster on this machine
    python examples/a2c_cartpole.py --address HOST:PORT    # a running cluster (actorrt start)

Exits 0 when solved (mean of the last 20 training-episode returns >= 475).
"""

from __future__ import annotations

from dataclasses import dataclass

import rl
from rl.collector import env_spaces
from rl.learners import a2c_scheme
from rl.learners.run import DistributedRun, main


@dataclass
class Config(DistributedRun):
    """Train A2C on CartPole-v1 with remote collectors."""

    num_steps: int = 8
    """Steps per environment per rollout."""
    gae_lambda: float = 1.0
    """GAE lambda (1.0: n-step returns, as in A2C)."""
    ent_coef: float = 0.0
    """Entropy bonus coefficient."""
    run_dir: str = "runs/a2c_cartpole"
    """Where TensorBoard events, CSV logs and the PNG curve go."""


class MakeAgent:
    """Builds the agent; runs in the learner and in every collector's process (picklable)."""

    def __init__(self, config: Config) -> None:
        self.config = config

    def __call__(self) -> rl.Agent:
        c = self.config
        obs_space, action_space = env_spaces(rl.CollectorConfig(c.env_id))
        algorithm = rl.A2C(
            rl.ActorCritic(obs_space, action_space),
            lr=c.lr,
            gamma=c.gamma,
            gae_lambda=c.gae_lambda,
            ent_coef=c.ent_coef,
        )
        return rl.Agent(algorithm)


if __name__ == "__main__":
    main(Config, MakeAgent, lambda c: a2c_scheme(c.num_collectors), "A2C")
