"""What PARL's DDPG, TD3, SAC, OAC and MADDPG faces share: the checks of the model and the
settings, the ``rl`` algorithm and its target model, PARL's ``sync_target``, and (all but
MADDPG) ``learn(obs, action, reward, next_obs, terminal)`` as an ``rl`` batch."""

from __future__ import annotations

from typing import cast

import torch
from torch import Tensor

import rl
from actorrt.compat.parl.algorithms._views import (
    CriticView,
    PolicyView,
    method,
    number,
    require_methods,
    scalar,
    soft_update_all,
)
from actorrt.compat.parl.core.torch.algorithm import Algorithm
from actorrt.compat.parl.core.torch.model import Model
from rl.replay import ReplayBatch

__all__ = ["OffPolicyFace", "Opt", "ReplayFace"]

Opt = float | None
"""A setting of PARL's signatures: ``None`` by default, required (a ``TypeError`` names it)."""


class OffPolicyFace(Algorithm):
    """``model.policy``, ``model.value``, ``model.get_actor_params``, ``model.get_critic_params``
    checked; ``gamma``, ``tau``, ``actor_lr``, ``critic_lr`` kept as PARL's attributes;
    ``target_model``: the PARL model behind the ``rl`` algorithm's target networks."""

    rl_algorithm: rl.DDPG | rl.TD3 | rl.SAC | rl.MADDPG

    def __init__(self, model: Model, gamma: Opt, tau: Opt, actor_lr: Opt, critic_lr: Opt, *methods: str) -> None:
        name = type(self).__name__
        require_methods(model, name, "value", "policy", *methods, "get_actor_params", "get_critic_params")
        self.model = model
        self.gamma = number(name, "gamma", gamma)
        self.tau = number(name, "tau", tau)
        self.actor_lr = number(name, "actor_lr", actor_lr)
        self.critic_lr = number(name, "critic_lr", critic_lr)

    def _adopt(self, actor: PolicyView, rl_algorithm: rl.DDPG | rl.TD3 | rl.SAC | rl.MADDPG) -> None:
        """The ``rl`` algorithm built on ``actor`` (a view of the model), its target model and optimisers."""
        self.actor = actor
        self.rl_algorithm = rl_algorithm
        self.target_model = cast(CriticView, rl_algorithm.target_critic).parl_model
        self.actor_optimizer = rl_algorithm.actor_optimizer
        self.critic_optimizer = rl_algorithm.critic_optimizer

    def predict(self, obs: torch.Tensor) -> torch.Tensor:
        """``model.policy(obs)``: the action to evaluate with."""
        return cast(torch.Tensor, method(self.model, "policy")(obs))

    def sync_target(self, decay: float | None = None) -> None:
        """Every parameter of the target model to ``decay * target + (1 - decay) * model``
        (default ``decay = 1 - tau``; ``0`` copies)."""
        soft_update_all(self.model, self.target_model, 1.0 - self.tau if decay is None else decay)


class ReplayFace(OffPolicyFace):
    """DDPG, TD3, SAC, OAC: ``learn`` on a batch of transitions (``reward``, ``terminal``: ``[B, 1]``)."""

    rl_algorithm: rl.DDPG | rl.TD3 | rl.SAC
    returns_losses = True
    """Whether ``learn`` returns ``(critic_loss, actor_loss)`` (TD3's returns nothing)."""

    def learn(
        self, obs: Tensor, action: Tensor, reward: Tensor, next_obs: Tensor, terminal: Tensor
    ) -> tuple[Tensor, Tensor] | None:
        """The ``rl`` algorithm's update on the batch; ``(critic_loss, actor_loss)`` as 0-d tensors."""
        self.actor.action_dim = action.shape[-1]  # rl draws its noise with it
        rewards = reward.reshape(-1)
        ones = torch.ones_like(rewards)
        terminated = terminal.reshape(-1)
        batch = ReplayBatch(obs, action, rewards, next_obs, terminated, torch.zeros_like(terminated), ones, ones)
        stats = self.rl_algorithm.learn(batch)
        return (scalar(stats["critic_loss"]), scalar(stats["actor_loss"])) if self.returns_losses else None
