"""DDPG: deep deterministic policy gradient (Lillicrap et al. 2016, Algorithm 1).

    critic:  y = r + gamma (1 - terminated) Q'(s', mu'(s'))
             L = mean (y - Q(s, a))^2
    actor:   grad J = mean grad_a Q(s, a)|_{a = mu(s)} grad_theta mu(s)    (maximise Q(s, mu(s)))
    targets: theta' <- tau theta + (1 - tau) theta'        (both networks, every update)

Exploration adds Gaussian noise ``N(0, (sigma * scale)^2)`` to ``mu(s)`` and clips to the bounds
(the paper used an Ornstein-Uhlenbeck process; Fujimoto et al. 2018 found uncorrelated Gaussian
noise as good, and it is what TD3 uses, so the two compare like for like).
"""

from __future__ import annotations

import torch

from rl import ops
from rl.algorithms._off_policy import DeterministicOffPolicy, weighted_mse
from rl.networks import DeterministicActor, QCritic
from rl.replay import ReplayBatch

__all__ = ["DDPG"]


class DDPG(DeterministicOffPolicy):
    """DDPG with target networks and Gaussian exploration noise."""

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
    ) -> None:
        super().__init__(actor, critic, actor_lr, critic_lr, gamma, tau, exploration_noise, fused, autocast)

    def learn(self, batch: ReplayBatch[torch.Tensor]) -> dict[str, float]:
        """One critic and one actor step on a batch, then the soft target update."""
        # Critic: regress Q(s, a) onto the target network's one-step bootstrap.
        with torch.no_grad(), self._mixed():
            next_q = self.target_critic(batch.next_obs, self.target_actor(batch.next_obs))
            y = ops.td_target(batch.rewards, batch.terminated, next_q, self.gamma).float()
        with self._mixed():
            q = self.critic(batch.obs, batch.actions)
            critic_loss = weighted_mse(q, y, batch.weights)
        self.critic_optimizer.zero_grad(set_to_none=True)
        critic_loss.backward()
        self._step(self.critic_optimizer)

        # Actor: follow the critic's gradient in action space.
        self.critic.requires_grad_(False)
        with self._mixed():
            actor_loss = -self.critic(batch.obs, self.model(batch.obs)).float().mean()
        self.actor_optimizer.zero_grad(set_to_none=True)
        actor_loss.backward()
        self._step(self.actor_optimizer)
        self.critic.requires_grad_(True)

        self._soft_update(self.target_critic, self.critic, self.tau)
        self._soft_update(self.target_actor, self.model, self.tau)
        self.updates += 1
        self.td_errors = (y - q.detach().float()).numpy()
        return {
            "critic_loss": critic_loss.item(),
            "actor_loss": actor_loss.item(),
            "q_mean": float(q.detach().float().mean()),
        }
