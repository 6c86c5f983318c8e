"""The RL fast paths, each beside its plain version, and the one switch that chooses between them.

At the sizes of classic control a gradient step is made of per-op overhead, so these pay (see
``bench/README_rl.md``); they compute the same maths as the plain versions, to float tolerance
(``tests/rl/test_rl_fused.py``):

- :class:`SigmoidTanh`: tanh computed as ``2 sigmoid(2x) - 1``; plain: ``nn.Tanh``.
- :class:`FusedMLPPair`: two MLPs over the same input evaluated in one pass; plain: :class:`MLPPair`
  (two ``nn.Sequential`` MLPs). :meth:`FusedMLPPair.unfused` gives the plain pair with the same weights.
- :func:`fused_soft_update_` (one ``torch._foreach_lerp_``); plain: :func:`plain_soft_update_`.
- :func:`fused_clip_grad_norm_` (``torch._foreach_norm`` and ``torch._foreach_mul_``); plain:
  :func:`plain_clip_grad_norm_`.
- :func:`fused_adam_step_`: a ``torch.optim.Adam(fused=True)`` step as its two kernels, without
  ``Optimizer.step``'s per-call bookkeeping; plain: ``optimizer.step()``. Under it,
  :func:`adam_tensors` and :func:`adam_`: that step on given gradients, which the written-out
  off-policy updates take inside their compiled graph.
- :class:`ReLU`: ``nn.ReLU`` whose backward, under ``torch.compile``, multiplies by ``sign(y)``
  instead of a saved boolean mask; in eager mode it is ``nn.ReLU``, so the switch below does not
  choose it (it is the off-policy networks' default activation either way).

The switch: :func:`enabled` is true unless the environment variable ``RL_FUSED`` is ``0`` (or
``false``/``no``/``off``). It is read where a model or an algorithm is built (their ``fused: bool |
None = None`` argument; ``None`` means :func:`enabled`), never on every call.
"""

from __future__ import annotations

import itertools
import math
import os
from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np
import torch
from torch import nn

from rl.precision import OutputLinear, outside_autocast

__all__ = [
    "AdamTensors",
    "FusedMLPPair",
    "MLPPair",
    "ReLU",
    "SigmoidTanh",
    "adam_",
    "adam_tensors",
    "enabled",
    "fused_adam_step_",
    "fused_clip_grad_norm_",
    "fused_soft_update_",
    "plain_clip_grad_norm_",
    "plain_soft_update_",
    "resolve_fused",
]

ENV_VAR = "RL_FUSED"
"""``RL_FUSED=0`` turns every fast path off (for models and algorithms built afterwards)."""


def enabled() -> bool:
    """Whether the fast paths are on: yes, unless ``RL_FUSED`` is ``0``, ``false``, ``no`` or ``off``."""
    return os.environ.get(ENV_VAR, "1").strip().lower() not in ("0", "false", "no", "off")


def resolve_fused(fused: bool | None) -> bool:
    """``fused`` as given, or :func:`enabled` when it is ``None`` (call it once, at build time)."""
    return enabled() if fused is None else bool(fused)


# -- tanh ---------------------------------------------------------------------------------------


class _SigmoidTanhFunction(torch.autograd.Function):
    """``tanh(x) = 2 sigmoid(2x) - 1``; backward ``g (1 - y^2)`` from the saved output."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor) -> torch.Tensor:
        y = torch.sigmoid(x * 2).mul_(2).sub_(1)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> torch.Tensor:
        (y,) = ctx.saved_tensors
        return torch.ops.aten.tanh_backward(grad, y)


class SigmoidTanh(nn.Module):
    """``nn.Tanh`` computed as ``2 sigmoid(2x) - 1`` (equal to within 2e-7). Plain version: ``nn.Tanh``.

    With the CPU build of torch 2.13 used here, ``torch.tanh`` on a ``[256, 128]`` float32 tensor
    takes ~110 us against ~35 us for this form; forward plus backward ~130 us against ~85 us.
    That is two of these per PPO gradient step. Small tensors (acting on a few envs) go to
    ``torch.tanh``: there the cost of a Python autograd function is larger than the saving.
    """

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Elementwise tanh."""
        return torch.tanh(x) if x.numel() < 4096 else _SigmoidTanhFunction.apply(x)


# -- relu, for compiled updates ----------------------------------------------------------------


class _SignReLUFunction(torch.autograd.Function):
    """``relu(x)``; backward ``g sign(y)`` from the saved output (``sign(y)`` is 1 where ``y > 0``
    and 0 where ``y = 0``: relu's gradient, as ``threshold_backward`` computes it)."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(x)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> torch.Tensor:
        (y,) = ctx.saved_tensors
        return grad * torch.sign(y)


class ReLU(nn.ReLU):
    """``nn.ReLU`` (the same module, ``isinstance`` included) that compiles well on CPU.

    Under ``torch.compile`` the backward of ``torch.relu`` is partitioned into a forward kernel
    that also stores the mask ``y <= 0`` as a bool tensor for the backward. With torch 2.13's
    inductor on this machine's CPU (AVX-512) a vectorised store of a bool mask runs at ~11 ns per
    element: ~1.4 ms for a ``[2, 256, 256]`` twin-critic activation, against ~0.05 ms for the
    relu itself. Written as ``grad * sign(y)``, the backward keeps no bool tensor, and a compiled
    SAC update (:attr:`rl.algorithms._off_policy.OffPolicyAlgorithm.compile`) is ~1.8x faster
    (``bench/README_rl.md``). In eager mode (not compiling) this is plain ``nn.ReLU``.
    """

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Elementwise ``max(x, 0)``."""
        if torch.compiler.is_compiling():
            return _SignReLUFunction.apply(x)
        return super().forward(x)


# -- two MLPs over the same input ---------------------------------------------------------------


class MLPPair(nn.Module):
    """Two networks over the same input: ``(a(x), b(x))``. The plain version of :class:`FusedMLPPair`."""

    def __init__(self, a: nn.Module, b: nn.Module) -> None:
        super().__init__()
        self.a = a
        self.b = b

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(a(x), b(x))``."""
        return self.a(x), self.b(x)


class FusedMLPPair(nn.Module):
    """Two MLPs with the same hidden sizes, over the same input, evaluated in one pass.

    Mathematically ``(mlp_a(x), mlp_b(x))`` with separate weights (what :meth:`unfused` returns);
    computed as one batched matmul (``baddbmm`` over the pair) per layer, the heads included when
    they have the same width (otherwise one linear layer per head). For the
    small networks of classic control this halves the number of torch operations (forward and
    backward), which is what the time of a gradient step is made of at these sizes. Initialised
    like :func:`rl.networks.mlp` (orthogonal, gain sqrt(2) in hidden layers, ``gain_a``/``gain_b``
    at the heads).
    """

    def __init__(
        self,
        in_dim: int,
        hidden: Sequence[int],
        out_a: int,
        out_b: int,
        activation: type[nn.Module] = nn.Tanh,
        gain_a: float = 1.0,
        gain_b: float = 1.0,
    ) -> None:
        super().__init__()
        if not hidden:
            raise ValueError("FusedMLPPair needs at least one hidden layer")
        self.hidden = tuple(int(h) for h in hidden)
        self.activation = activation()
        hidden_gain = float(np.sqrt(2))
        h0 = self.hidden[0]
        first = torch.empty(2 * h0, in_dim)
        nn.init.orthogonal_(first[:h0], gain=hidden_gain)
        nn.init.orthogonal_(first[h0:], gain=hidden_gain)
        self.first_weight = nn.Parameter(first)
        """``[2 * h0, in]``: rows ``[:h0]`` for network a, ``[h0:]`` for network b."""
        self.first_bias = nn.Parameter(torch.zeros(2 * h0))
        self.weights = nn.ParameterList()
        """Per further hidden layer ``[2, h_in, h_out]`` (already transposed for ``baddbmm``)."""
        self.biases = nn.ParameterList()
        """Per further hidden layer ``[2, 1, h_out]``."""
        for h_in, h_out in itertools.pairwise(self.hidden):
            w = torch.empty(2, h_out, h_in)
            nn.init.orthogonal_(w[0], gain=hidden_gain)
            nn.init.orthogonal_(w[1], gain=hidden_gain)
            self.weights.append(nn.Parameter(w.transpose(1, 2).contiguous()))
            self.biases.append(nn.Parameter(torch.zeros(2, 1, h_out)))
        self.head_a = OutputLinear(self.hidden[-1], out_a)
        self.head_b = OutputLinear(self.hidden[-1], out_b)
        for head, gain in ((self.head_a, gain_a), (self.head_b, gain_b)):
            nn.init.orthogonal_(head.weight, gain=gain)
            nn.init.zeros_(head.bias)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(mlp_a(x), mlp_b(x))`` for ``x`` of shape ``[..., in]``."""
        lead = x.shape[:-1]
        x = x.reshape(-1, x.shape[-1])
        # Every layer is one batched matmul over the pair, on [2, N, h] activations laid out network
        # by network: the first over x broadcast to both (no copy), the heads when their widths agree
        # (twin Q). A [N, 2 h0] first layer viewed as [2, N, h0], or heads on h[0] and h[1], would
        # each cost a [2, N, h]-sized copy or zero-fill in the backward.
        h0 = self.hidden[0]
        first_w = self.first_weight.view(2, h0, -1).transpose(1, 2)  # [2, in, h0]
        h = self.activation(torch.baddbmm(self.first_bias.view(2, 1, h0), x.expand(2, *x.shape), first_w))
        for w, b in zip(self.weights, self.biases, strict=True):
            h = self.activation(torch.baddbmm(b, h, w))
        h, context = outside_autocast(h)
        with context:
            if self.head_a.out_features == self.head_b.out_features:
                head_w = torch.stack((self.head_a.weight, self.head_b.weight)).transpose(1, 2)  # [2, h, out]
                head_b = torch.stack((self.head_a.bias, self.head_b.bias)).unsqueeze(1)  # [2, 1, out]
                a, b_out = torch.baddbmm(head_b, h, head_w).unbind(0)
            else:
                a, b_out = self.head_a(h[0]), self.head_b(h[1])
        return a.reshape(*lead, a.shape[-1]), b_out.reshape(*lead, b_out.shape[-1])

    @torch.no_grad()
    def unfused(self) -> MLPPair:
        """The plain pair with a copy of these weights: two ``nn.Sequential`` MLPs laid out as
        :func:`rl.networks.mlp` lays them out (``Linear, activation, ..., Linear``), with the same
        activation type. Its ``state_dict`` is what an unfused model's pair loads."""
        h0 = self.hidden[0]
        nets = []
        for i, head in enumerate((self.head_a, self.head_b)):
            layers: list[nn.Module] = []
            first = nn.Linear(self.first_weight.shape[1], h0)
            first.weight.copy_(self.first_weight[i * h0 : (i + 1) * h0])
            first.bias.copy_(self.first_bias[i * h0 : (i + 1) * h0])
            layers += [first, type(self.activation)()]
            for w, b in zip(self.weights, self.biases, strict=True):
                lin = nn.Linear(w.shape[1], w.shape[2])
                lin.weight.copy_(w[i].T)
                lin.bias.copy_(b[i, 0])
                layers += [lin, type(self.activation)()]
            out = OutputLinear(head.in_features, head.out_features)
            out.weight.copy_(head.weight)
            out.bias.copy_(head.bias)
            layers.append(out)
            nets.append(nn.Sequential(*layers).to(self.first_weight.device))
        return MLPPair(nets[0], nets[1])


# -- soft (Polyak) update -----------------------------------------------------------------------


@torch.no_grad()
def fused_soft_update_(target: Sequence[torch.Tensor], source: Sequence[torch.Tensor], tau: float) -> None:
    """``t <- t + tau (s - t)`` for every pair, in one ``torch._foreach_lerp_`` call."""
    torch._foreach_lerp_(list(target), list(source), tau)


@torch.no_grad()
def plain_soft_update_(target: Sequence[torch.Tensor], source: Sequence[torch.Tensor], tau: float) -> None:
    """``t <- t + tau (s - t)`` for every pair, one ``lerp_`` per tensor."""
    for t, s in zip(target, source, strict=True):
        t.lerp_(s, tau)


# -- gradient-norm clipping ---------------------------------------------------------------------


def fused_clip_grad_norm_(grads: Sequence[torch.Tensor], max_norm: float | None) -> torch.Tensor:
    """Total L2 norm of ``grads`` (returned, before clipping); when ``max_norm`` is set, scale them
    in place by ``min(1, max_norm / (norm + 1e-6))`` as ``torch.nn.utils.clip_grad_norm_`` does.
    One ``torch._foreach_norm`` and one ``torch._foreach_mul_`` over the list."""
    grads = list(grads)
    norm = torch.linalg.vector_norm(torch.stack(torch._foreach_norm(grads)))
    if max_norm:
        torch._foreach_mul_(grads, (max_norm / (norm + 1e-6)).clamp(max=1.0))
    return norm


def plain_clip_grad_norm_(grads: Sequence[torch.Tensor], max_norm: float | None) -> torch.Tensor:
    """The same as :func:`fused_clip_grad_norm_`, one norm and one ``mul_`` per tensor."""
    norm = torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g) for g in grads]))
    if max_norm:
        coef = (max_norm / (norm + 1e-6)).clamp(max=1.0)
        for g in grads:
            g.mul_(coef)
    return norm


# -- Adam step ----------------------------------------------------------------------------------


class AdamTensors(NamedTuple):
    """What one step of a parameter group of a fused ``torch.optim.Adam`` reads and writes: its
    parameters and their state (the optimiser's own tensors, so its ``state_dict`` follows), its
    hyper-parameters, and the step's two bias-correction factors, computed in float64 before the
    step (as the fused kernel computes them): scalar tensors, so that ``torch.compile``
    specialises neither on them nor on the learning rate."""

    params: list[torch.Tensor]
    exp_avgs: list[torch.Tensor]
    exp_avg_sqs: list[torch.Tensor]
    steps: list[torch.Tensor]
    lr: float
    beta1: float
    beta2: float
    eps: float
    weight_decay: float
    step_size: torch.Tensor
    """``lr / (1 - beta1^t)`` at this step's ``t``."""
    bias_correction2_sqrt: torch.Tensor
    """``sqrt(1 - beta2^t)``."""


def adam_tensors(optimizer: torch.optim.Optimizer, create: bool = False) -> list[AdamTensors] | None:
    """Per parameter group, the :class:`AdamTensors` of a ``torch.optim.Adam(fused=True)`` doing
    plain Adam (L2 weight decay allowed), for :func:`adam_`; ``None`` for any other optimiser or
    option (``amsgrad``, ``maximize``, decoupled weight decay, a tensor learning rate or betas,
    parameters of mixed devices or dtypes, step counts that differ between parameters), and, unless
    ``create``, where a parameter has no state yet. ``create`` makes the missing state as the optimiser's first ``step()`` would (step count
    ``0`` as a float32 scalar on the parameter's device, zero moments)."""
    if type(optimizer) is not torch.optim.Adam or not optimizer.defaults.get("fused"):
        return None
    groups: list[AdamTensors] = []
    for group in optimizer.param_groups:
        beta1, beta2 = group["betas"]
        params = group["params"]
        if (
            group["amsgrad"]
            or group["maximize"]
            or group.get("decoupled_weight_decay")
            or not group["fused"]
            or any(isinstance(v, torch.Tensor) for v in (group["lr"], beta1, beta2))
            or len({(p.device, p.dtype) for p in params}) > 1
        ):
            return None
        states = []
        for p in params:
            state = optimizer.state.get(p)
            if not state:
                if not create:
                    return None
                state = optimizer.state[p]
                state["step"] = torch.zeros((), dtype=torch.float32, device=p.device)
                state["exp_avg"] = torch.zeros_like(p, memory_format=torch.preserve_format)
                state["exp_avg_sq"] = torch.zeros_like(p, memory_format=torch.preserve_format)
            states.append(state)
        steps = [st["step"] for st in states]
        counts = {float(t) for t in steps}
        if len(counts) > 1:  # parameters stepped apart (some had no gradient at some step)
            return None
        t = (counts.pop() if counts else 0.0) + 1.0
        lr = group["lr"]
        groups.append(
            AdamTensors(
                list(params),
                [st["exp_avg"] for st in states],
                [st["exp_avg_sq"] for st in states],
                steps,
                lr,
                beta1,
                beta2,
                group["eps"],
                group["weight_decay"],
                torch.tensor(lr / (1.0 - beta1**t), dtype=torch.float32),
                torch.tensor(math.sqrt(1.0 - beta2**t), dtype=torch.float32),
            )
        )
    return groups


@torch.no_grad()
def adam_(adam: AdamTensors, grads: Sequence[torch.Tensor]) -> None:
    """One Adam step (Kingma and Ba 2015, Algorithm 1) of ``adam.params`` along ``grads``, in place:

        g = grad + weight_decay theta,  t = t + 1
        m = beta1 m + (1 - beta1) g,    v = beta2 v + (1 - beta2) g^2
        theta = theta - lr / (1 - beta1^t) m / (sqrt(v) / sqrt(1 - beta2^t) + eps)

    In eager mode, the two kernels of ``Adam(fused=True).step()`` (``torch._foreach_add_`` on the
    step counts, ``torch._fused_adam_``): the same result to the bit. Under ``torch.compile``, the
    formula above as tensor operations, which inductor fuses into the code around them, with the
    bias corrections that :func:`adam_tensors` computed (inductor would otherwise compute
    ``beta^t`` again for every element).
    """
    grads = list(grads)
    if not torch.compiler.is_compiling():
        # The CPU kernel reads a gradient's memory as if laid out like its parameter (torch 2.13):
        # a transposed view (rl.backprop's narrow products) is copied into that layout first.
        grads = [
            g if g.stride() == p.stride() else torch.empty_like(p).copy_(g)
            for p, g in zip(adam.params, grads, strict=True)
        ]
        torch._foreach_add_(adam.steps, 1)
        torch._fused_adam_(
            adam.params,
            grads,
            adam.exp_avgs,
            adam.exp_avg_sqs,
            [],
            adam.steps,
            amsgrad=False,
            lr=adam.lr,
            beta1=adam.beta1,
            beta2=adam.beta2,
            weight_decay=adam.weight_decay,
            eps=adam.eps,
            maximize=False,
        )
        return
    torch._foreach_add_(adam.steps, 1)
    for p, g, m, v in zip(adam.params, grads, adam.exp_avgs, adam.exp_avg_sqs, strict=True):
        if adam.weight_decay:
            g = g + adam.weight_decay * p
        m.lerp_(g, 1.0 - adam.beta1)
        v.mul_(adam.beta2).addcmul_(g, g, value=1.0 - adam.beta2)
        p.sub_(adam.step_size * m / (v.sqrt() / adam.bias_correction2_sqrt + adam.eps))


def fused_adam_step_(optimizer: torch.optim.Optimizer) -> None:
    """``optimizer.step()`` for a ``torch.optim.Adam(fused=True)``: per parameter group, the two
    kernels that step runs (:func:`adam_`), on the optimiser's own state, so its ``state_dict`` is
    what ``step()`` would leave.

    ``Optimizer.step`` spends ~90 us per call on bookkeeping (hooks, the profiler's record,
    collecting and grouping tensors) around ~100 us of kernels for a 256x256 twin critic: three
    calls per SAC update. Anything :func:`adam_tensors` refuses, state not yet created, or a
    parameter without a gradient takes ``optimizer.step()``; the results are equal to the bit
    (``tests/rl/test_rl_compile.py``).
    """
    groups = adam_tensors(optimizer)
    if groups is None or any(p.grad is None for adam in groups for p in adam.params):
        optimizer.step()  # creates the state at the first step
        return
    for adam in groups:
        adam_(adam, [p.grad for p in adam.params])  # type: ignore[misc]
