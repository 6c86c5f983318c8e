"""PARL's ``parl.algorithms`` (the torch backend): each wraps the ``rl`` algorithm it names, with
PARL's constructor, ``learn``/``predict``/``sample`` and tensor shapes. Where PARL's maths
differs from ``rl``'s defaults (an update order, a loss's scale), the face sets ``rl``'s option
that makes it PARL's; docs/parl.md lists them. Importing it imports torch and ``rl``."""

from __future__ import annotations

from actorrt.compat.parl.algorithms.a2c import A2C
from actorrt.compat.parl.algorithms.ddpg import DDPG
from actorrt.compat.parl.algorithms.ddqn import DDQN
from actorrt.compat.parl.algorithms.dqn import DQN
from actorrt.compat.parl.algorithms.maddpg import MADDPG
from actorrt.compat.parl.algorithms.oac import OAC
from actorrt.compat.parl.algorithms.policy_gradient import PolicyGradient
from actorrt.compat.parl.algorithms.ppo import PPO
from actorrt.compat.parl.algorithms.sac import SAC
from actorrt.compat.parl.algorithms.td3 import TD3

__all__ = ["A2C", "DDPG", "DDQN", "DQN", "MADDPG", "OAC", "PPO", "SAC", "TD3", "PolicyGradient"]

_LEFT_OUT = {
    "QMIX": "it needs StarCraft II (SMAC)",
    "COMA": "it needs StarCraft II (SMAC)",
    "MAPPO": "its benchmark needs OpenAI's multiagent-particle-envs (the 'multiagent' package, on gym 0.10), not on PyPI",
    "CQL": "it needs the D4RL data sets",
    "IQL": "it needs the D4RL data sets",
    "DT": "it needs the D4RL data sets",
}


def __getattr__(name: str) -> object:
    why = f"is not carried: {_LEFT_OUT[name]}" if name in _LEFT_OUT else f"is none of {', '.join(__all__)}"
    raise AttributeError(f"parl.algorithms.{name} {why} (see docs/parl.md)")
