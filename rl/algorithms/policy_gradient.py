"""REINFORCE (Williams 1992) with a learned state-value baseline (Sutton & Barto 2018, §13.4).

    G_t = sum_k gamma^k r_{t+k}                     (Monte-Carlo return of the episode)
    loss = -E[ log pi(a_t|s_t) (G_t - b(s_t)) ]  +  vf_coef * E[ (G_t - b(s_t))^2 / 2 ]

Rollouts are cut every ``T`` steps; an unfinished episode's return is completed with the
baseline's estimate of the remaining value, and a time-limit truncation likewise.
"""

from __future__ import annotations

import torch

from rl.algorithm import check_gamma
from rl.algorithms._common import ActorCriticAlgorithm, make_optimizer, normalized
from rl.networks import ActorCriticModel
from rl.ops import discounted_returns
from rl.storage import Rollout, bootstrapped_rewards, episode_discounts

__all__ = ["PolicyGradient"]


class PolicyGradient(ActorCriticAlgorithm):
    """REINFORCE with baseline: one gradient step per rollout."""

    def __init__(
        self,
        model: ActorCriticModel,
        lr: float = 1e-3,
        gamma: float = 0.99,
        vf_coef: float = 0.5,
        ent_coef: float = 0.0,
        normalize_advantages: bool = True,
        max_grad_norm: float | None = 0.5,
        optimizer: str = "adam",
        fused: bool | None = None,
        optimizer_eps: float = 1e-5,
    ) -> None:
        super().__init__(model, fused)
        self.gamma = check_gamma(gamma)
        self.vf_coef = vf_coef
        self.ent_coef = ent_coef
        self.normalize_advantages = normalize_advantages
        self.max_grad_norm = max_grad_norm
        self.optimizer = make_optimizer(optimizer, model.parameters(), lr, optimizer_eps)

    def learn(self, batch: Rollout[torch.Tensor]) -> dict[str, float]:
        """One REINFORCE step on a rollout of tensors."""
        # 1. The return of every step, G_t.
        discounts = episode_discounts(batch.terminated, batch.truncated, self.gamma)
        rewards = bootstrapped_rewards(batch.rewards, batch.terminated, batch.truncated, batch.final_values, self.gamma)
        returns = discounted_returns(rewards, discounts, batch.bootstrap_value)
        # 2. The gradient step.
        return self.update(batch.obs, batch.actions, returns)

    def update(self, obs: torch.Tensor, actions: torch.Tensor, returns: torch.Tensor) -> dict[str, float]:
        """The gradient step of REINFORCE on steps whose returns ``G_t`` are known (any batch shape)."""
        log_prob, entropy, value = self.model.evaluate(obs, actions)
        advantages = returns - value.detach()
        if self.normalize_advantages:
            advantages = normalized(advantages)

        policy_loss = -(log_prob * advantages).mean()
        value_loss = 0.5 * (returns - value).pow(2).mean()
        entropy_mean = entropy.mean()
        loss = policy_loss + self.vf_coef * value_loss - self.ent_coef * entropy_mean
        grad_norm = float(self._step(loss, self.max_grad_norm))
        return {
            "policy_loss": policy_loss.item(),
            "value_loss": value_loss.item(),
            "entropy": entropy_mean.item(),
            "grad_norm": grad_norm,
        }
