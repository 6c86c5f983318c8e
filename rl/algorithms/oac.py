"""OAC: optimistic actor-critic (Ciosek et al. 2019, "Better Exploration with Optimistic
Actor-Critic", Algorithm 1).

OAC learns as SAC does (:class:`rl.SAC`: twin critics, actor, temperature, target critics; the
same update, unchanged) and explores differently. SAC explores with its own policy
``pi_T = tanh(N(mu_T, Sigma_T))``, which the lower bound ``min_i Q_i`` makes pessimistic; OAC
explores with ``pi_E = tanh(N(mu_E, Sigma_T))``, its mean moved towards where an upper bound of
Q grows:

    Q_UB(s, a) = mu_Q(s, a) + beta_UB sigma_Q(s, a),  mu_Q = (Q1 + Q2) / 2,  sigma_Q = |Q1 - Q2| / 2  (eq. 4-5)
    g          = grad_u Q_UB(s, tanh(u)) at u = mu_T                                                 (eq. 10)
    mu_E       = mu_T + sqrt(2 delta) Sigma_T g / ||g||_{Sigma_T}                                     (eq. 12)

``delta`` bounds the KL divergence between ``pi_E`` and ``pi_T``; ``beta_UB = 4.66`` and
``delta = 23.53`` are the paper's values for MuJoCo. Only :meth:`OAC.sample` (acting while
training) differs from SAC; :meth:`OAC.predict` evaluates with the squashed mean as SAC does.

``shift_from="sample"`` linearises ``Q_UB`` at a draw ``u ~ N(mu_T, Sigma_T)`` instead of at
``mu_T`` and shifts that draw, as PARL's OAC does: its exploration noise then has about twice
the variance (two draws are added).
"""

from __future__ import annotations

from typing import Any

import torch

from rl import ops
from rl.algorithm import PolicyStep
from rl.algorithms.sac import SAC
from rl.networks import SquashedGaussianActor, TwinQCritic

__all__ = ["OAC"]


class OAC(SAC):
    """SAC that explores optimistically (the paper's defaults for ``beta_ub`` and ``delta``); the
    other keyword arguments are :class:`rl.SAC`'s."""

    def __init__(
        self,
        actor: SquashedGaussianActor,
        critic: TwinQCritic,
        beta_ub: float = 4.66,
        delta: float = 23.53,
        shift_from: str = "mean",
        **sac: Any,
    ) -> None:
        if not delta >= 0:
            raise ValueError(f"delta (the KL bound of the shift) must be >= 0, got {delta}")
        if shift_from not in ("mean", "sample"):
            raise ValueError(f"shift_from must be 'mean' (the paper) or 'sample' (PARL's), got {shift_from!r}")
        super().__init__(actor, critic, **sac)
        self.beta_ub = float(beta_ub)
        self.delta = float(delta)
        self.shift_from = shift_from

    def sample(self, obs: torch.Tensor) -> PolicyStep:
        """``a ~ tanh(N(mu_E, Sigma_T))`` (uniform during warm-up); no log-probability (the
        exploration policy is not the one learned)."""
        if self.uniform_exploration:
            return PolicyStep(self._uniform(obs), None, None)
        actor = self.model
        # Acting runs under inference mode; the gradient g needs autograd.
        with torch.inference_mode(False), torch.enable_grad():
            obs = obs.clone()
            with torch.no_grad():
                mean, log_std = actor(obs)
            std = log_std.exp()
            # 1. Where Q_UB is linearised: the mean mu_T of pi_T (or, as PARL, a draw of it).
            u = mean if self.shift_from == "mean" else mean + std * torch.randn_like(mean)
            u = u.detach().requires_grad_(True)
            # 2. g = grad_u Q_UB(s, tanh(u)) (the critics' weights take no gradient).
            q1, q2 = self.critic(obs, actor.bias + actor.scale * torch.tanh(u))
            (g,) = torch.autograd.grad(ops.q_upper_bound(q1, q2, self.beta_ub).sum(), u)
        # 3. The shifted mean, then a draw of the exploration policy.
        mu_e = u.detach() + ops.optimistic_shift(g, std.pow(2), self.delta)
        action = actor.bias + actor.scale * torch.tanh(mu_e + std * torch.randn_like(mu_e))
        return PolicyStep(action, None, None)
