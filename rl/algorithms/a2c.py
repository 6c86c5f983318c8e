"""A2C: synchronous advantage actor-critic (Mnih et al. 2016, Algorithm S3, synchronous form).

    A_t  = GAE(lambda)(r, V)            (lambda = 1: the paper's n-step advantage)
    loss = -E[ log pi(a_t|s_t) A_t ]  +  vf_coef * E[ (R_t - V(s_t))^2 / 2 ]  -  ent_coef * H[pi]

One gradient step per rollout of ``T x B`` steps. With ``loss_reduction="sum"`` each term is
summed over the batch instead of averaged (as PARL's A2C does: its learning rate is per sample).
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
        optimizer_eps: float = 1e-5,
        loss_reduction: str = "mean",
    ) -> None:
        super().__init__(model, fused)
        if loss_reduction not in ("mean", "sum"):
            raise ValueError(f"loss_reduction must be 'mean' or 'sum', got {loss_reduction!r}")
        self.loss_reduction = loss_reduction
        self.gamma = check_gamma(gamma)
        self.gae_lambda = check_unit_interval("gae_lambda", gae_lambda)
        self.vf_coef = vf_coef
        self.ent_coef = ent_coef
        self.max_grad_norm = max_grad_norm
        self.normalize_advantages = normalize_advantages
        self.optimizer = make_optimizer(optimizer, model.parameters(), lr, optimizer_eps)

    def learn(self, batch: Rollout[torch.Tensor]) -> dict[str, float]:
        """One A2C step on a rollout of tensors."""
        # 1. Advantages A_t and value targets R_t = A_t + V(s_t).
        discounts = episode_discounts(batch.terminated, batch.truncated, self.gamma)
        rewards = bootstrapped_rewards(batch.rewards, batch.terminated, batch.truncated, batch.final_values, self.gamma)
        advantages, returns = gae(rewards, batch.values, batch.bootstrap_value, discounts, self.gae_lambda)
        # 2. The gradient step.
        return self.update(batch.obs, batch.actions, advantages, returns)

    def update(
        self, obs: torch.Tensor, actions: torch.Tensor, advantages: torch.Tensor, returns: torch.Tensor
    ) -> dict[str, float]:
        """The gradient step of A2C on steps whose advantages and value targets are known."""
        if self.normalize_advantages:
            advantages = normalized(advantages)
        reduce = torch.sum if self.loss_reduction == "sum" else torch.mean
        log_prob, entropy, value = self.model.evaluate(obs, actions)
        policy_loss = -reduce(log_prob * advantages)
        value_loss = 0.5 * reduce((returns - value).pow(2))
        entropy_mean = reduce(entropy)
        loss = policy_loss + self.vf_coef * value_loss - self.ent_coef * entropy_mean
        grad_norm = float(self._step(loss, self.max_grad_norm))
        return {
            "policy_loss": policy_loss.item(),
            "value_loss": value_loss.item(),
            "entropy": entropy_mean.item(),
            "grad_norm": grad_norm,
        }
