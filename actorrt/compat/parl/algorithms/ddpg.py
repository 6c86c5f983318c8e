"""PARL's ``DDPG(model, gamma, tau, actor_lr, critic_lr)``: :class:`rl.DDPG`'s update on views
of the model (critic step, actor step, soft update of both target networks, in PARL's order)."""

from __future__ import annotations

from typing import cast

import torch

import rl
from actorrt.compat.parl.algorithms._off_policy import OffPolicyFace, replay_batch
from actorrt.compat.parl.algorithms._views import CriticView, PolicyView, scalar
from actorrt.compat.parl.core.torch.model import Model

__all__ = ["DDPG"]


class DDPG(OffPolicyFace):
    """``model.policy(obs)``: actions in [-1, 1]; ``model.value(obs, action)``: Q ``[B, 1]``."""

    def __init__(
        self,
        model: Model,
        gamma: float | None = None,
        tau: float | None = None,
        actor_lr: float | None = None,
        critic_lr: float | None = None,
    ) -> None:
        super().__init__(model, gamma, tau, actor_lr, critic_lr)
        self.actor = PolicyView(model)
        self.rl_algorithm = rl.DDPG(
            cast(rl.DeterministicActor, self.actor),  # the calls rl.DDPG makes: forward, low, scale
            cast(rl.QCritic, CriticView(model)),
            actor_lr=self.actor_lr,
            critic_lr=self.critic_lr,
            gamma=self.gamma,
            tau=self.tau,
        )
        self._share_target(self.rl_algorithm.target_critic)
        self.actor_optimizer = self.rl_algorithm.actor_optimizer
        self.critic_optimizer = self.rl_algorithm.critic_optimizer

    def learn(
        self,
        obs: torch.Tensor,
        action: torch.Tensor,
        reward: torch.Tensor,
        next_obs: torch.Tensor,
        terminal: torch.Tensor,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """One critic and one actor step, then the targets; returns ``(critic_loss, actor_loss)``."""
        self.actor.action_dim = action.shape[-1]
        stats = self.rl_algorithm.learn(replay_batch(obs, action, reward, next_obs, terminal))
        return scalar(stats["critic_loss"]), scalar(stats["actor_loss"])
