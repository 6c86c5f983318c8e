"""PPO with the clipped surrogate objective and GAE (Schulman et al. 2017, Algorithm 1).

    r_t(theta) = pi(a_t|s_t) / pi_old(a_t|s_t)
    L^CLIP     = E[ min(r_t A_t, clip(r_t, 1 - eps, 1 + eps) A_t) ]
    loss       = -L^CLIP + vf_coef * E[ (V(s_t) - R_t)^2 ] - ent_coef * H[pi]

With ``clip_range_vf`` the value loss is clipped as in OpenAI Baselines' PPO2 (and PARL's):
``E[ max((V - R)^2, (V_old + clip(V - V_old, -c, c) - R)^2) ]``, ``V_old`` the behaviour values.

``A_t`` is GAE(lambda) computed once per rollout with the behaviour values; then ``num_epochs``
passes of ``num_minibatches`` minibatches over the flattened ``T x B`` samples (sizes differ by
at most one where ``num_minibatches`` does not divide them; every sample is used each epoch).
The statistics :meth:`PPO.learn` returns are means over the minibatches of the last epoch, or,
with ``target_kl``, of every epoch it ran.
"""

from __future__ import annotations

import torch

from rl.algorithm import check_gamma, check_unit_interval
from rl.algorithms._common import ActorCriticAlgorithm, make_optimizer, normalized
from rl.networks import ActorCriticModel
from rl.ops import gae
from rl.storage import Rollout, bootstrapped_rewards, episode_discounts

__all__ = ["PPO"]


class PPO(ActorCriticAlgorithm):
    """Proximal policy optimisation (clip variant)."""

    saved_attributes = ("_generator",)  # the minibatches' order

    def __init__(
        self,
        model: ActorCriticModel,
        lr: float = 3e-4,
        gamma: float = 0.99,
        gae_lambda: float = 0.95,
        clip_range: float = 0.2,
        num_epochs: int = 10,
        num_minibatches: int = 4,
        vf_coef: float = 0.5,
        ent_coef: float = 0.0,
        max_grad_norm: float | None = 0.5,
        normalize_advantages: bool = True,
        target_kl: float | None = None,
        optimizer: str = "adam",
        seed: int = 0,
        fused: bool | None = None,
        clip_range_vf: float | None = None,
        optimizer_eps: float = 1e-5,
    ) -> None:
        super().__init__(model, fused)
        if not clip_range > 0:
            raise ValueError(f"clip_range must be > 0, got {clip_range}")
        if num_epochs < 1 or num_minibatches < 1:
            raise ValueError(f"num_epochs and num_minibatches must be >= 1, got {num_epochs} and {num_minibatches}")
        self.gamma = check_gamma(gamma)
        self.gae_lambda = check_unit_interval("gae_lambda", gae_lambda)
        if clip_range_vf is not None and not clip_range_vf > 0:
            raise ValueError(f"clip_range_vf must be > 0 (or None: no value clipping), got {clip_range_vf}")
        self.clip_range = clip_range
        self.clip_range_vf = clip_range_vf
        self.num_epochs = num_epochs
        self.num_minibatches = num_minibatches
        self.vf_coef = vf_coef
        self.ent_coef = ent_coef
        self.max_grad_norm = max_grad_norm
        self.normalize_advantages = normalize_advantages
        self.target_kl = target_kl
        self.optimizer = make_optimizer(optimizer, model.parameters(), lr, optimizer_eps)
        self._generator = torch.Generator().manual_seed(seed)

    def learn(self, batch: Rollout[torch.Tensor]) -> dict[str, float]:
        """``num_epochs`` of minibatch updates on one rollout of tensors."""
        # 1. Advantages and value targets, once, with the behaviour values.
        discounts = episode_discounts(batch.terminated, batch.truncated, self.gamma)
        rewards = bootstrapped_rewards(batch.rewards, batch.terminated, batch.truncated, batch.final_values, self.gamma)
        advantages, returns = gae(rewards, batch.values, batch.bootstrap_value, discounts, self.gae_lambda)

        # 2. Flatten [T, B] into N samples.
        n = batch.rewards.numel()
        obs = batch.obs.reshape(n, *batch.obs.shape[2:])
        actions = batch.actions.reshape(n, *batch.actions.shape[2:])
        old_log_prob, old_values = batch.log_probs.reshape(n), batch.values.reshape(n)
        advantages, returns = advantages.reshape(n), returns.reshape(n)
        if self.num_minibatches > n:
            raise ValueError(f"num_minibatches={self.num_minibatches} is more than the rollout's {n} samples")
        whole = self.num_minibatches == 1  # one minibatch: no shuffling, normalise the advantages once
        if whole and self.normalize_advantages:
            advantages = normalized(advantages)

        # 3. Optimise the clipped surrogate for a few epochs.
        sums = torch.zeros(5)  # policy_loss, value_loss, entropy, approx_kl, clip_fraction
        updates = 0
        for epoch in range(self.num_epochs):
            # Statistics (tensors: no sync) from the last epoch only, or every epoch for target_kl.
            track = self.target_kl is not None or epoch == self.num_epochs - 1
            minibatches = (
                [None] if whole else torch.randperm(n, generator=self._generator).tensor_split(self.num_minibatches)
            )
            epoch_kl = torch.zeros(())
            for idx in minibatches:
                if idx is None:
                    step = self._minibatch_step(obs, actions, old_log_prob, advantages, returns, old_values)
                else:
                    adv = advantages[idx]
                    if self.normalize_advantages:
                        adv = normalized(adv)
                    step = self._minibatch_step(
                        obs[idx], actions[idx], old_log_prob[idx], adv, returns[idx], old_values[idx]
                    )
                if track:
                    sums += step
                    epoch_kl = torch.maximum(epoch_kl, step[3])
                    updates += 1
            if self.target_kl is not None and float(epoch_kl) > self.target_kl:
                break
        return dict(zip(_STATS, (sums / max(updates, 1)).tolist(), strict=True))

    def update(
        self,
        obs: torch.Tensor,
        actions: torch.Tensor,
        old_log_prob: torch.Tensor,
        advantages: torch.Tensor,
        returns: torch.Tensor,
        old_values: torch.Tensor | None = None,
    ) -> dict[str, float]:
        """One gradient step on one minibatch of ``N`` samples whose advantages, value targets and
        behaviour log-probabilities (and, with :attr:`clip_range_vf`, values) are known; the
        advantages are normalised here where :attr:`normalize_advantages` is set."""
        if self.normalize_advantages:
            advantages = normalized(advantages)
        if old_values is None:
            if self.clip_range_vf is not None:
                raise ValueError("clip_range_vf is set: update needs the behaviour values (old_values)")
            old_values = torch.zeros_like(returns)
        step = self._minibatch_step(obs, actions, old_log_prob, advantages, returns, old_values)
        return dict(zip(_STATS, step.tolist(), strict=True))

    def _minibatch_step(
        self,
        obs: torch.Tensor,
        actions: torch.Tensor,
        old_log_prob: torch.Tensor,
        adv: torch.Tensor,
        returns: torch.Tensor,
        old_values: torch.Tensor,
    ) -> torch.Tensor:
        """Step 3 on one minibatch; returns its statistics as a tensor (no sync), in :data:`_STATS`' order."""
        log_prob, entropy, value = self.model.evaluate(obs, actions)

        log_ratio = log_prob - old_log_prob
        ratio = log_ratio.exp()
        surrogate = torch.min(ratio * adv, ratio.clamp(1.0 - self.clip_range, 1.0 + self.clip_range) * adv)
        policy_loss = -surrogate.mean()
        value_error = (returns - value).pow(2)
        if self.clip_range_vf is not None:
            clipped = old_values + (value - old_values).clamp(-self.clip_range_vf, self.clip_range_vf)
            value_error = torch.max(value_error, (returns - clipped).pow(2))
        value_loss = value_error.mean()
        entropy_mean = entropy.mean()
        loss = policy_loss + self.vf_coef * value_loss - self.ent_coef * entropy_mean
        self._step(loss, self.max_grad_norm)

        with torch.no_grad():
            approx_kl = ((ratio - 1) - log_ratio).mean()  # Schulman's k3 estimator
            clip_fraction = ((ratio - 1).abs() > self.clip_range).float().mean()
            return torch.stack([policy_loss, value_loss, entropy_mean, approx_kl, clip_fraction])


_STATS = ("policy_loss", "value_loss", "entropy", "approx_kl", "clip_fraction")
