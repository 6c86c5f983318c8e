"""The written-out forward and backward passes (:mod:`rl.backprop`) against autograd: the same
outputs and gradients, to float rounding; and :func:`rl.backprop.supports` only what they compute.
The algorithms' updates built on them: tests/rl/test_rl_written_out.py."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from rl import backprop
from rl.fused import FusedMLPPair, ReLU
from rl.networks import mlp


def _autograd_grads(module: nn.Module, loss: torch.Tensor) -> list[torch.Tensor]:
    return list(torch.autograd.grad(loss, list(module.parameters())))


@pytest.mark.parametrize("hidden", [(16,), (32, 32), (8, 16, 8)], ids=str)
def test_mlp_backward_equals_autograd(hidden: tuple[int, ...]) -> None:
    torch.manual_seed(0)
    net = mlp(7, hidden, 3, ReLU)
    x = torch.randn(40, 7)
    upstream = torch.randn(40, 3)
    layers = backprop.mlp_layers(net)
    out, tape = backprop.mlp_forward(layers, x)
    torch.testing.assert_close(out, net(x))
    grads, dx = backprop.mlp_backward(layers, tape, upstream, input_grad=True)
    x_ref = x.clone().requires_grad_(True)
    ref = _autograd_grads(net, (net(x_ref) * upstream).sum())
    (dx_ref,) = torch.autograd.grad((net(x_ref) * upstream).sum(), x_ref)
    assert grads is not None and dx is not None and len(grads) == len(ref)
    for g, r in zip(grads, ref, strict=True):
        torch.testing.assert_close(g, r, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(dx, dx_ref, rtol=1e-5, atol=1e-6)
    only_input, dx2 = backprop.mlp_backward(layers, tape, upstream, weight_grads=False, input_grad=True)
    assert only_input is None and dx2 is not None
    torch.testing.assert_close(dx2, dx)


@pytest.mark.parametrize("hidden", [(16,), (32, 32), (8, 16, 8)], ids=str)
def test_pair_backward_equals_autograd(hidden: tuple[int, ...]) -> None:
    torch.manual_seed(0)
    pair = FusedMLPPair(6, hidden, 1, 1, ReLU)
    x = torch.randn(50, 6)
    ga, gb = torch.randn(50), torch.randn(50)
    a, b, tape = backprop.pair_forward(pair, x)
    a_ref, b_ref = pair(x)
    torch.testing.assert_close(a, a_ref.squeeze(-1))
    torch.testing.assert_close(b, b_ref.squeeze(-1))
    grads, dx = backprop.pair_backward(pair, tape, ga, gb, input_grad=True)
    x_ref = x.clone().requires_grad_(True)
    a_ref, b_ref = pair(x_ref)
    loss = (a_ref.squeeze(-1) * ga).sum() + (b_ref.squeeze(-1) * gb).sum()
    *ref, dx_ref = torch.autograd.grad(loss, [*pair.parameters(), x_ref])
    assert grads is not None and dx is not None
    names = [name for name, _ in pair.named_parameters()]
    for name, g, r in zip(names, grads, ref, strict=True):
        assert g.shape == r.shape, name
        torch.testing.assert_close(g, r, rtol=1e-5, atol=1e-6, msg=name)
    torch.testing.assert_close(dx, dx_ref, rtol=1e-5, atol=1e-6)


def test_supports_only_what_it_computes() -> None:
    assert backprop.supports(mlp(4, (8,), 2, ReLU))
    assert backprop.supports(mlp(4, (8,), 2, nn.ReLU))
    assert not backprop.supports(mlp(4, (8,), 2, nn.Tanh))
    assert not backprop.supports(mlp(4, (8,), 2, ReLU).double())
    hooked = mlp(4, (8,), 2, ReLU)
    hooked[0].register_forward_hook(lambda *_: None)
    assert not backprop.supports(hooked)
    assert not backprop.supports(nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.LayerNorm(8), nn.Linear(8, 2)))
    assert backprop.supports(FusedMLPPair(4, (8, 8), 1, 1, ReLU))
    assert not backprop.supports(FusedMLPPair(4, (8, 8), 1, 1, nn.Tanh))
    assert not backprop.supports(FusedMLPPair(4, (8, 8), 3, 3, ReLU))  # twin Q heads only

    class Pair(FusedMLPPair):
        pass

    assert not backprop.supports(Pair(4, (8, 8), 1, 1, ReLU))  # a subclass may compute otherwise

    class Seq(nn.Sequential):
        pass

    assert not backprop.supports(Seq(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2)))
    assert not backprop.supports(nn.Sequential(nn.Linear(4, 8, bias=False), nn.ReLU(), nn.Linear(8, 2)))
    shared = nn.Linear(8, 8)
    assert not backprop.supports(nn.Sequential(nn.Linear(4, 8), nn.ReLU(), shared, nn.ReLU(), shared))
    frozen = mlp(4, (8,), 2, ReLU)
    frozen[0].weight.requires_grad_(False)
    assert not backprop.supports(frozen)
    param_hooked = FusedMLPPair(4, (8, 8), 1, 1, ReLU)
    param_hooked.head_a.weight.register_hook(lambda g: g * 0)
    assert not backprop.supports(param_hooked)
    sub_hooked = FusedMLPPair(4, (8, 8), 1, 1, ReLU)
    sub_hooked.head_b.register_forward_hook(lambda *_: None)
    assert not backprop.supports(sub_hooked)
    handle = nn.modules.module.register_module_forward_hook(lambda *_: None)
    try:
        assert not backprop.supports(mlp(4, (8,), 2, ReLU))
    finally:
        handle.remove()
    assert backprop.supports(mlp(4, (8,), 2, ReLU))
