"""TD3: twin delayed DDPG (Fujimoto et al. 2018, Algorithm 1).

Three changes to DDPG against overestimation:

    clipped double Q:          y = r + gamma (1 - terminated) min_{i=1,2} Q'_i(s', a')
    target policy smoothing:   a' = clip(mu'(s') + clip(eps, -c, c), low, high),  eps ~ N(0, sigma~^2)
    delayed policy updates:    the actor and all targets move every d-th critic update (d = 2)

    critics: L = sum_i mean (y - Q_i(s, a))^2
    actor:   maximise Q_1(s, mu(s))
    targets: theta'_i <- tau theta_i + (1 - tau) theta'_i,  phi' <- tau phi + (1 - tau) phi'

Noise scales (acting ``sigma``, smoothing ``sigma~`` and clip ``c``) are fractions of each
action's half-range, so the paper's 0.1 / 0.2 / 0.5 for actions in ``[-1, 1]`` carry over to
other bounds.
"""

from __future__ import annotations

import torch

from rl import backprop, ops
from rl.algorithms._off_policy import DeterministicOffPolicy, check_non_negative, weighted_mse
from rl.fused import FusedMLPPair
from rl.networks import DeterministicActor, TwinQCritic
from rl.replay import ReplayBatch

__all__ = ["TD3"]


class TD3(DeterministicOffPolicy):
    """TD3 with the paper's defaults."""

    _written_critic = TwinQCritic

    def __init__(
        self,
        actor: DeterministicActor,
        critic: TwinQCritic,
        actor_lr: float = 3e-4,
        critic_lr: float = 3e-4,
        gamma: float = 0.99,
        tau: float = 0.005,
        exploration_noise: float = 0.1,
        policy_noise: float = 0.2,
        noise_clip: float = 0.5,
        policy_delay: int = 2,
        fused: bool | None = None,
        autocast: torch.dtype | None = None,
        compile: bool = False,
    ) -> None:
        if policy_delay < 1:
            raise ValueError(
                f"policy_delay must be >= 1 (1: the actor updates with every critic update), got {policy_delay}"
            )
        super().__init__(actor, critic, actor_lr, critic_lr, gamma, tau, exploration_noise, fused, autocast, compile)
        self.policy_noise = check_non_negative("policy_noise", policy_noise)
        self.noise_clip = check_non_negative("noise_clip", noise_clip)
        """A negative clip would turn the smoothing noise into a constant ``|noise_clip|`` bias."""
        self.policy_delay = policy_delay
        self._last_actor_loss = float("nan")

    def learn(self, batch: ReplayBatch[torch.Tensor]) -> dict[str, float]:
        """One critic step; every ``policy_delay`` steps also an actor step and the target updates."""
        args = (
            batch.obs,
            batch.actions,
            batch.rewards,
            batch.terminated,
            batch.next_obs,
            batch.weights,
            torch.randn_like(batch.actions),
        )
        actor_step = (self.updates + 1) % self.policy_delay == 0
        critic_loss, q1, y, actor_loss = self._learn_step(actor_step, *args)
        self.updates += 1
        if actor_loss is not None:
            self._last_actor_loss = actor_loss

        self.td_errors = (y - q1).numpy()
        return {
            "critic_loss": critic_loss.item(),
            "actor_loss": self._last_actor_loss,
            "q_mean": float(q1.mean()),
        }

    def _smoothed_target_action(self, next_obs: torch.Tensor, noise: torch.Tensor) -> torch.Tensor:
        """``a' = clip(mu'(s') + clip(eps, -c, c), low, high)`` with ``eps = noise sigma~ scale``."""
        actor = self.model
        return ops.smoothed_target_action(
            self.target_actor(next_obs),
            noise * (self.policy_noise * actor.scale),
            self.noise_clip * actor.scale,
            actor.low,
            actor.high,
        )

    @torch.no_grad()
    def _critic_grads(
        self,
        obs: torch.Tensor,
        actions: torch.Tensor,
        rewards: torch.Tensor,
        terminated: torch.Tensor,
        next_obs: torch.Tensor,
        weights: torch.Tensor,
        noise: torch.Tensor,
    ) -> tuple[list[torch.Tensor], torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(dL/d critic parameters, L, Q_1(s, a), y)`` of :meth:`_critic_loss` written out
        (:mod:`rl.backprop`)."""
        target = self.target_critic.nets
        assert isinstance(target, FusedMLPPair)
        next_action = self._smoothed_target_action(next_obs, noise)
        next_q1, next_q2, _ = backprop.pair_forward(target, torch.cat([next_obs, next_action], dim=-1))
        y = ops.clipped_double_q_target(rewards, terminated, next_q1, next_q2, self.gamma)
        grads, loss, q1 = self._regression_grads(obs, actions, y, weights)
        return grads, loss, q1, y

    def _critic_loss(
        self,
        obs: torch.Tensor,
        actions: torch.Tensor,
        rewards: torch.Tensor,
        terminated: torch.Tensor,
        next_obs: torch.Tensor,
        weights: torch.Tensor,
        noise: torch.Tensor,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(L, Q_1(s, a), y)`` (the last two detached, float32); ``noise`` is the standard normal
        draw of the target policy smoothing (drawn outside, so a compiled loss does not draw it)."""
        with torch.no_grad(), self._mixed():
            next_action = self._smoothed_target_action(next_obs, noise)
            next_q1, next_q2 = self.target_critic(next_obs, next_action)
            y = ops.clipped_double_q_target(rewards, terminated, next_q1, next_q2, self.gamma).float()
        with self._mixed():
            q1, q2 = self.critic(obs, actions)
            loss = weighted_mse(q1, y, weights) + weighted_mse(q2, y, weights)
        return loss, q1.detach().float(), y
