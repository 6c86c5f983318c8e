"""Distributed learners over actorrt: remote collectors, gradient workers and a replay actor, one
configurable :class:`Learner` with A2C, IMPALA and off-policy presets, and :class:`ESLearner` for
evolution strategies."""

from rl.learners.es import ESLearner, ESWorker
from rl.learners.learner import Learner
from rl.learners.progress import LearnerResult
from rl.learners.scheme import Scheme, SchemeError, a2c_scheme, impala_scheme, off_policy_scheme
from rl.learners.workers import (
    GradientWorker,
    RemoteCollector,
    ReplayActor,
    ReplayLostError,
    WorkerFailedError,
    concat_rollouts,
)

__all__ = [
    "ESLearner",
    "ESWorker",
    "GradientWorker",
    "Learner",
    "LearnerResult",
    "RemoteCollector",
    "ReplayActor",
    "ReplayLostError",
    "Scheme",
    "SchemeError",
    "WorkerFailedError",
    "a2c_scheme",
    "concat_rollouts",
    "impala_scheme",
    "off_policy_scheme",
]
