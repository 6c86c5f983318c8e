"""Mixed precision in the off-policy updates (``torch.autocast`` to bfloat16): the output layers
that stay in float32 inside it, so Q-values, log-probabilities, targets and TD errors keep
float32's precision while the hidden layers' matmuls run in bfloat16; and whether this machine
has bfloat16 matmuls worth using (:func:`native_bfloat16_matmul`)."""

from __future__ import annotations

import contextlib
import os
import sys
import warnings
from typing import Any

import torch
from torch import nn

__all__ = ["OutputLinear", "native_bfloat16_matmul", "outside_autocast", "warn_if_slow_bfloat16"]


def native_bfloat16_matmul(device: torch.device | str = "cpu") -> bool:
    """Whether bfloat16 matmuls on ``device`` run on units made for them: on a CPU, oneDNN's
    bfloat16 kernels (AVX512-BF16 or AMX, e.g. Intel Sapphire Rapids and later); on a GPU,
    ``torch.cuda.is_bf16_supported()``. Without them a CPU's bfloat16 matmul falls back to
    scalar code: on an AVX2-only AMD EPYC a HalfCheetah SAC step took ~15x its float32 time
    (``bench/README_rl.md``)."""
    device = torch.device(device)
    if device.type == "cuda":
        return bool(torch.cuda.is_bf16_supported())
    if device.type != "cpu":
        return True  # no known slow path to warn about
    return bool(torch.backends.mkldnn.is_available() and torch.ops.mkldnn._is_mkldnn_bf16_supported())


def warn_if_slow_bfloat16(dtype: torch.dtype | None, device: torch.device | str) -> None:
    """A ``RuntimeWarning`` when ``dtype`` is bfloat16 and ``device`` has no
    :func:`native_bfloat16_matmul`: the user asked for speed and would get a slowdown. The
    warning names the first caller outside the ``rl`` package (the line that built the algorithm)."""
    if dtype is torch.bfloat16 and not native_bfloat16_matmul(device):
        package = os.path.dirname(os.path.abspath(__file__)) + os.sep
        stacklevel, frame = 1, sys._getframe(0)
        while frame.f_back is not None and os.path.abspath(frame.f_code.co_filename).startswith(package):
            frame, stacklevel = frame.f_back, stacklevel + 1
        warnings.warn(
            f"autocast=torch.bfloat16 on a {torch.device(device).type} without native bfloat16 matmuls "
            f"(no AVX512-BF16 or AMX here; torch reports {torch.backends.cpu.get_cpu_capability()}): "
            "its bfloat16 matmuls fall back to scalar code, many times slower than float32 "
            "(a SAC step ~15x). Use autocast=None on this machine.",
            RuntimeWarning,
            stacklevel=stacklevel,
        )


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
