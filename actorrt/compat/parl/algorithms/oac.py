"""PARL's ``OAC(model, gamma, tau, alpha, beta, delta, actor_lr, critic_lr)``: :class:`rl.OAC`
(SAC's update, optimistic exploration) on views of the model, exploring as PARL's does
(``shift_from="sample"``: the upper bound linearised at a draw of the policy)."""

from __future__ import annotations

from typing import Any

import torch

import rl
from actorrt.compat.parl.algorithms._off_policy import Opt
from actorrt.compat.parl.algorithms._views import number
from actorrt.compat.parl.algorithms.sac import SAC
from actorrt.compat.parl.core.torch.model import Model

__all__ = ["OAC"]


class OAC(SAC):
    """SAC's model; ``beta``: the weight of ``sigma_Q`` in the upper bound; ``delta``: the KL bound of the shift."""

    rl_algorithm: rl.OAC
    rl_class = rl.OAC

    def __init__(
        self,
        model: Model,
        gamma: Opt = None,
        tau: Opt = None,
        alpha: Opt = None,
        beta: Opt = None,
        delta: Opt = None,
        actor_lr: Opt = None,
        critic_lr: Opt = None,
    ) -> None:
        self.beta = number("OAC", "beta", beta)
        self.delta = number("OAC", "delta", delta)
        super().__init__(model, gamma, tau, alpha, actor_lr, critic_lr)

    def _options(self) -> dict[str, Any]:
        return {"beta_ub": self.beta, "delta": self.delta, "shift_from": "sample"}

    def get_optimistic_exploration_action(self, obs: torch.Tensor) -> torch.Tensor:
        """An action of the optimistic exploration policy ``tanh(N(mu_E, Sigma_T))``, ``[B, act]``."""
        return self.rl_algorithm.sample(obs).action
