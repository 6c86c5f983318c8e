"""rl: PARL's Model / Algorithm / Agent abstractions on torch and gymnasium.

- :class:`Model` (an ``nn.Module`` with numpy weight exchange and soft updates),
- :class:`Algorithm` (losses and optimizer; never touches environments),
- :class:`Agent` (numpy in/out, save/restore),
- :class:`Collector` (vector-env rollouts), :class:`Rollout`,
- :class:`UniformReplay` / :class:`PrioritizedReplay` (off-policy replay), :class:`HerReplay`,
- :class:`NormalizingAgent` (observation and reward normalisation that travels with the weights),
- :mod:`rl.ops` (``vtrace``, ``gae``, off-policy targets), :mod:`rl.algorithms` (PolicyGradient,
  DQN, A2C, PPO, IMPALA, DDPG, TD3, SAC, OAC, MADDPG, ES, CMAES).
"""

from rl import ops
from rl.agent import Agent, AgentStep
from rl.algorithm import Algorithm, PolicyStep
from rl.algorithms import A2C, CMAES, DDPG, DQN, ES, IMPALA, MADDPG, OAC, PPO, SAC, TD3, NoiseTable, PolicyGradient
from rl.collector import Collector, CollectorConfig
from rl.config import parse_config, use_torch_threads, user_errors
from rl.her import HerReplay
from rl.logger import TrainingLogger
from rl.model import Model
from rl.networks import (
    ActorCritic,
    ActorCriticModel,
    CentralisedCritic,
    DeterministicActor,
    MADDPGActor,
    MLPPolicy,
    QCritic,
    QNetwork,
    SquashedGaussianActor,
    TwinQCritic,
)
from rl.normalization import NormalizingAgent
from rl.replay import PrioritizedReplay, ReplayBatch, UniformReplay
from rl.storage import Rollout, Transition
from rl.trainer import (
    TrainingRun,
    TrainResult,
    result_line,
    run_training,
    train_dqn,
    train_off_policy,
    train_on_policy,
)

__all__ = [
    "A2C",
    "CMAES",
    "DDPG",
    "DQN",
    "ES",
    "IMPALA",
    "MADDPG",
    "OAC",
    "PPO",
    "SAC",
    "TD3",
    "ActorCritic",
    "ActorCriticModel",
    "Agent",
    "AgentStep",
    "Algorithm",
    "CentralisedCritic",
    "Collector",
    "CollectorConfig",
    "DeterministicActor",
    "HerReplay",
    "MADDPGActor",
    "MLPPolicy",
    "Model",
    "NoiseTable",
    "NormalizingAgent",
    "PolicyGradient",
    "PolicyStep",
    "PrioritizedReplay",
    "QCritic",
    "QNetwork",
    "ReplayBatch",
    "Rollout",
    "SquashedGaussianActor",
    "TrainResult",
    "TrainingLogger",
    "TrainingRun",
    "Transition",
    "TwinQCritic",
    "UniformReplay",
    "ops",
    "parse_config",
    "result_line",
    "run_training",
    "train_dqn",
    "train_off_policy",
    "train_on_policy",
    "use_torch_threads",
    "user_errors",
]
