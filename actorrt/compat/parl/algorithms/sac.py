"""PARL's ``SAC(model, gamma, tau, alpha, actor_lr, critic_lr)``: :class:`rl.SAC`'s update on
views of the model, with PARL's fixed temperature ``alpha`` (no tuning)."""

from __future__ import annotations

from typing import Any, cast

import torch

import rl
from actorrt.compat.parl.algorithms._off_policy import Opt, ReplayFace
from actorrt.compat.parl.algorithms._views import CriticView, GaussianPolicyView, number
from actorrt.compat.parl.core.torch.model import Model

__all__ = ["SAC"]


class SAC(ReplayFace):
    """``model.policy(obs)``: ``(mean, log_std)`` of the Gaussian the tanh squashes into [-1, 1];
    ``model.value(obs, action)``: ``(Q1, Q2)``, each ``[B, 1]``. ``learn`` returns
    ``(critic_loss, actor_loss)``."""

    rl_algorithm: rl.SAC
    actor: GaussianPolicyView
    rl_class: type[rl.SAC] = rl.SAC

    def __init__(
        self,
        model: Model,
        gamma: Opt = None,
        tau: Opt = None,
        alpha: Opt = None,
        actor_lr: Opt = None,
        critic_lr: Opt = None,
    ) -> None:
        super().__init__(model, gamma, tau, actor_lr, critic_lr)
        self.alpha = number(type(self).__name__, "alpha", alpha)
        actor = GaussianPolicyView(model)
        # The views answer the calls rl.SAC makes of its networks (sample, greedy, forward; low, scale, action_dim).
        settings: dict[str, Any] = {"actor_lr": self.actor_lr, "critic_lr": self.critic_lr, "gamma": self.gamma}
        settings |= {"tau": self.tau, "alpha": self.alpha, "autotune_alpha": False, **self._options()}
        sac = self.rl_class(cast(rl.SquashedGaussianActor, actor), cast(rl.TwinQCritic, CriticView(model)), **settings)
        self._adopt(actor, sac)

    def _options(self) -> dict[str, Any]:
        """More keyword arguments of :attr:`rl_class` (OAC's)."""
        return {}

    def predict(self, obs: torch.Tensor) -> torch.Tensor:
        """``tanh(mean)``."""
        return self.actor.greedy(obs)

    def sample(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """A reparameterised ``(action, log_prob)``, ``[B, act]`` and ``[B, 1]``."""
        action, log_prob = self.actor.sample(obs)
        return action, log_prob.unsqueeze(-1)
