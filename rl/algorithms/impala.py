"""IMPALA's learner loss (Espeholt et al. 2018, §4.2): V-trace actor-critic.

Rollouts come from behaviour policies ``mu`` that may lag the learner's ``pi``. With
``rho_t = pi(a_t|x_t) / mu(a_t|x_t)`` and V-trace targets ``v_s``:

    policy loss   = -E[ rho_s^pg (r_s + gamma v_{s+1} - V(x_s)) log pi(a_s|x_s) ]
    baseline loss =  baseline_coef * E[ (v_s - V(x_s))^2 / 2 ]
    entropy loss  = -ent_coef * E[ H[pi(.|x_s)] ]

A step cut by a time limit (truncated, not terminated) is bootstrapped with the learner's own
``V(final_obs)``, like ``V(x_s)`` and ``V(x_T)``: the rollout's ``final_values`` are the
behaviour critic's, which lags the learner's as the behaviour policy does.
"""

from __future__ import annotations

import torch

from rl.algorithm import check_gamma
from rl.algorithms._common import ActorCriticAlgorithm, make_optimizer
from rl.networks import ActorCriticModel
from rl.ops import vtrace
from rl.storage import Rollout, bootstrapped_rewards, episode_discounts

__all__ = ["IMPALA"]


class IMPALA(ActorCriticAlgorithm):
    """V-trace policy gradient + value + entropy loss; one gradient step per rollout.

    ``eps`` is the optimizer's epsilon. The paper's RMSprop (Table G.1) has eps 0.01 and clips
    the gradient norm at 40: an eps that large damps the steps of parameters whose gradients are
    small (the policy's, beside the value's), which keeps a policy fed lagged rollouts from
    running off to a deterministic one (``examples/impala_cartpole.py`` uses both).
    """

    def __init__(
        self,
        model: ActorCriticModel,
        lr: float = 6e-4,
        gamma: float = 0.99,
        baseline_coef: float = 0.5,
        ent_coef: float = 0.0,
        clip_rho_threshold: float = 1.0,
        clip_pg_rho_threshold: float = 1.0,
        max_grad_norm: float | None = 40.0,
        optimizer: str = "rmsprop",
        eps: float = 1e-5,
        fused: bool | None = None,
    ) -> None:
        super().__init__(model, fused)
        self.gamma = check_gamma(gamma)
        self.baseline_coef = baseline_coef
        self.ent_coef = ent_coef
        self.clip_rho_threshold = clip_rho_threshold
        self.clip_pg_rho_threshold = clip_pg_rho_threshold
        self.max_grad_norm = max_grad_norm
        self.optimizer = make_optimizer(optimizer, model.parameters(), lr, eps)

    def learn(self, batch: Rollout[torch.Tensor]) -> dict[str, float]:
        """One V-trace update on a rollout of tensors (behaviour ``log_probs`` required)."""
        # Learner's view of the rollout: log pi(a|x), entropy, V(x), and V(x_T).
        target_log_prob, entropy, values = self.model.evaluate(batch.obs, batch.actions)
        with torch.no_grad():
            bootstrap_value = self.model.value(batch.bootstrap_obs)
            final_values = self._final_values(batch)

        discounts = episode_discounts(batch.terminated, batch.truncated, self.gamma)
        rewards = bootstrapped_rewards(batch.rewards, batch.terminated, batch.truncated, final_values, self.gamma)
        log_rhos = target_log_prob.detach() - batch.log_probs
        vs, pg_advantages = vtrace(
            log_rhos,
            discounts,
            rewards,
            values.detach(),
            bootstrap_value,
            clip_rho_threshold=self.clip_rho_threshold,
            clip_pg_rho_threshold=self.clip_pg_rho_threshold,
        )

        policy_loss = -(target_log_prob * pg_advantages).mean()
        baseline_loss = 0.5 * (vs - values).pow(2).mean()
        entropy_mean = entropy.mean()
        loss = policy_loss + self.baseline_coef * baseline_loss - self.ent_coef * entropy_mean
        grad_norm = float(self._step(loss, self.max_grad_norm))
        return {
            "policy_loss": policy_loss.item(),
            "baseline_loss": baseline_loss.item(),
            "entropy": entropy_mean.item(),
            "mean_rho": float(log_rhos.exp().mean()),
            "grad_norm": grad_norm,
        }

    def _final_values(self, batch: Rollout[torch.Tensor]) -> torch.Tensor:
        """The learner's ``V(final_obs)`` where a time limit cut an episode, 0 elsewhere."""
        cut = batch.truncated & ~batch.terminated
        final_values = torch.zeros_like(batch.rewards)
        if cut.any():
            final_values[cut] = self.model.value(batch.final_obs[cut]).to(final_values.dtype)
        return final_values
