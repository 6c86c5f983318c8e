"""PARL's ``DDPG(model, gamma, tau, actor_lr, critic_lr)``: :class:`rl.DDPG`'s update on views
of the model (critic step, actor step, soft update of both target networks, in PARL's order)."""

from __future__ import annotations

from typing import cast

import rl
from actorrt.compat.parl.algorithms._off_policy import Opt, ReplayFace
from actorrt.compat.parl.algorithms._views import CriticView, PolicyView
from actorrt.compat.parl.core.torch.model import Model

__all__ = ["DDPG"]


class DDPG(ReplayFace):
    """``model.policy(obs)``: actions in [-1, 1]; ``model.value(obs, action)``: Q ``[B, 1]``.
    ``learn`` returns ``(critic_loss, actor_loss)``."""

    def __init__(
        self, model: Model, gamma: Opt = None, tau: Opt = None, actor_lr: Opt = None, critic_lr: Opt = None
    ) -> None:
        super().__init__(model, gamma, tau, actor_lr, critic_lr)
        actor = PolicyView(model)
        critic = cast(rl.QCritic, CriticView(model))
        # The views answer the calls rl.DDPG makes of its networks (forward; low, scale).
        ddpg = rl.DDPG(cast(rl.DeterministicActor, actor), critic, self.actor_lr, self.critic_lr, self.gamma, self.tau)
        self._adopt(actor, ddpg)
