"""Pure return/advantage maths, named as in the papers. All inputs are time-major ``[T, B]``.

``discounts[t]`` is the per-step discount ``gamma * (1 - done[t])``: zero where an episode ended at
step ``t``, so no trace crosses an episode boundary. Truncated episodes are bootstrapped by the
caller, by adding ``gamma * V(final_obs)`` to the reward of the truncating step (see
:func:`rl.storage.bootstrapped_rewards`).
"""

from __future__ import annotations

from typing import NamedTuple

import torch

__all__ = ["VTraceReturns", "GAEReturns", "vtrace", "gae", "discounted_returns"]


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
def discounted_returns(
    rewards: torch.Tensor, discounts: torch.Tensor, bootstrap_value: torch.Tensor
) -> torch.Tensor:
    """Monte-Carlo returns ``G_t = r_t + gamma_t G_{t+1}``, ``G_T = bootstrap_value`` (REINFORCE)."""
    returns = torch.empty_like(rewards)
    acc = bootstrap_value
    for t in range(rewards.shape[0] - 1, -1, -1):
        acc = rewards[t] + discounts[t] * acc
        returns[t] = acc
    return returns
