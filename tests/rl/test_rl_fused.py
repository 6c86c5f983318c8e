"""Each fast path of ``rl.fused`` equals its plain version (values and gradients), and the switch."""

from __future__ import annotations

import copy
import os
import subprocess
import sys

import gymnasium as gym
import numpy as np
import pytest
import torch
from torch import nn

import rl
from rl import fused
from rl.fused import FusedMLPPair, MLPPair, SigmoidTanh


def test_sigmoid_tanh_matches_tanh_and_its_gradient() -> None:
    for n in (8192, 100):  # the sigmoid form (large tensors) and the torch.tanh one (small)
        x = torch.linspace(-12, 12, n, requires_grad=True)
        y = SigmoidTanh()(x)
        (g,) = torch.autograd.grad(y.sum(), x)
        xr = x.detach().requires_grad_()
        yr = nn.Tanh()(xr)
        (gr,) = torch.autograd.grad(yr.sum(), xr)
        torch.testing.assert_close(y, yr.detach(), atol=3e-7, rtol=0)
        torch.testing.assert_close(g, gr, atol=1e-6, rtol=0)


def test_fused_mlp_pair_is_two_separate_mlps() -> None:
    """One pass over both networks gives what two MLPs written out from the same weights give."""
    torch.manual_seed(0)
    twin = FusedMLPPair(4, (8, 6, 5), 3, 1)
    x = torch.randn(2, 7, 4)

    def plain(i: int, head: torch.nn.Linear) -> torch.Tensor:
        h0 = twin.hidden[0]
        h = torch.tanh(
            torch.nn.functional.linear(
                x, twin.first_weight[i * h0 : (i + 1) * h0], twin.first_bias[i * h0 : (i + 1) * h0]
            )
        )
        for w, b in zip(twin.weights, twin.biases, strict=True):
            h = torch.tanh(h @ w[i] + b[i])
        return head(h)

    a, b = twin(x)
    torch.testing.assert_close(a, plain(0, twin.head_a))
    torch.testing.assert_close(b, plain(1, twin.head_b))


def _grads_as_unfused(pair: FusedMLPPair) -> dict[str, torch.Tensor]:
    """The fused pair's parameter gradients, laid out as its unfused pair's parameters."""
    g = copy.deepcopy(pair)
    with torch.no_grad():
        for p, q in zip(g.parameters(), pair.parameters(), strict=True):
            assert q.grad is not None
            p.copy_(q.grad)
    return g.unfused().state_dict()


@pytest.mark.parametrize(
    ("hidden", "activation", "outs"),
    [
        ((8, 6, 5), nn.Tanh, (3, 2)),
        ((64, 64), SigmoidTanh, (3, 2)),
        ((32,), nn.ReLU, (3, 2)),
        ((16, 8), nn.ReLU, (1, 1)),  # equal heads (twin Q): one batched matmul for both
        ((8,), nn.Tanh, (2, 2)),
    ],
)
def test_fused_mlp_pair_equals_its_unfused_pair(
    hidden: tuple[int, ...], activation: type[nn.Module], outs: tuple[int, int]
) -> None:
    torch.manual_seed(0)
    pair = FusedMLPPair(5, hidden, *outs, activation, gain_a=0.5, gain_b=1.5)
    with torch.no_grad():  # non-zero biases, so that they are compared too
        for p in pair.parameters():
            p.add_(0.1 * torch.randn_like(p))
    plain = pair.unfused()
    assert isinstance(plain, MLPPair)
    x = torch.randn(4, 33, 5)  # 132 rows: [132, 128] activations take SigmoidTanh's fused form
    xf, xp = x.clone().requires_grad_(), x.clone().requires_grad_()
    wa, wb = torch.randn(4, 33, outs[0]), torch.randn(4, 33, outs[1])
    af, bf = pair(xf)
    ap, bp = plain(xp)
    torch.testing.assert_close(af, ap, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(bf, bp, rtol=1e-5, atol=1e-6)
    ((af * wa).sum() + (bf * wb).sum()).backward()
    ((ap * wa).sum() + (bp * wb).sum()).backward()
    torch.testing.assert_close(xf.grad, xp.grad, rtol=1e-5, atol=1e-5)
    expected = _grads_as_unfused(pair)
    for name, p in plain.named_parameters():
        torch.testing.assert_close(p.grad, expected[name], rtol=1e-5, atol=1e-5, msg=name)


def test_soft_update_fused_equals_plain() -> None:
    torch.manual_seed(0)
    shapes = [(3, 4), (4,), (2, 5, 6)]
    target = [torch.randn(s) for s in shapes]
    source = [torch.randn(s) for s in shapes]
    t_fused = [t.clone() for t in target]
    t_plain = [t.clone() for t in target]
    fused.fused_soft_update_(t_fused, source, 0.005)
    fused.plain_soft_update_(t_plain, source, 0.005)
    for f, p, t, s in zip(t_fused, t_plain, target, source, strict=True):
        torch.testing.assert_close(f, p, rtol=0, atol=1e-7)
        torch.testing.assert_close(p, t + 0.005 * (s - t))
    # ops.soft_update_ takes either path
    t_ops = [t.clone() for t in target]
    rl.ops.soft_update_(t_ops, source, 0.005, fused=False)
    for o, p in zip(t_ops, t_plain, strict=True):
        torch.testing.assert_close(o, p, rtol=0, atol=0)


@pytest.mark.parametrize("max_norm", [None, 0.5, 1e6])
def test_clip_grad_norm_fused_equals_plain(max_norm: float | None) -> None:
    torch.manual_seed(0)
    grads = [torch.randn(s) for s in [(64, 4), (64,), (2, 64, 64), (3,)]]
    g_fused = [g.clone() for g in grads]
    g_plain = [g.clone() for g in grads]
    n_fused = fused.fused_clip_grad_norm_(g_fused, max_norm)
    n_plain = fused.plain_clip_grad_norm_(g_plain, max_norm)
    torch.testing.assert_close(n_fused, n_plain)
    for f, p in zip(g_fused, g_plain, strict=True):
        torch.testing.assert_close(f, p)
    # ... and what torch.nn.utils.clip_grad_norm_ does with the same gradients
    params = [nn.Parameter(torch.zeros_like(g)) for g in grads]
    for p, g in zip(params, grads, strict=True):
        p.grad = g.clone()
    n_torch = torch.nn.utils.clip_grad_norm_(params, max_norm if max_norm else float("inf"))
    torch.testing.assert_close(n_fused, n_torch)
    for f, p in zip(g_fused, params, strict=True):
        torch.testing.assert_close(f, p.grad)


def _same_weights_pair(space: gym.Space, act: gym.Space) -> tuple[rl.ActorCritic, rl.ActorCritic]:
    torch.manual_seed(0)
    fast = rl.ActorCritic(space, act, log_std_init=-0.3, fused=True)
    plain = rl.ActorCritic(space, act, log_std_init=-0.3, fused=False)
    assert isinstance(fast.nets, FusedMLPPair) and isinstance(plain.nets, MLPPair)
    plain.nets.load_state_dict(fast.nets.unfused().state_dict())
    if fast.continuous:
        with torch.no_grad():
            plain.log_std.copy_(fast.log_std)
    return fast, plain


@pytest.mark.parametrize("act", [gym.spaces.Discrete(3), gym.spaces.Box(-1, 1, (2,))], ids=["discrete", "box"])
def test_actor_critic_fused_and_plain_evaluate_equal(act: gym.Space) -> None:
    obs_space = gym.spaces.Box(-1, 1, (4,))
    fast, plain = _same_weights_pair(obs_space, act)
    obs = torch.randn(16, 8, 4)  # 128 rows: the hidden activations take SigmoidTanh's fused form
    action = torch.as_tensor(np.stack([act.sample() for _ in range(128)])).reshape(16, 8, *(act.shape or ()))
    for a, b in zip(fast.evaluate(obs, action), plain.evaluate(obs, action), strict=True):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(fast.greedy(obs[0]), plain.greedy(obs[0]), rtol=1e-5, atol=1e-5)


def test_a2c_update_fused_and_plain_equal() -> None:
    """One A2C update (clipped gradient step included) moves both models to the same weights."""
    obs_space, act = gym.spaces.Box(-1, 1, (4,)), gym.spaces.Discrete(2)
    fast, plain = _same_weights_pair(obs_space, act)
    algo_fast, algo_plain = rl.A2C(fast, fused=True), rl.A2C(plain, fused=False)
    obs = torch.randn(8, 8, 4)  # 64 rows: [64, 128] activations take SigmoidTanh's fused form
    zeros = torch.zeros(8, 8)
    rollout = rl.Rollout(
        obs=obs,
        actions=torch.randint(0, 2, (8, 8)),
        rewards=10 * torch.randn(8, 8),
        terminated=torch.zeros(8, 8, dtype=torch.bool),
        truncated=torch.zeros(8, 8, dtype=torch.bool),
        log_probs=zeros,
        values=zeros,
        final_obs=torch.zeros_like(obs),
        final_values=zeros,
        bootstrap_obs=torch.zeros(8, 4),
        bootstrap_value=torch.zeros(8),
        episode_returns=torch.zeros(0),
        episode_lengths=torch.zeros(0),
    )
    stats_fast, stats_plain = algo_fast.learn(rollout), algo_plain.learn(rollout)
    assert stats_fast["grad_norm"] == pytest.approx(stats_plain["grad_norm"], rel=1e-5)
    assert stats_fast["grad_norm"] > 0.5  # A2C clips at 0.5: the clipping scaled the gradients
    assert isinstance(fast.nets, FusedMLPPair)
    expected = fast.nets.unfused().state_dict()
    for name, p in plain.nets.state_dict().items():
        torch.testing.assert_close(p, expected[name], rtol=1e-5, atol=1e-6, msg=name)


def test_dqn_update_fused_and_plain_equal() -> None:
    """DQN's updates (fused Adam; the gradient clipped through ``_foreach_norm`` or one norm per
    tensor) move both copies of a Q-network to the same weights, and the clipping took part."""
    obs_space, act = gym.spaces.Box(-1, 1, (4,)), gym.spaces.Discrete(2)
    torch.manual_seed(0)
    fast = rl.QNetwork(obs_space, act, hidden=(32, 32))
    plain = copy.deepcopy(fast)
    algo_fast = rl.DQN(fast, target_update_interval=2, max_grad_norm=1.0, fused=True)
    algo_plain = rl.DQN(plain, target_update_interval=2, max_grad_norm=1.0, fused=False)
    assert algo_fast.fused and not algo_plain.fused
    for _ in range(5):
        batch = rl.Transition(
            obs=torch.randn(64, 4),
            actions=torch.randint(0, 2, (64,)),
            rewards=10 * torch.randn(64),
            next_obs=torch.randn(64, 4),
            terminated=torch.rand(64) < 0.1,
        )
        stats_fast, stats_plain = algo_fast.learn(batch), algo_plain.learn(batch)
        assert stats_fast["grad_norm"] == pytest.approx(stats_plain["grad_norm"], rel=1e-5)
        assert stats_fast["grad_norm"] > 1.0  # clipped
    for model_fast, model_plain in ((fast, plain), (algo_fast.target_model, algo_plain.target_model)):
        for (name, p), q in zip(model_fast.state_dict().items(), model_plain.state_dict().values(), strict=True):
            torch.testing.assert_close(p, q, rtol=1e-5, atol=1e-6, msg=name)


def test_twin_q_critic_fused_and_plain_equal() -> None:
    obs_space, act = gym.spaces.Box(-1, 1, (3,)), gym.spaces.Box(-2, 2, (2,))
    torch.manual_seed(0)
    fast, plain = rl.TwinQCritic(obs_space, act, fused=True), rl.TwinQCritic(obs_space, act, fused=False)
    assert isinstance(fast.nets, FusedMLPPair)
    plain.nets.load_state_dict(fast.nets.unfused().state_dict())
    obs, action = torch.randn(32, 3), torch.randn(32, 2)
    for a, b in zip(fast(obs, action), plain(obs, action), strict=True):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)


def test_fused_is_on_by_default_and_rl_fused_0_turns_it_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RL_FUSED", raising=False)
    assert fused.enabled()
    space = gym.spaces.Box(-1, 1, (4,))
    assert rl.ActorCritic(space, gym.spaces.Discrete(2)).fused
    assert not rl.ActorCritic(space, gym.spaces.Discrete(2), fused=False).fused
    code = (
        "import gymnasium as gym, rl, rl.fused; s = gym.spaces.Box(-1, 1, (4,));"
        "m = rl.ActorCritic(s, gym.spaces.Discrete(2)); "
        "print(rl.fused.enabled(), m.fused, type(m.nets).__name__, rl.A2C(m).fused, "
        "rl.ActorCritic(s, gym.spaces.Discrete(2), fused=True).fused)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "RL_FUSED": "0"},
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["False", "False", "MLPPair", "False", "True"]


def test_weights_of_a_fused_model_refused_by_a_plain_one_say_why() -> None:
    obs, act = gym.spaces.Box(-1, 1, (4,)), gym.spaces.Discrete(2)
    fused, plain = rl.ActorCritic(obs, act, fused=True), rl.ActorCritic(obs, act, fused=False)
    with pytest.raises(KeyError, match="RL_FUSED the same on every process"):
        plain.set_weights(fused.get_weights())
