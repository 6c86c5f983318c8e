"""``compile=True`` for SAC, TD3 and DDPG: their compiled losses (in float32: their written-out gradients,
:mod:`rl.backprop`) compute what the eager ones compute, they pickle,
and the pieces it relies on (:class:`rl.fused.ReLU` under ``torch.compile``, and
:func:`rl.fused.fused_adam_step_`, :func:`rl.fused.adam_` eager and compiled) equal their plain
versions."""

from __future__ import annotations

import copy
import pickle
from collections.abc import Iterator
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch
from torch import nn
from torch._dynamo.testing import CompileCounterWithBackend

import rl
from rl.agent import to_torch
from rl.fused import AdamTensors, ReLU, adam_, adam_tensors, fused_adam_step_


@pytest.fixture(autouse=True, scope="module")
def _compile_in_this_thread() -> Iterator[None]:
    """No thread that outlives a test, so that the suite's thread-leak check holds: inductor
    builds kernels on a process-wide pool of threads (with one compile thread, in the caller's),
    and its (disabled) progress bar starts tqdm's process-wide monitor thread (not with
    ``monitor_interval = 0``)."""
    bar = torch.hub.tqdm
    interval = getattr(bar, "monitor_interval", None)
    if interval is not None:
        bar.monitor_interval = 0
    try:
        with torch._inductor.config.patch(compile_threads=1):
            yield
    finally:
        if interval is not None:
            bar.monitor_interval = interval


OBS = gym.spaces.Box(-np.inf, np.inf, (5,), np.float32)
ACT = gym.spaces.Box(-2.0, 2.0, (2,), np.float32)


ALGOS = ("SAC", "TD3", "DDPG")


def _algo(name: str, compile: bool, autocast: torch.dtype | None = None) -> Any:
    """``rl.<name>`` on small networks, the same weights for every call."""
    torch.manual_seed(0)
    if name == "SAC":
        actor: nn.Module = rl.SquashedGaussianActor(OBS, ACT, (32, 32))
    else:
        actor = rl.DeterministicActor(OBS, ACT, (32, 32))
    critic = rl.QCritic(OBS, ACT, (32, 32)) if name == "DDPG" else rl.TwinQCritic(OBS, ACT, (32, 32))
    return getattr(rl, name)(actor, critic, compile=compile, autocast=autocast)


def _batches(n: int, size: int = 64) -> list[rl.ReplayBatch[torch.Tensor]]:
    rng = np.random.default_rng(0)
    replay = rl.UniformReplay(1000, (5,), (2,), seed=0)
    m = 500
    replay.add(
        rng.standard_normal((m, 5)).astype(np.float32),
        rng.uniform(-2, 2, (m, 2)).astype(np.float32),
        rng.standard_normal(m).astype(np.float32),
        rng.standard_normal((m, 5)).astype(np.float32),
        rng.random(m) < 0.1,
    )
    return [to_torch(replay.sample(size)) for _ in range(n)]


@pytest.mark.parametrize("autocast", [None, torch.bfloat16], ids=["float32", "bf16"])
@pytest.mark.parametrize("name", ALGOS)
def test_compiled_losses_learn_what_eager_ones_learn(name: str, autocast: torch.dtype | None) -> None:
    """The same updates from the same weights, batches and noise: the same metrics, TD errors and
    weights (to float tolerance), and the compiled functions really are used."""
    eager, compiled = _algo(name, False, autocast), _algo(name, True, autocast)
    for i, batch in enumerate(_batches(4)):
        torch.manual_seed(100 + i)
        m_eager = eager.learn(batch)
        torch.manual_seed(100 + i)
        m_compiled = compiled.learn(batch)
        for key, value in m_eager.items():
            assert m_compiled[key] == pytest.approx(value, rel=1e-4, abs=1e-5, nan_ok=True), key
        np.testing.assert_allclose(compiled.td_errors, eager.td_errors, rtol=0, atol=2e-3)
    assert set(compiled._compiled) == _compiled_names(compiled)
    assert not eager._compiled
    pairs = [(eager.critic, compiled.critic), (eager.model, compiled.model)]
    pairs.append((eager.target_critic, compiled.target_critic))
    if name != "SAC":
        pairs.append((eager.target_actor, compiled.target_actor))
    for a, b in pairs:
        for p, q in zip(a.parameters(), b.parameters(), strict=True):
            torch.testing.assert_close(q, p, rtol=0, atol=1e-4)


@pytest.mark.parametrize("name", ["SAC", "TD3"])
def test_a_compiled_algorithm_pickles_and_its_copy_compiles_its_own(name: str) -> None:
    algo = _algo(name, True)
    batches = _batches(2)
    algo.learn(batches[0])
    algo.learn(batches[1])
    assert algo._compiled
    for clone in (pickle.loads(pickle.dumps(algo)), copy.deepcopy(algo)):
        assert clone.compile and not clone._compiled
        metrics = [clone.learn(batch) for batch in batches]  # TD3: the actor's loss at every other step
        assert all(np.isfinite(m["critic_loss"]) for m in metrics)
        assert set(clone._compiled) == _compiled_names(clone)


def _compiled_names(algo: Any) -> set[str]:
    """What ``compile`` compiles: the written-out update (float32), else the losses."""
    if getattr(algo, "written_out", False):
        return {"_sac_update" if isinstance(algo, rl.SAC) else "_deterministic_update"}
    return {"_critic_loss", "_actor_loss"}


def test_relu_is_nn_relu_eager_and_compiled() -> None:
    """Values and gradients of :class:`rl.fused.ReLU` equal ``nn.ReLU``'s, zeros included, in eager
    mode and under ``torch.compile`` (where its backward is ``grad * sign(y)``)."""
    x = torch.tensor([-2.0, -0.0, 0.0, 1e-30, 3.0]).repeat(40)
    grad_out = torch.linspace(-1, 1, x.numel())

    def value_and_grad(act: nn.Module, compiled: bool) -> tuple[torch.Tensor, torch.Tensor]:
        xr = x.clone().requires_grad_()
        fn = torch.compile(act, dynamic=False) if compiled else act
        y = fn(xr)
        y.backward(grad_out)
        assert xr.grad is not None
        return y.detach(), xr.grad

    assert isinstance(ReLU(), nn.ReLU)
    y_ref, g_ref = value_and_grad(nn.ReLU(), False)
    for compiled in (False, True):
        y, g = value_and_grad(ReLU(), compiled)
        torch.testing.assert_close(y, y_ref, rtol=0, atol=0)
        torch.testing.assert_close(g, g_ref, rtol=0, atol=0)


def _adam_pair(
    amsgrad: bool = False, maximize: bool = False
) -> tuple[nn.Sequential, torch.optim.Adam, nn.Sequential, torch.optim.Adam]:
    """Two copies of a small network, each with a fused Adam of two parameter groups."""
    torch.manual_seed(0)
    a = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    b = copy.deepcopy(a)

    def adam(m: nn.Sequential) -> torch.optim.Adam:
        groups: list[dict[str, Any]] = [
            {"params": list(m[0].parameters())},
            {"params": list(m[2].parameters()), "lr": 1e-2, "weight_decay": 0.1},
        ]
        return torch.optim.Adam(groups, lr=3e-4, fused=True, amsgrad=amsgrad, maximize=maximize)

    return a, adam(a), b, adam(b)


@pytest.mark.parametrize("kwargs", [{}, {"amsgrad": True}, {"maximize": True}], ids=["adam", "amsgrad", "maximize"])
def test_fused_adam_step_equals_adam_step_to_the_bit(kwargs: dict) -> None:
    """Several steps (the first creates the state through ``step()``; amsgrad and maximize always
    take ``step()``): the same weights and the same ``state_dict``."""
    a, opt_a, b, opt_b = _adam_pair(**kwargs)
    x = torch.randn(16, 4)
    for _ in range(4):
        for model, opt, step in ((a, opt_a, lambda o: o.step()), (b, opt_b, fused_adam_step_)):
            opt.zero_grad(set_to_none=True)
            model(x).pow(2).mean().backward()
            step(opt)
    for p, q in zip(a.parameters(), b.parameters(), strict=True):
        assert torch.equal(p, q)
    sa, sb = opt_a.state_dict(), opt_b.state_dict()
    assert sa["param_groups"] == sb["param_groups"]
    for k, st in sa["state"].items():
        for name, value in st.items():
            assert torch.equal(value, sb["state"][k][name]), name


def test_fused_adam_step_takes_step_when_a_gradient_is_missing() -> None:
    a, opt_a, b, opt_b = _adam_pair()
    x, h = torch.randn(16, 4), torch.randn(3, 8)
    for model, opt in ((a, opt_a), (b, opt_b)):
        model(x).pow(2).mean().backward()
        opt.step()  # state for every parameter
        opt.zero_grad(set_to_none=True)
        model[2](h).sum().backward()  # only the second layer gets gradients
    opt_a.step()
    fused_adam_step_(opt_b)
    for p, q in zip(a.parameters(), b.parameters(), strict=True):
        assert torch.equal(p, q)


def _adam_steps(compiled: bool) -> tuple[nn.Sequential, torch.optim.Adam, nn.Sequential, torch.optim.Adam, int]:
    """Six steps of the same gradients: ``optimizer.step()`` on one copy, :func:`rl.fused.adam_`
    (its state created by :func:`rl.fused.adam_tensors`) on the other, with each weight's
    gradient handed over transposed where it is a matrix, and the learning rate changed after
    three steps. Returns both and how many times ``adam_`` was compiled."""
    a, opt_a, b, opt_b = _adam_pair()
    counter = CompileCounterWithBackend("inductor")

    def adam_step(group: AdamTensors, grads: list[torch.Tensor]) -> None:
        # A function of its own: dynamo keeps compiled code per code object, and adam_'s is
        # torch.no_grad's wrapper, which every no_grad function compiled in this process shares.
        adam_(group, grads)

    step = torch.compile(adam_step, backend=counter, dynamic=False) if compiled else adam_
    x = torch.randn(16, 4)
    for i in range(6):
        if i == 3:
            for opt in (opt_a, opt_b):
                opt.param_groups[1]["lr"] = 3e-3
        for model, opt in ((a, opt_a), (b, opt_b)):
            opt.zero_grad(set_to_none=True)
            model(x).pow(2).mean().backward()
        opt_a.step()
        groups = adam_tensors(opt_b, create=True)
        assert groups is not None
        for group in groups:
            grads = []
            for p in group.params:
                assert p.grad is not None
                grads.append(p.grad.t().contiguous().t() if p.dim() == 2 else p.grad)
            assert any(not g.is_contiguous() for g in grads)
            step(group, grads)
    return a, opt_a, b, opt_b, counter.frame_count


@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "compiled"])
def test_adam_equals_adam_step(compiled: bool) -> None:
    """``adam_`` takes Adam's step (weight decay included) on transposed gradients: eager, to the
    bit (its kernel would read a transposed gradient in its parameter's layout, unless copied);
    compiled, to float rounding, with no new compile when the learning rate or step changes
    (one per parameter group)."""
    a, opt_a, b, opt_b, compiles = _adam_steps(compiled)
    for p, q in zip(a.parameters(), b.parameters(), strict=True):
        if compiled:
            torch.testing.assert_close(q, p, rtol=0, atol=1e-6)
        else:
            assert torch.equal(p, q)
    sa, sb = opt_a.state_dict(), opt_b.state_dict()
    assert sa["param_groups"] == sb["param_groups"]
    for k, st in sa["state"].items():
        assert st.keys() == sb["state"][k].keys()
        for name, value in st.items():
            assert value.dtype == sb["state"][k][name].dtype, name
            torch.testing.assert_close(sb["state"][k][name], value, rtol=1e-5, atol=1e-9, msg=name)
    assert compiles == (2 if compiled else 0)


def test_adam_tensors_refuses_what_adam_does_not_compute() -> None:
    """Other optimisers and Adam's other options take ``step()``; so does a group whose
    parameters were stepped apart; and without ``create``, state not made yet."""
    net = nn.Linear(3, 2)
    assert adam_tensors(torch.optim.SGD(net.parameters(), lr=0.1)) is None
    assert adam_tensors(torch.optim.Adam(net.parameters(), fused=False), create=True) is None
    for option in ({"amsgrad": True}, {"maximize": True}, {"lr": torch.tensor(1e-3)}):
        assert adam_tensors(torch.optim.Adam(net.parameters(), fused=True, **option), create=True) is None
    opt = torch.optim.Adam(net.parameters(), fused=True)
    assert adam_tensors(opt) is None and not opt.state  # nothing created without create
    groups = adam_tensors(opt, create=True)
    assert groups is not None and float(groups[0].steps[0]) == 0.0
    opt.state[net.bias]["step"].add_(1)
    assert adam_tensors(opt) is None
