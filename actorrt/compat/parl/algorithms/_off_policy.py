"""What PARL's DDPG, TD3, SAC and OAC faces share: the views of the model, the shared target
model, PARL's ``sync_target`` and its ``learn`` arguments as an ``rl`` batch."""

from __future__ import annotations

from typing import cast

import torch

from actorrt.compat.parl.algorithms._views import CriticView, method, number, require_methods, soft_update_all
from actorrt.compat.parl.core.torch.algorithm import Algorithm
from actorrt.compat.parl.core.torch.model import Model
from rl.replay import ReplayBatch

__all__ = ["OffPolicyFace", "replay_batch"]


def replay_batch(
    obs: torch.Tensor,
    action: torch.Tensor,
    reward: torch.Tensor,
    next_obs: torch.Tensor,
    terminal: torch.Tensor,
) -> ReplayBatch[torch.Tensor]:
    """PARL's ``learn`` arguments (``reward`` and ``terminal`` ``[B, 1]``) as ``rl``'s batch (``[B]``, uniform weights)."""
    rewards = reward.reshape(-1)
    ones = torch.ones_like(rewards)
    terminated = terminal.reshape(-1)
    return ReplayBatch(obs, action, rewards, next_obs, terminated, torch.zeros_like(terminated), ones, ones)


class OffPolicyFace(Algorithm):
    """``model.policy``, ``model.value``, ``model.get_actor_params``, ``model.get_critic_params``
    checked; ``gamma``, ``tau``, ``actor_lr``, ``critic_lr`` kept as PARL's attributes."""

    def __init__(
        self,
        model: Model,
        gamma: float | None,
        tau: float | None,
        actor_lr: float | None,
        critic_lr: float | None,
        *methods: str,
    ) -> None:
        name = type(self).__name__
        require_methods(model, name, "value", "policy", *methods, "get_actor_params", "get_critic_params")
        self.model = model
        self.gamma = number(name, "gamma", gamma)
        self.tau = number(name, "tau", tau)
        self.actor_lr = number(name, "actor_lr", actor_lr)
        self.critic_lr = number(name, "critic_lr", critic_lr)

    def _share_target(self, target_critic: torch.nn.Module) -> None:
        """``self.target_model``: the PARL model behind the ``rl`` algorithm's target critic (and target actor)."""
        self.target_model = cast(CriticView, target_critic).parl_model

    def predict(self, obs: torch.Tensor) -> torch.Tensor:
        """``model.policy(obs)``: the action to evaluate with."""
        return cast(torch.Tensor, method(self.model, "policy")(obs))

    def sync_target(self, decay: float | None = None) -> None:
        """Every parameter of the target model to ``decay * target + (1 - decay) * model``
        (default ``decay = 1 - tau``; ``0`` copies)."""
        soft_update_all(self.model, self.target_model, 1.0 - self.tau if decay is None else decay)
