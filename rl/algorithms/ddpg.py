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
        args = (batch.obs, batch.actions, batch.rewards, batch.terminated, batch.next_obs, batch.weights)
        critic_loss, q, y, actor_loss = self._learn_step(True, *args)
        assert actor_loss is not None
        self.updates += 1
        self.td_errors = (y - q).numpy()
        return {"critic_loss": critic_loss.item(), "actor_loss": actor_loss, "q_mean": float(q.mean())}

    @torch.no_grad()
    def _critic_grads(
        self,
        obs: torch.Tensor,
        actions: torch.Tensor,
        rewards: torch.Tensor,
        terminated: torch.Tensor,
        next_obs: torch.Tensor,
        weights: torch.Tensor,
    ) -> tuple[list[torch.Tensor], torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(dL/d critic parameters, L, Q(s, a), y)`` of :meth:`_critic_loss` written out
        (:mod:`rl.backprop`)."""
        next_q = self.target_critic(next_obs, self.target_actor(next_obs))
        y = ops.td_target(rewards, terminated, next_q, self.gamma)
        grads, loss, q = self._regression_grads(obs, actions, y, weights)
        return grads, loss, q, y

    def _critic_loss(
        self,
        obs: torch.Tensor,
        actions: torch.Tensor,
        rewards: torch.Tensor,
        terminated: torch.Tensor,
        next_obs: torch.Tensor,
        weights: torch.Tensor,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(L, Q(s, a), y)`` (the last two detached, float32): ``Q(s, a)`` regressed onto the
        target networks' one-step bootstrap."""
        with torch.no_grad(), self._mixed():
            next_q = self.target_critic(next_obs, self.target_actor(next_obs))
            y = ops.td_target(rewards, terminated, next_q, self.gamma).float()
        with self._mixed():
            q = self.critic(obs, actions)
            loss = weighted_mse(q, y, weights)
        return loss, q.detach().float(), y
