"""PARL's ``SAC(model, gamma, tau, alpha, actor_lr, critic_lr)``: :class:`rl.SAC`'s update on
views of the model, with PARL's fixed temperature ``alpha`` (no tuning)."""

from __future__ import annotations

from typing import cast

import torch

import rl
from actorrt.compat.parl.algorithms._off_policy import OffPolicyFace, replay_batch
from actorrt.compat.parl.algorithms._views import CriticView, GaussianPolicyView, number, scalar
from actorrt.compat.parl.core.torch.model import Model

__all__ = ["SAC"]


class SAC(OffPolicyFace):
    """``model.policy(obs)``: ``(mean, log_std)`` of the Gaussian the tanh squashes into [-1, 1];
    ``model.value(obs, action)``: ``(Q1, Q2)``, each ``[B, 1]``."""

    rl_algorithm: rl.SAC

    def __init__(
        self,
        model: Model,
        gamma: float | None = None,
        tau: float | None = None,
        alpha: float | None = None,
        actor_lr: float | None = None,
        critic_lr: float | None = None,
    ) -> None:
        super().__init__(model, gamma, tau, actor_lr, critic_lr)
        self.alpha = number(type(self).__name__, "alpha", alpha)
        self.actor = GaussianPolicyView(model)
        self.rl_algorithm = self._build(
            cast(rl.SquashedGaussianActor, self.actor), cast(rl.TwinQCritic, CriticView(model))
        )
        self._share_target(self.rl_algorithm.target_critic)
        self.actor_optimizer = self.rl_algorithm.actor_optimizer
        self.critic_optimizer = self.rl_algorithm.critic_optimizer

    def _build(self, actor: rl.SquashedGaussianActor, critic: rl.TwinQCritic) -> rl.SAC:
        # actor and critic: views with the calls rl.SAC makes (sample, greedy, forward; low, scale, action_dim)
        return rl.SAC(
            actor,
            critic,
            actor_lr=self.actor_lr,
            critic_lr=self.critic_lr,
            gamma=self.gamma,
            tau=self.tau,
            alpha=self.alpha,
            autotune_alpha=False,
        )

    def predict(self, obs: torch.Tensor) -> torch.Tensor:
        """``tanh(mean)``."""
        return self.actor.greedy(obs)

    def sample(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """A reparameterised ``(action, log_prob)``, ``[B, act]`` and ``[B, 1]``."""
        action, log_prob = self.actor.sample(obs)
        return action, log_prob.unsqueeze(-1)

    def learn(
        self,
        obs: torch.Tensor,
        action: torch.Tensor,
        reward: torch.Tensor,
        next_obs: torch.Tensor,
        terminal: torch.Tensor,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """One critic and one actor step, then the target critics; returns ``(critic_loss, actor_loss)``."""
        self.actor.action_dim = action.shape[-1]
        stats = self.rl_algorithm.learn(replay_batch(obs, action, reward, next_obs, terminal))
        return scalar(stats["critic_loss"]), scalar(stats["actor_loss"])
