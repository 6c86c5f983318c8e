"""DDPG: deep deterministic policy gradient (Lillicrap et al. 2016, Algorithm 1).

    critic:  y = r + gamma (1 - terminated) Q'(s', mu'(s'))
             L = mean (y - Q(s, a))^2
    actor:   grad J = mean grad_a Q(s, a)|_{a = mu(s)} grad_theta mu(s)    (maximise Q(s, mu(s)))
    targets: theta' <- tau theta + (1 - tau) theta'        (both networks, every update)

Exploration adds Gaussian noise ``N(0, (sigma * scale)^2)`` to ``mu(s)`` and clips to the bounds
(the paper used an Ornstein-Uhlenbeck process; Fujimoto et al. 2018 found uncorrelated Gaussian
noise as good, and it is what TD3 uses, so the two compare like for like).

:meth:`DDPG.learn` takes these steps by autograd; where the fast paths apply (``written_out``), the
same steps with their gradients written out by hand
(:func:`rl.algorithms.written_out.deterministic_update`: equal to float rounding, and faster).
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from rl import ops
from rl.algorithms import written_out
from rl.algorithms._off_policy import DeterministicOffPolicy
from rl.networks import DeterministicActor, QCritic
from rl.replay import ReplayBatch

__all__ = ["DDPG"]


class DDPG(DeterministicOffPolicy):
    """DDPG with target networks and Gaussian exploration noise."""

    _written_critic = QCritic

    def __init__(
        self,
        actor: DeterministicActor,
        critic: QCritic,
        actor_lr: float = 1e-3,
        critic_lr: float = 1e-3,
        gamma: float = 0.99,
        tau: float = 0.005,
        exploration_noise: float = 0.1,
        fused: bool | None = None,
        autocast: torch.dtype | None = None,
        compile: bool = False,
    ) -> None:
        super().__init__(actor, critic, actor_lr, critic_lr, gamma, tau, exploration_noise, fused, autocast, compile)

    def learn(self, batch: ReplayBatch[torch.Tensor]) -> dict[str, float]:
        """One critic and one actor step on a batch, then the soft target update."""
        step = written_out.deterministic_update(self, True, batch)
        if step is not None:
            critic_loss, q, y, actor_loss = step
        else:
            # 1. The critic regresses onto the target networks' one-step bootstrap y (_target).
            critic_loss, q, y = self._critic_step(batch)
            # 2. The actor climbs Q(s, mu(s)), the critic frozen;
            actor_loss = self._actor_step(batch.obs)
            # 3. and both target networks take one Polyak step.
            self._soft_update_targets()
        assert actor_loss is not None
        self.updates += 1
        self.td_errors = (y - q).numpy()
        return {"critic_loss": critic_loss.item(), "actor_loss": actor_loss, "q_mean": float(q.mean())}

    def _target(
        self,
        rewards: torch.Tensor,
        terminated: torch.Tensor,
        next_obs: torch.Tensor,
        target_q: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] | None = None,
    ) -> torch.Tensor:
        """``y = r + gamma (1 - terminated) Q'(s', mu'(s'))``. ``target_q``: how ``Q'`` is
        evaluated (the target critic's forward pass unless given)."""
        next_q = (target_q or self.target_critic)(next_obs, self.target_actor(next_obs))
        return ops.td_target(rewards, terminated, next_q, self.gamma)
