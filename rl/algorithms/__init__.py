"""The algorithms: each file reads like its paper."""

from rl.algorithms.a2c import A2C
from rl.algorithms.dqn import DQN
from rl.algorithms.impala import IMPALA
from rl.algorithms.policy_gradient import PolicyGradient
from rl.algorithms.ppo import PPO

__all__ = ["A2C", "DQN", "IMPALA", "PPO", "PolicyGradient"]
