"""What DDPG, TD3 and SAC share: acting in a bounded Box, uniform warm-up actions, target
networks, and the TD errors that prioritised replay needs."""

from __future__ import annotations

import copy

import numpy as np
import torch

from rl import ops
from rl.algorithm import Algorithm
from rl.model import Model
from rl.networks import DeterministicActor, SquashedGaussianActor

__all__ = ["OffPolicyAlgorithm", "frozen_copy", "weighted_mse"]


def frozen_copy(model: Model) -> Model:
    """A target network: a deep copy that never takes gradients."""
    target = copy.deepcopy(model)
    target.requires_grad_(False)
    return target


def weighted_mse(pred: torch.Tensor, target: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """``mean(w_i (pred_i - target_i)^2)``: the squared TD error, importance-weighted for
    prioritised replay (``w = 1`` for uniform replay gives the plain mean squared error)."""
    return (weights * (pred - target).pow(2)).mean()


class OffPolicyAlgorithm(Algorithm):
    """Base of the continuous-control off-policy algorithms.

    ``self.model`` is the actor (the acting model whose weights collectors get). While
    :attr:`uniform_exploration` is set (the training loop sets it until ``learning_starts``),
    :meth:`sample` draws actions uniformly in the bounds. After each :meth:`learn`,
    :attr:`td_errors` holds the batch's TD errors (numpy) for prioritised replay.
    """

    model: DeterministicActor | SquashedGaussianActor

    def __init__(self, model: DeterministicActor | SquashedGaussianActor, fused: bool | None = None) -> None:
        super().__init__(model, fused)
        self.uniform_exploration = False
        """Act uniformly at random in the bounds (warm-up)."""
        self.td_errors: np.ndarray = np.zeros(0, np.float32)
        """``y - Q(s, a)`` of the last batch learned from (first critic where there are two)."""
        self.updates = 0
        """Gradient steps taken (of the critic)."""

    def _uniform(self, like: torch.Tensor) -> torch.Tensor:
        """Uniform actions, one row per observation in ``like``."""
        u = torch.rand(like.shape[0], self.model.action_dim)
        return self.model.low + (self.model.high - self.model.low) * u

    def _soft_update(self, target: Model, source: Model, tau: float) -> None:
        """Polyak-average the parameters (buffers such as the action bounds are constant)."""
        ops.soft_update_(list(target.parameters()), list(source.parameters()), tau, fused=self.fused)
