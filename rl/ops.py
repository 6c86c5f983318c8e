"""Pure return/advantage maths, named as in the papers.

On-policy returns (``vtrace``, ``gae``, ``discounted_returns``) take time-major ``[T, B]`` inputs.
Off-policy targets and losses (``td_target``, ``clipped_double_q_target``, ``smoothed_target_action``,
``weighted_mse``, ``tanh_gaussian_log_prob``, ``soft_update_``) take batches of transitions
``[N]`` / ``[N, act]``.
Evolution strategies (``centered_ranks``, ``es_gradient``) take one value per perturbation.

``discounts[t]`` is the per-step discount ``gamma * (1 - done[t])``: zero where an episode ended at
step ``t``, so no trace crosses an episode boundary. Truncated episodes are bootstrapped by the
caller, by adding ``gamma * V(final_obs)`` to the reward of the truncating step (see
:func:`rl.storage.bootstrapped_rewards`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import NamedTuple

import torch

from rl.fused import fused_soft_update_, plain_soft_update_

_LOG_2PI = math.log(2.0 * math.pi)
_LOG_2 = math.log(2.0)

__all__ = [
    "GAEReturns",
    "VTraceReturns",
    "centered_ranks",
    "clipped_double_q_target",
    "discounted_returns",
    "es_gradient",
    "gae",
    "gumbel_softmax_sample",
    "optimistic_shift",
    "q_upper_bound",
    "smoothed_target_action",
    "soft_update_",
    "tanh_gaussian_log_prob",
    "td_target",
    "vtrace",
    "weighted_mse",
]


class VTraceReturns(NamedTuple):
    """``vs``: V-trace value targets ``v_s``; ``pg_advantages``: ``rho_s (r_s + g v_{s+1} - V(x_s))``."""

    vs: torch.Tensor
    pg_advantages: torch.Tensor


class GAEReturns(NamedTuple):
    """``advantages``: GAE(lambda) estimates; ``returns``: ``advantages + values`` (value targets)."""

    advantages: torch.Tensor
    returns: torch.Tensor


@torch.no_grad()
def vtrace(
    log_rhos: torch.Tensor,
    discounts: torch.Tensor,
    rewards: torch.Tensor,
    values: torch.Tensor,
    bootstrap_value: torch.Tensor,
    clip_rho_threshold: float | None = 1.0,
    clip_pg_rho_threshold: float | None = 1.0,
) -> VTraceReturns:
    """V-trace targets (Espeholt et al. 2018, §4.1, eq. 1) and policy-gradient advantages (§4.2).

    Args:
        log_rhos: ``log(pi(a_t|x_t) / mu(a_t|x_t))``, ``[T, B]``.
        discounts: ``gamma * (1 - done_t)``, ``[T, B]``.
        rewards: ``r_t``, ``[T, B]``.
        values: ``V(x_t)`` under the learner's value function, ``[T, B]``.
        bootstrap_value: ``V(x_T)``, ``[B]``.
        clip_rho_threshold: ``rho_bar`` (``None``: no clipping).
        clip_pg_rho_threshold: clipping of the ``rho`` in the policy-gradient advantage.

    ``c_i = min(1, pi/mu)`` (the paper's ``c_bar = 1``). Computed without gradients, by the
    recursion ``v_s - V(x_s) = delta_s V + gamma_s c_s (v_{s+1} - V(x_{s+1}))``.
    """
    rhos = torch.exp(log_rhos)
    clipped_rhos = rhos if clip_rho_threshold is None else rhos.clamp(max=clip_rho_threshold)
    cs = rhos.clamp(max=1.0)
    values_t_plus_1 = torch.cat([values[1:], bootstrap_value.unsqueeze(0)], dim=0)
    deltas = clipped_rhos * (rewards + discounts * values_t_plus_1 - values)

    vs_minus_v_xs = torch.empty_like(values)
    acc = torch.zeros_like(bootstrap_value)
    for t in range(values.shape[0] - 1, -1, -1):
        acc = deltas[t] + discounts[t] * cs[t] * acc
        vs_minus_v_xs[t] = acc
    vs = vs_minus_v_xs + values

    vs_t_plus_1 = torch.cat([vs[1:], bootstrap_value.unsqueeze(0)], dim=0)
    pg_rhos = rhos if clip_pg_rho_threshold is None else rhos.clamp(max=clip_pg_rho_threshold)
    pg_advantages = pg_rhos * (rewards + discounts * vs_t_plus_1 - values)
    return VTraceReturns(vs=vs, pg_advantages=pg_advantages)


@torch.no_grad()
def gae(
    rewards: torch.Tensor,
    values: torch.Tensor,
    bootstrap_value: torch.Tensor,
    discounts: torch.Tensor,
    gae_lambda: float,
) -> GAEReturns:
    """Generalized advantage estimation (Schulman et al. 2016, eq. 16).

    ``delta_t = r_t + gamma_t V(s_{t+1}) - V(s_t)`` and
    ``A_t = delta_t + gamma_t lambda A_{t+1}``, with ``gamma_t = discounts[t]`` and
    ``V(s_T) = bootstrap_value``. ``lambda = 1`` gives n-step Monte-Carlo advantages (A2C).
    """
    values_t_plus_1 = torch.cat([values[1:], bootstrap_value.unsqueeze(0)], dim=0)
    deltas = rewards + discounts * values_t_plus_1 - values
    advantages = torch.empty_like(values)
    acc = torch.zeros_like(bootstrap_value)
    for t in range(values.shape[0] - 1, -1, -1):
        acc = deltas[t] + discounts[t] * gae_lambda * acc
        advantages[t] = acc
    return GAEReturns(advantages=advantages, returns=advantages + values)


@torch.no_grad()
def discounted_returns(rewards: torch.Tensor, discounts: torch.Tensor, bootstrap_value: torch.Tensor) -> torch.Tensor:
    """Monte-Carlo returns ``G_t = r_t + gamma_t G_{t+1}``, ``G_T = bootstrap_value`` (REINFORCE)."""
    returns = torch.empty_like(rewards)
    acc = bootstrap_value
    for t in range(rewards.shape[0] - 1, -1, -1):
        acc = rewards[t] + discounts[t] * acc
        returns[t] = acc
    return returns


# -- off-policy targets --------------------------------------------------------------------------


@torch.no_grad()
def td_target(rewards: torch.Tensor, terminated: torch.Tensor, next_q: torch.Tensor, gamma: float) -> torch.Tensor:
    """``y = r + gamma (1 - terminated) Q'(s', mu'(s'))`` (DDPG, Lillicrap et al. 2016, Alg. 1).

    Only a termination stops the bootstrap: a truncated transition (time limit) bootstraps from
    its true final observation like any other step.
    """
    return rewards + gamma * (~terminated.bool()).to(rewards.dtype) * next_q


@torch.no_grad()
def clipped_double_q_target(
    rewards: torch.Tensor,
    terminated: torch.Tensor,
    next_q1: torch.Tensor,
    next_q2: torch.Tensor,
    gamma: float,
    next_log_prob: torch.Tensor | None = None,
    alpha: float | torch.Tensor = 0.0,
) -> torch.Tensor:
    """Clipped double-Q target ``y = r + gamma (1 - d) (min_i Q'_i(s', a') - alpha log pi(a'|s'))``.

    TD3 (Fujimoto et al. 2018, §4.2) without the entropy term; SAC (Haarnoja et al. 2018,
    "Soft Actor-Critic Algorithms and Applications", §5) with it: there the bootstrap is the soft
    value ``V(s') = Q(s', a') - alpha log pi(a'|s')``, ``a' ~ pi(.|s')``.
    """
    next_v = torch.minimum(next_q1, next_q2)
    if next_log_prob is not None:
        next_v = next_v - alpha * next_log_prob
    return td_target(rewards, terminated, next_v, gamma)


def weighted_mse(pred: torch.Tensor, target: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """``mean(w_i (pred_i - target_i)^2)``: the squared TD error of a critic regressed onto its
    target, importance-weighted for prioritised replay (Schaul et al. 2016, §3.4; ``w = 1`` for
    uniform replay gives the plain mean squared error). Differentiable."""
    return (weights * (pred - target).pow(2)).mean()


@torch.no_grad()
def smoothed_target_action(
    target_action: torch.Tensor,
    noise: torch.Tensor,
    noise_clip: float | torch.Tensor,
    low: torch.Tensor,
    high: torch.Tensor,
) -> torch.Tensor:
    """TD3's target policy smoothing (Fujimoto et al. 2018, §5.3):
    ``a' = clip(mu'(s') + clip(eps, -c, c), low, high)`` with ``eps = noise`` drawn by the caller."""
    eps = torch.maximum(torch.minimum(noise, torch.as_tensor(noise_clip)), -torch.as_tensor(noise_clip))
    return torch.maximum(torch.minimum(target_action + eps, high), low)


def tanh_gaussian_log_prob(u: torch.Tensor, mean: torch.Tensor, log_std: torch.Tensor) -> torch.Tensor:
    """``log pi(a)`` of ``a = tanh(u)``, ``u ~ N(mean, exp(log_std)^2)`` diagonal, summed over dims.

    Haarnoja et al. 2018, appendix C, eq. 21: ``log pi(a|s) = log mu(u|s) - sum_i log(1 - tanh^2(u_i))``,
    with ``log(1 - tanh^2(u)) = 2 (log 2 - u - softplus(-2u))``, exact and finite for any ``u``
    (``1 - tanh^2`` rounds to 0 in float32 beyond ``|u| > 9``). Differentiable.
    """
    z = (u - mean) * torch.exp(-log_std)
    log_mu = (-0.5 * z.pow(2) - log_std - 0.5 * _LOG_2PI).sum(-1)
    log_det = (2.0 * (_LOG_2 - u - torch.nn.functional.softplus(-2.0 * u))).sum(-1)
    return log_mu - log_det


def q_upper_bound(q1: torch.Tensor, q2: torch.Tensor, beta_ub: float) -> torch.Tensor:
    """OAC's upper bound of Q from two critics (Ciosek et al. 2019, eq. 4-5):
    ``Q_UB = mu_Q + beta_UB sigma_Q``, ``mu_Q = (Q1 + Q2) / 2``, ``sigma_Q = |Q1 - Q2| / 2``. Differentiable."""
    return (q1 + q2) / 2.0 + beta_ub * (q1 - q2).abs() / 2.0


def optimistic_shift(grad: torch.Tensor, variance: torch.Tensor, delta: float, eps: float = 1e-5) -> torch.Tensor:
    """OAC's shift of the exploration mean (Ciosek et al. 2019, Proposition 1, eq. 12):
    ``mu_E - mu_T = sqrt(2 delta) Sigma g / ||g||_Sigma``, ``||g||_Sigma = sqrt(g^T Sigma g)``, for
    a diagonal ``Sigma`` (``variance``, ``[B, act]``) and the gradient ``g`` of ``Q_UB`` at ``mu_T``,
    row by row; ``eps`` is added to the norm (a flat ``Q_UB`` gives no shift rather than NaN).
    The shifted Gaussian is the one of largest linearised ``Q_UB`` whose KL divergence from
    ``N(mu_T, Sigma)`` is ``delta``."""
    norm = (grad.pow(2) * variance).sum(-1, keepdim=True).sqrt() + eps
    return math.sqrt(2.0 * delta) * variance * grad / norm


def gumbel_softmax_sample(logits: torch.Tensor, uniform: torch.Tensor) -> torch.Tensor:
    """A relaxed one-hot action ``softmax(l + g)``, ``g = -log(-log u)`` Gumbel noise from the
    uniform draw ``u`` (Jang et al. 2017; MADDPG's discrete actions, Lowe et al. 2017, §4.2 and
    the authors' code). Differentiable in ``logits``."""
    return torch.softmax(logits - torch.log(-torch.log(uniform)), dim=-1)


def soft_update_(
    target: Sequence[torch.Tensor], source: Sequence[torch.Tensor], tau: float, fused: bool = True
) -> None:
    """Polyak averaging, in place: ``theta' <- tau theta + (1 - tau) theta'`` (Lillicrap et al. 2016).

    ``fused``: one ``_foreach_lerp_`` over all tensors (:func:`rl.fused.fused_soft_update_`), else
    one ``lerp_`` per tensor (:func:`rl.fused.plain_soft_update_`). ``tau = 1`` copies.
    """
    if not 0.0 <= tau <= 1.0:
        raise ValueError(f"tau must be in [0, 1], got {tau}")
    (fused_soft_update_ if fused else plain_soft_update_)(target, source, tau)


# -- evolution strategies -----------------------------------------------------------------------


def centered_ranks(x: torch.Tensor) -> torch.Tensor:
    """Fitness shaping of OpenAI-ES (Salimans et al. 2017, §2.1): each value replaced by its rank,
    scaled to ``[-0.5, 0.5]`` (``rank / (n - 1) - 0.5`` over all ``n`` values, any shape).

    Invariant to any increasing transform of the returns, so a few outlier episodes cannot
    dominate the update. Tied values share the mean of their ranks: the paper's code gives them
    distinct ranks in order of appearance, which, for a mirrored pair that ties (both episodes hit
    the time limit, say), turns equal returns into a difference of utilities that moves the
    parameters along that pair's noise for nothing.
    """
    flat = x.reshape(-1)
    n = flat.numel()
    _, which, counts = torch.unique(flat, sorted=True, return_inverse=True, return_counts=True)
    first = torch.cumsum(counts, 0) - counts  # the lowest rank of each distinct value
    ranks = (first + (counts - 1) / 2.0).to(torch.float64)[which]
    if n > 1:
        ranks = ranks / (n - 1)
    return (ranks - 0.5).reshape(x.shape).to(x.dtype if x.is_floating_point() else torch.float64)


def es_gradient(
    utilities_pos: torch.Tensor, utilities_neg: torch.Tensor, noise: torch.Tensor, sigma: float
) -> torch.Tensor:
    """Antithetic ES estimate of the gradient of ``E_eps[F(theta + sigma eps)]`` (Salimans et al. 2017).

        g = 1 / (2 n sigma) sum_{i=1}^{n} (u_i^+ - u_i^-) eps_i

    for ``n`` mirrored pairs ``theta +- sigma eps_i`` with utilities (shaped returns) ``u_i^+``,
    ``u_i^-``; ``noise`` is ``[n, d]``. For a quadratic ``F`` and raw returns it is unbiased.
    """
    n = noise.shape[0]
    return (utilities_pos - utilities_neg).to(noise.dtype) @ noise / (2.0 * n * sigma)
