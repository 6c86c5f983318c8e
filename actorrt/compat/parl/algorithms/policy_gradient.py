"""PARL's ``PolicyGradient(model, lr)``: REINFORCE on returns the script computes, as
:meth:`rl.PolicyGradient.update` with PARL's settings (no baseline, no normalisation, no
clipping; Adam with torch's default ``eps``)."""

from __future__ import annotations

from typing import cast

import torch

import rl
from actorrt.compat.parl.algorithms._views import ActorCriticView, number, require_methods, scalar
from actorrt.compat.parl.core.torch.algorithm import Algorithm
from actorrt.compat.parl.core.torch.model import Model

__all__ = ["PolicyGradient"]


class PolicyGradient(Algorithm):
    """``model(obs)`` gives the action probabilities."""

    def __init__(self, model: Model, lr: float) -> None:
        require_methods(model, "PolicyGradient", "forward")
        self.model = model
        self.rl_algorithm = rl.PolicyGradient(
            ActorCriticView(model, "probs"),
            lr=number("PolicyGradient", "lr", lr),
            vf_coef=0.0,
            normalize_advantages=False,
            max_grad_norm=None,
            optimizer_eps=1e-8,
        )
        self.optimizer = self.rl_algorithm.optimizer

    def predict(self, obs: torch.Tensor) -> torch.Tensor:
        """The action probabilities ``model(obs)``."""
        return cast(torch.Tensor, self.model(obs))

    def learn(self, obs: torch.Tensor, action: torch.Tensor, reward: torch.Tensor) -> torch.Tensor:
        """One step on ``-mean(log pi(action|obs) * reward)`` (``reward``: each step's return);
        returns that loss."""
        stats = self.rl_algorithm.update(obs, action.reshape(-1), reward.reshape(-1))
        return scalar(stats["policy_loss"])
