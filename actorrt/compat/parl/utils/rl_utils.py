"""PARL's ``calc_gae`` and ``calc_discount_sum_rewards``, on ``rl.ops`` (one trajectory
segment, no episode ends inside it: the caller cuts segments at episode ends, as PARL's A2C)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from rl import ops

__all__ = ["calc_discount_sum_rewards", "calc_gae"]


def _column(x: Sequence[float] | np.ndarray, name: str) -> torch.Tensor:
    """``x`` as a float64 ``[T, 1]`` tensor (rl.ops is time-major ``[T, B]``)."""
    array = np.asarray(x, dtype=np.float64)
    if array.ndim != 1:
        raise ValueError(f"{name} must be one value per step (1-D), got shape {array.shape}")
    return torch.from_numpy(array.copy()).reshape(-1, 1)


def calc_discount_sum_rewards(rewards: Sequence[float] | np.ndarray, gamma: float) -> np.ndarray:
    """``G_t = r_t + gamma G_{t+1}``, ``G_T = 0``: the discounted sum from each step on."""
    r = _column(rewards, "rewards")
    returns = ops.discounted_returns(r, torch.full_like(r, gamma), torch.zeros(1, dtype=torch.float64))
    return returns[:, 0].numpy()


def calc_gae(
    rewards: Sequence[float] | np.ndarray,
    values: Sequence[float] | np.ndarray,
    next_value: float,
    gamma: float,
    lam: float,
) -> np.ndarray:
    """Generalized advantage estimates (Schulman et al. 2016) of ``s_t .. s_T``, bootstrapped
    from ``next_value`` = ``V(s_{T+1})``: ``delta_t = r_t + gamma V(s_{t+1}) - V(s_t)``,
    ``A_t = delta_t + gamma lam A_{t+1}``."""
    r, v = _column(rewards, "rewards"), _column(values, "values")
    if r.shape != v.shape:
        raise ValueError(f"rewards and values must have one value per step each, got {len(r)} and {len(v)}")
    bootstrap = torch.tensor([float(next_value)], dtype=torch.float64)
    out = ops.gae(r, v, bootstrap, torch.full_like(r, gamma), lam)
    return out.advantages[:, 0].numpy()
