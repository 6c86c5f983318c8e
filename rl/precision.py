"""Mixed precision in the off-policy updates (``torch.autocast`` to bfloat16): the output layers
that stay in float32 inside it, so Q-values, log-probabilities, targets and TD errors keep
float32's precision while the hidden layers' matmuls run in bfloat16."""

from __future__ import annotations

import contextlib
from typing import Any

import torch
from torch import nn

__all__ = ["OutputLinear", "outside_autocast"]


def outside_autocast(x: torch.Tensor) -> tuple[torch.Tensor, contextlib.AbstractContextManager[Any]]:
    """``(x, context)`` for a network's output layer. Inside ``torch.autocast`` (an off-policy
    algorithm's mixed-precision update): ``x`` in float32 and a context that turns autocast off,
    so that outputs keep float32's precision (bfloat16 rounds a Q-value of 800 to a multiple of
    4, and the TD errors with it). Outside: ``x`` as it is and no context."""
    device = x.device.type
    if torch.is_autocast_enabled(device):
        return x.float(), torch.autocast(device, enabled=False)
    return x, contextlib.nullcontext()


class OutputLinear(nn.Linear):
    """``nn.Linear`` as a network's output layer: in float32 even inside ``torch.autocast``
    (:func:`outside_autocast`); the same parameters and ``state_dict`` as ``nn.Linear``."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x, context = outside_autocast(x)
        with context:
            return super().forward(x)
