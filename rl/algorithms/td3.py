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

:meth:`TD3.learn` takes these steps by autograd; where the fast paths apply (``written_out``), the
same steps with their gradients written out by hand
(:func:`rl.algorithms.written_out.deterministic_update`: equal to float rounding, and faster).
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from rl import ops
from rl.algorithms import written_out
from rl.algorithms._off_policy import DeterministicOffPolicy, check_non_negative
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
        noise = torch.randn_like(batch.actions)  # the target policy smoothing's standard normal draw
        actor_step = (self.updates + 1) % self.policy_delay == 0
        step = written_out.deterministic_update(self, actor_step, batch, noise)
        if step is not None:
            critic_loss, q1, y, actor_loss = step
        else:
            # 1. Clipped double Q: both critics regress onto y, at the smoothed target action (_target).
            critic_loss, q1, y = self._critic_step(batch, noise)
            actor_loss = None
            if actor_step:
                # 2. Delayed policy update: the actor climbs Q_1(s, mu(s)), the critics frozen;
                actor_loss = self._actor_step(batch.obs)
                # 3. and the target networks one Polyak step.
                self._soft_update_targets()
        self.updates += 1
        if actor_loss is not None:
            self._last_actor_loss = actor_loss
        self.td_errors = (y - q1).numpy()
        return {
            "critic_loss": critic_loss.item(),
            "actor_loss": self._last_actor_loss,
            "q_mean": float(q1.mean()),
        }

    def _target(
        self,
        rewards: torch.Tensor,
        terminated: torch.Tensor,
        next_obs: torch.Tensor,
        noise: torch.Tensor,
        target_q: Callable[[torch.Tensor, torch.Tensor], tuple[torch.Tensor, torch.Tensor]] | None = None,
    ) -> torch.Tensor:
        """``y = r + gamma (1 - terminated) min_i Q'_i(s', a')`` at the smoothed target action
        ``a' = clip(mu'(s') + clip(eps, -c, c), low, high)``, ``eps = noise sigma~ scale``.
        ``target_q``: how ``Q'`` is evaluated (the target critics' forward pass; the written-out
        update passes its own)."""
        actor = self.model
        next_action = ops.smoothed_target_action(
            self.target_actor(next_obs),
            noise * (self.policy_noise * actor.scale),
            self.noise_clip * actor.scale,
            actor.low,
            actor.high,
        )
        next_q1, next_q2 = (target_q or self.target_critic)(next_obs, next_action)
        return ops.clipped_double_q_target(rewards, terminated, next_q1, next_q2, self.gamma)
