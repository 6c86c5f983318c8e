"""PARL's ``OAC(model, gamma, tau, alpha, beta, delta, actor_lr, critic_lr)``: :class:`rl.OAC`
(SAC's update, optimistic exploration) on views of the model, exploring as PARL's does
(``shift_from="sample"``: the upper bound linearised at a draw of the policy)."""

from __future__ import annotations

import torch

import rl
from actorrt.compat.parl.algorithms._views import number
from actorrt.compat.parl.algorithms.sac import SAC
from actorrt.compat.parl.core.torch.model import Model

__all__ = ["OAC"]


class OAC(SAC):
    """SAC's model; ``beta``: the weight of ``sigma_Q`` in the upper bound; ``delta``: the KL bound of the shift."""

    rl_algorithm: rl.OAC

    def __init__(
        self,
        model: Model,
        gamma: float | None = None,
        tau: float | None = None,
        alpha: float | None = None,
        beta: float | None = None,
        delta: float | None = None,
        actor_lr: float | None = None,
        critic_lr: float | None = None,
    ) -> None:
        self.beta = number("OAC", "beta", beta)
        self.delta = number("OAC", "delta", delta)
        super().__init__(model, gamma, tau, alpha, actor_lr, critic_lr)

    def _build(self, actor: rl.SquashedGaussianActor, critic: rl.TwinQCritic) -> rl.SAC:
        return rl.OAC(
            actor,
            critic,
            actor_lr=self.actor_lr,
            critic_lr=self.critic_lr,
            gamma=self.gamma,
            tau=self.tau,
            alpha=self.alpha,
            autotune_alpha=False,
            beta_ub=self.beta,
            delta=self.delta,
            shift_from="sample",
        )

    def get_optimistic_exploration_action(self, obs: torch.Tensor) -> torch.Tensor:
        """An action of the optimistic exploration policy ``tanh(N(mu_E, Sigma_T))``, ``[B, act]``."""
        return self.rl_algorithm.sample(obs).action
