"""Distributed learners over actorrt: remote collectors and gradient workers, one configurable
:class:`Learner` with A2C and IMPALA presets, and :class:`ESLearner` for evolution strategies."""

from rl.learners.es import ESLearner, ESWorker
from rl.learners.learner import (
    Learner,
    LearnerResult,
    Scheme,
    SchemeError,
    a2c_scheme,
    impala_scheme,
    off_policy_scheme,
)
from rl.learners.workers import GradientWorker, RemoteCollector, concat_rollouts

__all__ = [
    "ESLearner",
    "ESWorker",
    "GradientWorker",
    "Learner",
    "LearnerResult",
    "RemoteCollector",
    "Scheme",
    "SchemeError",
    "a2c_scheme",
    "concat_rollouts",
    "impala_scheme",
    "off_policy_scheme",
]
