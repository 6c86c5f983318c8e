"""SAC's, TD3's and DDPG's updates written out (:mod:`rl.algorithms.written_out`) against their
autograd updates (``rl/algorithms/sac.py``, ``td3.py``, ``ddpg.py``): from the same weights,
batches and noise, the same metrics, TD errors, weights, targets and optimiser state, to float
rounding; the path is taken only where it applies, and the networks it does not cover go to
autograd."""

from __future__ import annotations

import copy
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch
from torch import nn

import rl
from rl.agent import to_torch

OBS = gym.spaces.Box(-np.inf, np.inf, (5,), np.float32)
ACT = gym.spaces.Box(-2.0, 2.0, (2,), np.float32)
ASYMMETRIC = gym.spaces.Box(np.array([-1.0, 0.0, -3.0], np.float32), np.array([1.0, 0.5, 5.0], np.float32))
"""Bounds with a different scale and a non-zero centre in each dimension."""


def _sac(act: gym.spaces.Box = ACT, hidden: tuple[int, ...] = (32, 32), **kwargs: object) -> rl.SAC:
    torch.manual_seed(0)
    actor = rl.SquashedGaussianActor(OBS, act, hidden)
    critic = rl.TwinQCritic(OBS, act, hidden)
    return rl.SAC(actor, critic, **kwargs)  # type: ignore[arg-type]


def _batches(n: int, prioritised: bool, act: gym.spaces.Box = ACT) -> list[rl.ReplayBatch[torch.Tensor]]:
    rng = np.random.default_rng(0)
    m = 500
    n_act = act.shape[0]
    replay: rl.UniformReplay = (
        rl.PrioritizedReplay(1000, (5,), (n_act,), seed=0)
        if prioritised
        else rl.UniformReplay(1000, (5,), (n_act,), seed=0)
    )
    replay.add(
        rng.standard_normal((m, 5)).astype(np.float32),
        rng.uniform(act.low, act.high, (m, n_act)).astype(np.float32),
        rng.standard_normal(m).astype(np.float32),
        rng.standard_normal((m, 5)).astype(np.float32),
        rng.random(m) < 0.1,
    )
    if prioritised:
        replay.update_priorities(np.arange(m), rng.random(m) * 3 + 0.1)
    return [to_torch(replay.sample(64)) for _ in range(n)]


def _learn_both_ways(written: Any, batches: list[rl.ReplayBatch[torch.Tensor]]) -> Any:
    """Step ``written`` (gradients written out) and an autograd copy of it on ``batches`` with the
    same noise; their metrics and TD errors agree at every step. Returns the copy."""
    autograd = copy.deepcopy(written)
    autograd.written_out = False
    assert written.written_out
    for i, batch in enumerate(batches):
        torch.manual_seed(100 + i)
        m_written = written.learn(batch)
        torch.manual_seed(100 + i)
        m_autograd = autograd.learn(batch)
        assert m_written.keys() == m_autograd.keys()
        for key, value in m_autograd.items():  # TD3's actor loss: nan until its first actor step
            assert m_written[key] == pytest.approx(value, rel=1e-4, abs=1e-5, nan_ok=True), key
        np.testing.assert_allclose(written.td_errors, autograd.td_errors, rtol=0, atol=1e-4)
    return autograd


def _assert_same_state(autograd: Any, written: Any, modules: list[str], optimisers: list[str]) -> None:
    """The named modules' weights and the named optimisers' state (steps, moments) agree."""
    for module in modules:
        a, b = getattr(autograd, module), getattr(written, module)
        for (name, p), q in zip(a.named_parameters(), b.parameters(), strict=True):
            torch.testing.assert_close(q, p, rtol=0, atol=1e-5, msg=f"{module}.{name}")
    for optimiser in optimisers:
        opt_a, opt_b = getattr(autograd, optimiser), getattr(written, optimiser)
        for p, q in zip(opt_a.param_groups[0]["params"], opt_b.param_groups[0]["params"], strict=True):
            sa, sb = opt_a.state[p], opt_b.state[q]
            assert float(sa["step"]) == float(sb["step"]) > 0
            torch.testing.assert_close(sb["exp_avg"], sa["exp_avg"], rtol=1e-3, atol=1e-7)
            torch.testing.assert_close(sb["exp_avg_sq"], sa["exp_avg_sq"], rtol=1e-3, atol=1e-12)


@pytest.mark.parametrize(
    ("act", "hidden"), [(ACT, (32, 32)), (ASYMMETRIC, (8, 16, 8))], ids=["2d-32x32", "asymmetric-3d-8x16x8"]
)
@pytest.mark.parametrize("prioritised", [False, True], ids=["uniform", "prioritised"])
@pytest.mark.parametrize("autotune_alpha", [True, False], ids=["autotune", "fixed-alpha"])
def test_sac_written_out_learns_what_autograd_learns(
    autotune_alpha: bool, prioritised: bool, act: gym.spaces.Box, hidden: tuple[int, ...]
) -> None:
    """From the same weights, batches and noise, six steps: the same metrics, TD errors, weights,
    target weights, temperature and optimiser state, to float rounding."""
    written = _sac(act, hidden, autotune_alpha=autotune_alpha, alpha=0.2)
    batches = _batches(6, prioritised, act)
    if prioritised:
        assert not torch.all(batches[0].weights == 1)
    autograd = _learn_both_ways(written, batches)
    modules = ["model", "critic", "target_critic", "temperature"]
    optimisers = ["critic_optimizer", "actor_optimizer"] + (["alpha_optimizer"] if autotune_alpha else [])
    _assert_same_state(autograd, written, modules, optimisers)
    if not autotune_alpha:
        assert written.alpha == pytest.approx(0.2)


def test_sac_written_out_is_chosen_only_where_it_applies() -> None:
    assert _sac().written_out
    assert not _sac(fused=False).written_out
    assert not _sac(autocast=torch.bfloat16).written_out
    torch.manual_seed(0)
    tanh_actor = rl.SquashedGaussianActor(OBS, ACT, (32, 32), activation=nn.Tanh)
    assert not rl.SAC(tanh_actor, rl.TwinQCritic(OBS, ACT, (32, 32))).written_out
    assert not rl.SAC(
        rl.SquashedGaussianActor(OBS, ACT, (32,)), rl.TwinQCritic(OBS, ACT, (32,), fused=False)
    ).written_out

    class Subclassed(rl.SquashedGaussianActor):
        pass

    assert not rl.SAC(Subclassed(OBS, ACT, (32,)), rl.TwinQCritic(OBS, ACT, (32,))).written_out
    # Where it does not apply, the autograd update runs and learns.
    algo = rl.SAC(tanh_actor, rl.TwinQCritic(OBS, ACT, (32, 32)))
    assert np.isfinite(algo.learn(_batches(1, False)[0])["critic_loss"])


def test_sac_written_out_leaves_a_parameter_frozen_after_construction_alone() -> None:
    """A parameter frozen once the algorithm is built gets no gradient, as under autograd."""
    algo = _sac()
    first, second, *_ = (layer for layer in algo.model.net if isinstance(layer, nn.Linear))
    before, second_before = first.weight.detach().clone(), second.weight.detach().clone()
    first.weight.requires_grad_(False)
    for batch in _batches(3, False):
        algo.learn(batch)
    assert torch.equal(first.weight, before) and first.weight.grad is None
    assert not torch.equal(second.weight, second_before)


def _deterministic(name: str, act: gym.spaces.Box, hidden: tuple[int, ...]) -> rl.TD3 | rl.DDPG:
    torch.manual_seed(0)
    actor = rl.DeterministicActor(OBS, act, hidden)
    if name == "TD3":
        return rl.TD3(actor, rl.TwinQCritic(OBS, act, hidden), policy_delay=2)
    return rl.DDPG(actor, rl.QCritic(OBS, act, hidden))


@pytest.mark.parametrize(
    ("act", "hidden"), [(ACT, (32, 32)), (ASYMMETRIC, (8, 16, 8))], ids=["2d-32x32", "asymmetric-3d-8x16x8"]
)
@pytest.mark.parametrize("prioritised", [False, True], ids=["uniform", "prioritised"])
@pytest.mark.parametrize("name", ["TD3", "DDPG"])
def test_td3_and_ddpg_written_out_learn_what_autograd_learns(
    name: str, prioritised: bool, act: gym.spaces.Box, hidden: tuple[int, ...]
) -> None:
    """TD3 (twin critic, the actor through Q_1 alone, delayed) and DDPG (one critic): six steps
    from the same weights, batches and noise give the same metrics, TD errors, weights, targets
    and optimiser state as the autograd update, to float rounding."""
    written = _deterministic(name, act, hidden)
    autograd = _learn_both_ways(written, _batches(6, prioritised, act))
    _assert_same_state(
        autograd, written, ["model", "critic", "target_actor", "target_critic"], ["critic_optimizer", "actor_optimizer"]
    )
    expected_actor_steps = 3 if name == "TD3" else 6
    assert float(written.actor_optimizer.state[next(written.model.parameters())]["step"]) == expected_actor_steps


def test_deterministic_written_out_is_chosen_only_where_it_applies() -> None:
    torch.manual_seed(0)
    actor = rl.DeterministicActor(OBS, ACT, (16,))
    assert rl.TD3(actor, rl.TwinQCritic(OBS, ACT, (16,))).written_out
    assert not rl.TD3(actor, rl.TwinQCritic(OBS, ACT, (16,), fused=False)).written_out
    assert not rl.TD3(actor, rl.TwinQCritic(OBS, ACT, (16,)), fused=False).written_out
    assert not rl.DDPG(actor, rl.QCritic(OBS, ACT, (16,), activation=nn.Tanh)).written_out
    assert not rl.DDPG(
        rl.DeterministicActor(OBS, ACT, (16,), activation=nn.ELU), rl.QCritic(OBS, ACT, (16,))
    ).written_out
    # Each takes the critic it writes out: TD3 a twin one, DDPG a single one.
    assert not rl.TD3(actor, rl.QCritic(OBS, ACT, (16,))).written_out  # type: ignore[arg-type]
    assert not rl.DDPG(actor, rl.TwinQCritic(OBS, ACT, (16,))).written_out  # type: ignore[arg-type]
    # A hook on the actor or critic module itself (not only inside its networks) is honoured.
    hooked_actor = rl.DeterministicActor(OBS, ACT, (16,))
    hooked_actor.register_forward_hook(lambda _m, _i, out: out * 0)
    assert not rl.DDPG(hooked_actor, rl.QCritic(OBS, ACT, (16,))).written_out
    hooked_critic = rl.TwinQCritic(OBS, ACT, (16,))
    hooked_critic.register_forward_hook(lambda _m, _i, out: out)
    assert not rl.SAC(rl.SquashedGaussianActor(OBS, ACT, (16,)), hooked_critic).written_out


@pytest.mark.parametrize("name", ["SAC", "DDPG"])
@pytest.mark.parametrize("written_out", [True, False], ids=["written-out", "autograd"])
def test_a_critic_parameter_frozen_by_the_user_stays_frozen(name: str, written_out: bool) -> None:
    """The actor's step freezes the critic for itself and thaws only what it froze."""
    algo: rl.SAC | rl.TD3 | rl.DDPG = _sac() if name == "SAC" else _deterministic("DDPG", ACT, (32, 32))
    algo.written_out = written_out
    frozen = next(algo.critic.parameters())
    frozen.requires_grad_(False)
    before = frozen.detach().clone()
    for batch in _batches(3, False):
        algo.learn(batch)
    assert not frozen.requires_grad and torch.equal(frozen, before)
    assert all(p.requires_grad for p in list(algo.critic.parameters())[1:])
