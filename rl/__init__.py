"""rl: PARL's Model / Algorithm / Agent abstractions on torch and gymnasium.

- :class:`Model` (an ``nn.Module`` with numpy weight exchange and soft updates),
- :class:`Algorithm` (losses and optimizer; never touches environments),
- :class:`Agent` (numpy in/out, save/restore),
- :class:`Collector` (vector-env rollouts), :class:`ReplayBuffer`, :class:`Rollout`,
- :class:`UniformReplay` / :class:`PrioritizedReplay` (off-policy replay), :class:`HerReplay`,
- :class:`NormalizingAgent` (observation and reward normalisation that travels with the weights),
- :mod:`rl.ops` (``vtrace``, ``gae``, off-policy targets), :mod:`rl.algorithms` (PolicyGradient,
  DQN, A2C, PPO, IMPALA, DDPG, TD3, SAC, ES).
"""

import os as _os

import torch as _torch

# One torch thread per process by default: tiny nets get slower with two threads on small
# machines, and collectors run many processes side by side. Override with RL_TORCH_THREADS.
_torch.set_num_threads(int(_os.environ.get("RL_TORCH_THREADS", "1")))

from rl import ops  # noqa: E402
from rl.agent import Agent, AgentStep  # noqa: E402
from rl.algorithm import Algorithm, PolicyStep  # noqa: E402
from rl.algorithms import A2C, DDPG, DQN, ES, IMPALA, PPO, SAC, TD3, NoiseTable, PolicyGradient  # noqa: E402
from rl.collector import Collector, CollectorConfig  # noqa: E402
from rl.config import parse_config  # noqa: E402
from rl.logger import TrainingLogger  # noqa: E402
from rl.model import Model  # noqa: E402
from rl.her import HerReplay  # noqa: E402
from rl.models import (  # noqa: E402
    ActorCritic,
    DeterministicActor,
    MLPPolicy,
    QCritic,
    QNetwork,
    SquashedGaussianActor,
    TwinQCritic,
)
from rl.normalization import NormalizingAgent  # noqa: E402
from rl.replay import PrioritizedReplay, ReplayBatch, UniformReplay  # noqa: E402
from rl.storage import ReplayBuffer, Rollout, Transition  # noqa: E402
from rl.trainer import (  # noqa: E402
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
    "DDPG",
    "DQN",
    "ES",
    "IMPALA",
    "PPO",
    "SAC",
    "TD3",
    "ActorCritic",
    "Agent",
    "AgentStep",
    "Algorithm",
    "Collector",
    "CollectorConfig",
    "DeterministicActor",
    "HerReplay",
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
    "ReplayBuffer",
    "Rollout",
    "SquashedGaussianActor",
    "TrainResult",
    "TrainingRun",
    "TrainingLogger",
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
]
