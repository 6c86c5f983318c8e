"""PARL's ``TD3(model, gamma, tau, actor_lr, critic_lr, policy_noise, noise_clip, policy_freq)``:
:class:`rl.TD3`'s update on views of the model (clipped double Q, target policy smoothing, the
actor and the targets every ``policy_freq`` critic steps, as PARL's)."""

from __future__ import annotations

from typing import cast

import torch

import rl
from actorrt.compat.parl.algorithms._off_policy import OffPolicyFace, replay_batch
from actorrt.compat.parl.algorithms._views import CriticView, PolicyView, number
from actorrt.compat.parl.core.torch.model import Model

__all__ = ["TD3"]


class TD3(OffPolicyFace):
    """``model.policy(obs)``: actions in [-1, 1]; ``model.value(obs, action)``: ``(Q1, Q2)``;
    ``model.Q1(obs, action)`` is checked for, as in PARL (the actor's loss takes ``Q1`` from ``value``)."""

    def __init__(
        self,
        model: Model,
        gamma: float | None = None,
        tau: float | None = None,
        actor_lr: float | None = None,
        critic_lr: float | None = None,
        policy_noise: float = 0.2,
        noise_clip: float = 0.5,
        policy_freq: int = 2,
    ) -> None:
        super().__init__(model, gamma, tau, actor_lr, critic_lr, "Q1")
        self.policy_noise = number("TD3", "policy_noise", policy_noise)
        self.noise_clip = number("TD3", "noise_clip", noise_clip)
        self.policy_freq = policy_freq
        self.actor = PolicyView(model)
        self.rl_algorithm = rl.TD3(
            cast(rl.DeterministicActor, self.actor),  # the calls rl.TD3 makes: forward, low, high, scale
            cast(rl.TwinQCritic, CriticView(model)),
            actor_lr=self.actor_lr,
            critic_lr=self.critic_lr,
            gamma=self.gamma,
            tau=self.tau,
            policy_noise=self.policy_noise,
            noise_clip=self.noise_clip,
            policy_delay=policy_freq,
        )
        self._share_target(self.rl_algorithm.target_critic)
        self.actor_optimizer = self.rl_algorithm.actor_optimizer
        self.critic_optimizer = self.rl_algorithm.critic_optimizer

    @property
    def total_it(self) -> int:
        """Critic steps taken."""
        return self.rl_algorithm.updates

    def learn(
        self,
        obs: torch.Tensor,
        action: torch.Tensor,
        reward: torch.Tensor,
        next_obs: torch.Tensor,
        terminal: torch.Tensor,
    ) -> None:
        """One critic step; every ``policy_freq``-th, an actor step and the targets. Returns nothing, as PARL's."""
        self.actor.action_dim = action.shape[-1]
        self.rl_algorithm.learn(replay_batch(obs, action, reward, next_obs, terminal))
