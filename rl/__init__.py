"""rl: PARL's Model / Algorithm / Agent abstractions on torch and gymnasium.

- :class:`Model` (an ``nn.Module`` with numpy weight exchange and soft updates),
- :class:`Algorithm` (losses and optimizer; never touches environments),
- :class:`Agent` (numpy in/out, save/restore),
- :class:`Collector` (vector-env rollouts), :class:`ReplayBuffer`, :class:`Rollout`,
- :mod:`rl.ops` (``vtrace``, ``gae``), :mod:`rl.algorithms` (PolicyGradient, DQN, A2C, PPO, IMPALA).
"""

from rl import ops  # noqa: E402
from rl.agent import Agent, AgentStep  # noqa: E402
from rl.algorithm import Algorithm, PolicyStep  # noqa: E402
from rl.algorithms import A2C, DQN, IMPALA, PPO, PolicyGradient  # noqa: E402
from rl.collector import Collector, CollectorConfig  # noqa: E402
from rl.config import parse_config, use_torch_threads  # noqa: E402
from rl.logger import TrainingLogger  # noqa: E402
from rl.model import Model  # noqa: E402
from rl.models import ActorCritic, QNetwork  # noqa: E402
from rl.storage import ReplayBuffer, Rollout, Transition  # noqa: E402
from rl.trainer import TrainingRun, TrainResult, result_line, run_training, train_dqn, train_on_policy  # noqa: E402

__all__ = [
    "A2C",
    "DQN",
    "IMPALA",
    "PPO",
    "ActorCritic",
    "Agent",
    "AgentStep",
    "Algorithm",
    "Collector",
    "CollectorConfig",
    "Model",
    "PolicyGradient",
    "PolicyStep",
    "QNetwork",
    "ReplayBuffer",
    "Rollout",
    "TrainResult",
    "TrainingRun",
    "TrainingLogger",
    "Transition",
    "ops",
    "parse_config",
    "result_line",
    "run_training",
    "train_dqn",
    "train_on_policy",
    "use_torch_threads",
]
