"""Forward and backward passes of ReLU MLPs written out, without autograd: the fast path of the
SAC, TD3 and DDPG updates.

A SAC gradient step at batch 256 with 256x256 networks is sixteen 256x256x256 matrix products
(forward, backward and targets of the twin critics and the actor). On one core of a CPU without
bfloat16 units they take ~8-11 ms; autograd, or ``torch.compile``'s wrappers and its choice of
batched products with transposed operands, added 6-9 ms more. Written out, each layer is one
``addmm`` and an in-place ReLU going forward, and going back, the weight gradient
(``g^T x``), the bias gradient (``sum g``) and the input gradient (``(g W) * [y > 0]``), each
product on operands laid out as BLAS takes them, and a product with a narrow result (a policy's
head, a first layer's weight gradient) taken transposed, its narrow side in the rows. Only what
a caller needs is computed: a critic's weight gradients in its own step, its input gradient
towards the action (those columns only) in the actor's, and for TD3's actor only the first
critic of the pair. The algorithms' written-out updates (:mod:`rl.algorithms.written_out`) apply
the gradients with :func:`rl.fused.adam_`, in the same function (one ``torch.compile`` graph per
update).

:class:`Tape` keeps a forward pass's layer inputs for its backward pass. Two kinds of network:

- :func:`mlp_forward` / :func:`mlp_backward` on :data:`Layers`: an ``nn.Sequential`` of
  ``nn.Linear`` layers with ReLU between them (:func:`mlp_layers`; :func:`rl.networks.mlp` with
  ``activation=ReLU``), or the first network of a pair (:func:`pair_first_layers`);
- :func:`pair_forward` / :func:`pair_backward`: a :class:`rl.fused.FusedMLPPair` with ReLU and
  heads of width 1 (the twin critic's default), in its own parameter layout.

:func:`supports` tells whether a network is one of these. The results equal autograd's to float
rounding (``tests/rl/test_rl_backprop.py``); SAC, TD3 and DDPG use them when their fast paths
are on (``written_out``), and their updates equal the autograd ones (``tests/rl/test_rl_written_out.py``).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from rl.fused import FusedMLPPair, ReLU
from rl.precision import OutputLinear

__all__ = [
    "Layers",
    "Tape",
    "hooked",
    "mlp_backward",
    "mlp_forward",
    "mlp_layers",
    "pair_backward",
    "pair_first_layers",
    "pair_forward",
    "supports",
]


@dataclass
class Tape:
    """The input of each layer of one forward pass, ``inputs[0]`` the network's input and
    ``inputs[i]`` (``i > 0``) the ReLU output that fed layer ``i``: a ReLU's output is all its
    backward needs (its gradient is 1 where the output is positive)."""

    inputs: list[torch.Tensor]


def _linears(net: nn.Module) -> list[nn.Linear] | None:
    """The linear layers of ``Linear, ReLU, Linear, ..., Linear`` (each with a bias, none used
    twice), or ``None`` for any other shape."""
    if type(net) is not nn.Sequential or len(net) % 2 == 0:
        return None
    layers = list(net)
    linears = [m for m in layers[0::2] if isinstance(m, nn.Linear) and type(m) in (nn.Linear, OutputLinear)]
    if len(linears) != len(layers[0::2]) or len({id(m) for m in linears}) != len(linears):
        return None
    if any(m.bias is None for m in linears) or not all(type(m) in (nn.ReLU, ReLU) for m in layers[1::2]):
        return None
    return linears


def hooked(net: nn.Module) -> bool:
    """Whether a hook could change what ``net`` computes or what its gradients are: a hook on it,
    on any module in it, on any of its parameters, or a global module hook."""
    hook_dicts = ("_forward_hooks", "_forward_pre_hooks", "_backward_hooks", "_backward_pre_hooks")
    if any(getattr(m, name, None) for m in net.modules() for name in hook_dicts):
        return True
    if any(p._backward_hooks or getattr(p, "_post_accumulate_grad_hooks", None) for p in net.parameters()):
        return True
    from torch.nn.modules import module as module_globals

    global_hooks = (
        "_global_forward_hooks",
        "_global_forward_pre_hooks",
        "_global_backward_hooks",
        "_global_backward_pre_hooks",
    )
    return any(getattr(module_globals, name, None) for name in global_hooks)


def supports(net: nn.Module) -> bool:
    """Whether :func:`mlp_forward` (a ReLU ``nn.Sequential``) or :func:`pair_forward` (a ReLU
    :class:`rl.fused.FusedMLPPair` with heads of width 1) computes ``net``'s forward pass, in
    float32, with every parameter trained and no hook to honour (checked when called: SAC
    checks when it is built)."""
    if any(p.dtype != torch.float32 or not p.requires_grad for p in net.parameters()) or hooked(net):
        return False
    if type(net) is FusedMLPPair:
        heads_of_one = net.head_a.out_features == net.head_b.out_features == 1
        return type(net.activation) in (nn.ReLU, ReLU) and heads_of_one
    return _linears(net) is not None


def _relu_backward(grad: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    """``grad * [out > 0]`` for ``out = relu(x)``, in one pass."""
    return torch.ops.aten.threshold_backward(grad, out, 0.0)


# MKL runs a product whose result has few columns several times slower per flop than the same
# product transposed (rows few, columns many): on one AVX2 core, [256, 512] x [512, 23] takes
# ~205 us and its transpose [23, 512] x [512, 256] ~115 us; [512, 256] x [256, 23] ~285 us
# against ~110 us. The three helpers below put the narrow side in the rows, and return the
# transposed view where that changed the orientation.


def _linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    """``x W^T + b`` (``[B, out]``); where ``1 < out < min(B, in)`` (a policy's head), as
    ``(W x^T + b)^T``."""
    out = weight.shape[0]
    if 1 < out < min(x.shape[0], x.shape[1]):
        return torch.addmm(bias.unsqueeze(1), weight, x.t()).t()
    return torch.addmm(bias, x, weight.t())


def _weight_grad(grad: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """``grad^T x`` (``[out, in]``, the gradient of a weight), with the narrower of ``out`` and
    ``in`` as the product's rows."""
    if x.shape[1] < grad.shape[1]:
        return (x.t() @ grad).t()
    return grad.t() @ x


def _input_grad(grad: torch.Tensor, weight: torch.Tensor, start: int = 0) -> torch.Tensor:
    """``(grad W)[:, start:]`` (``[B, in - start]``, the gradient of a layer's input), as
    ``(W^T grad^T)^T`` where ``in - start`` is narrower than the batch and ``out``."""
    weight = weight[:, start:]
    if weight.shape[1] < min(grad.shape[0], grad.shape[1]):
        return (weight.t() @ grad.t()).t()
    return grad @ weight


Layers = list[tuple[torch.Tensor, torch.Tensor]]
"""An MLP as its ``(weight [out, in], bias [out])`` per layer, ReLU between them."""


def mlp_layers(net: nn.Sequential) -> Layers:
    """The layers of a ReLU MLP (:func:`supports`), as its ``nn.Linear`` weights and biases."""
    linears = _linears(net)
    assert linears is not None, "mlp_layers: not a Linear/ReLU nn.Sequential"
    return [(m.weight, m.bias) for m in linears]


def pair_first_layers(pair: FusedMLPPair) -> Layers:
    """The first network of a ReLU :class:`rl.fused.FusedMLPPair` (TD3's actor follows ``Q_1``
    alone), as views of the pair's parameters (:func:`mlp_backward` of these: input gradients only,
    its weight gradients would be laid out as the views are, not as the parameters)."""
    h0 = pair.hidden[0]
    layers = [(pair.first_weight[:h0], pair.first_bias[:h0])]
    layers += [(w[0].t(), b[0, 0]) for w, b in zip(pair.weights, pair.biases, strict=True)]
    return [*layers, (pair.head_a.weight, pair.head_a.bias)]


def mlp_forward(layers: Layers, x: torch.Tensor) -> tuple[torch.Tensor, Tape]:
    """The MLP's output for ``x`` (``[B, in]``), and the tape for :func:`mlp_backward`."""
    inputs = [x]
    for weight, bias in layers[:-1]:
        x = _linear(x, weight, bias).relu_()
        inputs.append(x)
    weight, bias = layers[-1]
    return _linear(x, weight, bias), Tape(inputs)


def mlp_backward(
    layers: Layers,
    tape: Tape,
    grad: torch.Tensor,
    weight_grads: bool = True,
    input_grad: bool = False,
    input_from: int = 0,
) -> tuple[list[torch.Tensor] | None, torch.Tensor | None]:
    """Back through :func:`mlp_forward` from ``grad`` (``dL/d output``): the gradients of each
    layer's weight and bias in turn, as ``nn.Sequential.parameters()`` orders them (``None``
    unless ``weight_grads``), and ``dL/d x[:, input_from:]`` (``None`` unless ``input_grad``: a
    critic's gradient towards the action, the last columns of its input)."""
    grads: list[torch.Tensor] = []
    for i in range(len(layers) - 1, -1, -1):
        x = tape.inputs[i]
        if weight_grads:
            grads += [grad.sum(0), _weight_grad(grad, x)]  # bias, weight: reversed below
        if i > 0:
            grad = _relu_backward(grad @ layers[i][0], x)
        elif input_grad:
            grad = _input_grad(grad, layers[0][0], input_from)
    return (grads[::-1] if weight_grads else None), (grad if input_grad else None)


def pair_forward(pair: FusedMLPPair, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, Tape]:
    """``pair(x)`` for a ReLU :class:`rl.fused.FusedMLPPair` with heads of width 1 (twin Q),
    as ``(a, b)`` of shape ``[B]`` each, and the tape for :func:`pair_backward`. ``x``: ``[B, in]``.

    The first layer of both networks is one product (``[B, in] x [in, 2 h0]``); each further layer
    and head is one product per network, on its half of the activations."""
    h0 = pair.hidden[0]
    first = torch.addmm(pair.first_bias, x, pair.first_weight.t()).relu_()  # [B, 2 h0]
    hs = [first[:, :h0], first[:, h0:]]
    inputs = [x, first]
    for w, b in zip(pair.weights, pair.biases, strict=True):
        hs = [torch.addmm(b[i, 0], hs[i], w[i]).relu_() for i in range(2)]
        inputs += hs
    heads = (pair.head_a, pair.head_b)
    a, b_out = (torch.addmm(heads[i].bias, hs[i], heads[i].weight.t()).squeeze(-1) for i in range(2))
    return a, b_out, Tape(inputs)


def pair_backward(
    pair: FusedMLPPair,
    tape: Tape,
    grad_a: torch.Tensor,
    grad_b: torch.Tensor,
    weight_grads: bool = True,
    input_grad: bool = False,
    input_from: int = 0,
) -> tuple[list[torch.Tensor] | None, torch.Tensor | None]:
    """Back through :func:`pair_forward` from ``dL/da`` and ``dL/db`` (``[B]`` each): the
    gradients of ``pair.parameters()`` in their order (``None`` unless ``weight_grads``) and
    ``dL/d x[:, input_from:]`` (``None`` unless ``input_grad``)."""
    h0 = pair.hidden[0]
    heads = (pair.head_a, pair.head_b)
    first = tape.inputs[1]
    # outs[k]: the two networks' outputs of hidden layer k (the inputs of pair.weights[k], or of the heads).
    outs = [[first[:, :h0], first[:, h0:]]]
    outs += [tape.inputs[i : i + 2] for i in range(2, len(tape.inputs), 2)]
    g_out = [grad_a.unsqueeze(-1), grad_b.unsqueeze(-1)]
    head_grads = [[g.sum(0), _weight_grad(g, h)] for g, h in zip(g_out, outs[-1], strict=True)] if weight_grads else []
    gs = [_relu_backward(g_out[i] * heads[i].weight, outs[-1][i]) for i in range(2)]
    layer_grads: list[list[torch.Tensor]] = []
    for k in range(len(pair.weights) - 1, -1, -1):
        w, xs = pair.weights[k], outs[k]
        if weight_grads:
            layer_grads.append(
                [
                    torch.stack([g.sum(0, keepdim=True) for g in gs]),  # [2, 1, out]
                    torch.stack([x.t() @ g for x, g in zip(xs, gs, strict=True)]),  # [2, in, out]
                ]
            )
        gs = [_relu_backward(gs[i] @ w[i].t(), xs[i]) for i in range(2)]
    g_first = torch.cat(gs, dim=1)  # [B, 2 h0]
    x = tape.inputs[0]
    grads: list[torch.Tensor] | None = None
    if weight_grads:
        grads = [_weight_grad(g_first, x), g_first.sum(0)]
        hidden = layer_grads[::-1]
        grads += [g[1] for g in hidden] + [g[0] for g in hidden]  # weights list, then biases list
        grads += head_grads[0][::-1] + head_grads[1][::-1]  # head_a weight, bias; head_b weight, bias
    return grads, (_input_grad(g_first, pair.first_weight, input_from) if input_grad else None)
