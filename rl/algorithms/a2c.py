"""A2C: synchronous advantage actor-critic (Mnih et al. 2016, Algorithm S3, synchronous form).

    A_t  = GAE(lambda)(r, V)            (lambda = 1: the paper's n-step advantage)
    loss = -E[ log pi(a_t|s_t) A_t ]  +  vf_coef * E[ (R_t - V(s_t))^2 / 2 ]  -  ent_coef * H[pi]

One gradient step per rollout of ``T x B`` steps.
"""

from __future__ import annotations

import torch

from rl.algorithm import check_gamma, check_unit_interval
from rl.algorithms._common import ActorCriticAlgorithm, make_optimizer, normalized
from rl.networks import ActorCriticModel
from rl.ops import gae
from rl.storage import Rollout, bootstrapped_rewards, episode_discounts

__all__ = ["A2C"]


class A2C(ActorCriticAlgorithm):
    """Advantage actor-critic, one update per rollout."""

    def __init__(
        self,
        model: ActorCriticModel,
        lr: float = 7e-4,
        gamma: float = 0.99,
        gae_lambda: float = 1.0,
        vf_coef: float = 0.5,
        ent_coef: float = 0.0,
        max_grad_norm: float | None = 0.5,
        normalize_advantages: bool = False,
        optimizer: str = "rmsprop",
        fused: bool | None = None,
    ) -> None:
        super().__init__(model, fused)
        self.gamma = check_gamma(gamma)
        self.gae_lambda = check_unit_interval("gae_lambda", gae_lambda)
        self.vf_coef = vf_coef
        self.ent_coef = ent_coef
        self.max_grad_norm = max_grad_norm
        self.normalize_advantages = normalize_advantages
        self.optimizer = make_optimizer(optimizer, model.parameters(), lr)

    def learn(self, batch: Rollout[torch.Tensor]) -> dict[str, float]:
        """One A2C step on a rollout of tensors."""
        discounts = episode_discounts(batch.terminated, batch.truncated, self.gamma)
        rewards = bootstrapped_rewards(batch.rewards, batch.terminated, batch.truncated, batch.final_values, self.gamma)
        advantages, returns = gae(rewards, batch.values, batch.bootstrap_value, discounts, self.gae_lambda)
        if self.normalize_advantages:
            advantages = normalized(advantages)

        log_prob, entropy, value = self.model.evaluate(batch.obs, batch.actions)
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
