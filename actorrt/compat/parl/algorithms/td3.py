"""PARL's ``TD3(model, gamma, tau, actor_lr, critic_lr, policy_noise, noise_clip, policy_freq)``:
:class:`rl.TD3`'s update on views of the model (clipped double Q, target policy smoothing, the
actor and the targets every ``policy_freq`` critic steps, as PARL's)."""

from __future__ import annotations

from typing import cast

import rl
from actorrt.compat.parl.algorithms._off_policy import Opt, ReplayFace
from actorrt.compat.parl.algorithms._views import CriticView, PolicyView, number
from actorrt.compat.parl.core.torch.model import Model

__all__ = ["TD3"]


class TD3(ReplayFace):
    """``model.policy(obs)``: actions in [-1, 1]; ``model.value(obs, action)``: ``(Q1, Q2)``;
    ``model.Q1(obs, action)`` is checked for, as in PARL (the actor's loss takes ``Q1`` from
    ``value``). ``learn`` returns nothing, as PARL's."""

    returns_losses = False

    def __init__(
        self,
        model: Model,
        gamma: Opt = None,
        tau: Opt = None,
        actor_lr: Opt = None,
        critic_lr: Opt = None,
        policy_noise: float = 0.2,
        noise_clip: float = 0.5,
        policy_freq: int = 2,
    ) -> None:
        super().__init__(model, gamma, tau, actor_lr, critic_lr, "Q1")
        self.policy_noise = number("TD3", "policy_noise", policy_noise)
        self.noise_clip = number("TD3", "noise_clip", noise_clip)
        self.policy_freq = policy_freq
        actor = PolicyView(model)
        # The views answer the calls rl.TD3 makes of its networks (forward; low, high, scale).
        td3 = rl.TD3(
            cast(rl.DeterministicActor, actor),
            cast(rl.TwinQCritic, CriticView(model)),
            self.actor_lr,
            self.critic_lr,
            self.gamma,
            self.tau,
            policy_noise=self.policy_noise,
            noise_clip=self.noise_clip,
            policy_delay=policy_freq,
        )
        self._adopt(actor, td3)

    @property
    def total_it(self) -> int:
        """Critic steps taken."""
        return self.rl_algorithm.updates
