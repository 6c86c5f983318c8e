"""The algorithms: each file reads like its paper. The off-policy updates' fast path, the same
steps with their gradients written out by hand, is :mod:`rl.algorithms.written_out`."""

from rl.algorithms.a2c import A2C
from rl.algorithms.cmaes import CMAES
from rl.algorithms.ddpg import DDPG
from rl.algorithms.dqn import DQN
from rl.algorithms.es import ES, NoiseTable
from rl.algorithms.impala import IMPALA
from rl.algorithms.maddpg import MADDPG
from rl.algorithms.oac import OAC
from rl.algorithms.policy_gradient import PolicyGradient
from rl.algorithms.ppo import PPO
from rl.algorithms.sac import SAC
from rl.algorithms.td3 import TD3

__all__ = ["A2C", "CMAES", "DDPG", "DQN", "ES", "IMPALA", "PPO", "SAC", "TD3", "NoiseTable", "PolicyGradient"]
__all__ += ["MADDPG", "OAC"]
