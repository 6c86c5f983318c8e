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
from rl.algorithm import PolicyStep
from rl.algorithms._off_policy import OffPolicyAlgorithm, frozen_copy, weighted_mse
from rl.networks import DeterministicActor, QCritic
from rl.replay import ReplayBatch

__all__ = ["DDPG"]


class DDPG(OffPolicyAlgorithm):
    """DDPG with target networks and Gaussian exploration noise."""

    model: DeterministicActor

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
        super().__init__(actor, fused, autocast)
        self.critic = critic
        self.target_actor = frozen_copy(actor)
        self.target_critic = frozen_copy(critic)
        self.gamma = gamma
        self.tau = tau
        self.exploration_noise = exploration_noise
        """Standard deviation of the acting noise, as a fraction of the half-range of each action."""
        self.actor_optimizer = torch.optim.Adam(actor.parameters(), lr=actor_lr, fused=True)
        self.critic_optimizer = torch.optim.Adam(critic.parameters(), lr=critic_lr, fused=True)

    def sample(self, obs: torch.Tensor) -> PolicyStep:
        """``clip(mu(s) + N(0, (sigma scale)^2), low, high)`` (uniform during warm-up)."""
        if self.uniform_exploration:
            return PolicyStep(self._uniform(obs), None, None)
        mu = self.model(obs)
        noise = torch.randn_like(mu) * (self.exploration_noise * self.model.scale)
        return PolicyStep(torch.maximum(torch.minimum(mu + noise, self.model.high), self.model.low), None, None)

    def predict(self, obs: torch.Tensor) -> torch.Tensor:
        """``mu(s)``."""
        return self.model(obs)

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
        self.critic_optimizer.step()

        # Actor: follow the critic's gradient in action space.
        self.critic.requires_grad_(False)
        with self._mixed():
            actor_loss = -self.critic(batch.obs, self.model(batch.obs)).float().mean()
        self.actor_optimizer.zero_grad(set_to_none=True)
        actor_loss.backward()
        self.actor_optimizer.step()
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
