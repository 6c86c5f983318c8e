"""OAC: its exploration against a slow reference of the paper's (Ciosek et al. 2019), the KL
bound it keeps, SAC's update unchanged, and a short run of the real loop."""

from __future__ import annotations

import copy
import math
from typing import Any, cast

import gymnasium as gym
import numpy as np
import pytest
import torch

import rl
from rl import ops
from rl.replay import ReplayBatch

OBS = gym.spaces.Box(-1.0, 1.0, (3,), np.float32)
ACT = gym.spaces.Box(-2.0, 2.0, (2,), np.float32)
HIDDEN = (32, 32)


def _oac(**kwargs: Any) -> rl.OAC:
    torch.manual_seed(0)
    return rl.OAC(rl.SquashedGaussianActor(OBS, ACT, HIDDEN), rl.TwinQCritic(OBS, ACT, HIDDEN), **kwargs)


def _reference_exploration(algo: rl.OAC, obs: torch.Tensor, seed: int) -> torch.Tensor:
    """The paper's eq. 10-13, one state at a time, with the covariance as a matrix."""
    actor, critic = algo.model, algo.critic
    torch.manual_seed(seed)
    actions = []
    for s in obs:
        mean, log_std = actor(s[None])
        mu_t = mean[0].detach()
        sigma = torch.diag(log_std[0].detach().exp() ** 2)
        u = mu_t.clone().requires_grad_(True)
        q1, q2 = critic(s[None], (actor.bias + actor.scale * torch.tanh(u))[None])
        q_ub = (q1 + q2) / 2 + algo.beta_ub * (q1 - q2).abs() / 2
        (g,) = torch.autograd.grad(q_ub.sum(), u)
        mu_e = mu_t + math.sqrt(2 * algo.delta) * (sigma @ g) / (torch.sqrt(g @ sigma @ g) + 1e-5)
        actions.append(mu_e)
    mu_e = torch.stack(actions)
    std = actor(obs)[1].detach().exp()
    return actor.bias + actor.scale * torch.tanh(mu_e + std * torch.randn_like(mu_e))


def test_exploration_is_the_papers_shifted_gaussian() -> None:
    algo = _oac(delta=0.5)
    obs = torch.rand(5, 3) * 2 - 1
    expected = _reference_exploration(algo, obs, seed=7)
    torch.manual_seed(7)
    with torch.inference_mode():  # as rl.Agent acts
        got = algo.sample(obs)
    assert got.log_prob is None and got.value is None
    np.testing.assert_allclose(got.action.numpy(), expected.detach().numpy(), rtol=1e-5, atol=1e-6)
    assert got.action.abs().max() <= 2.0


def test_the_shift_keeps_the_kl_bound_and_climbs_the_upper_bound() -> None:
    """KL(N(mu_E, S) || N(mu_T, S)) = (mu_E - mu_T)^T S^-1 (mu_E - mu_T) / 2 = delta, along S g."""
    torch.manual_seed(1)
    g = torch.randn(4, 3)
    variance = torch.rand(4, 3) + 0.1
    shift = ops.optimistic_shift(g, variance, delta=2.0, eps=0.0)
    kl = 0.5 * (shift.pow(2) / variance).sum(-1)
    np.testing.assert_allclose(kl.numpy(), 2.0, rtol=1e-5)
    assert ((shift * g).sum(-1) > 0).all()  # the linearised Q_UB grows
    assert torch.equal(ops.optimistic_shift(torch.zeros(1, 3), variance[:1], 2.0), torch.zeros(1, 3))  # flat: no move
    q_ub = ops.q_upper_bound(torch.tensor([1.0, 3.0]), torch.tensor([3.0, 1.0]), beta_ub=2.0)
    assert q_ub.tolist() == [4.0, 4.0]  # mean 2, spread 1


def test_delta_zero_explores_as_sac_does() -> None:
    algo = _oac(delta=0.0)
    obs = torch.rand(6, 3)
    mean, log_std = algo.model(obs)
    torch.manual_seed(3)
    got = algo.sample(obs).action
    torch.manual_seed(3)
    expected = algo.model.bias + algo.model.scale * torch.tanh(mean + log_std.exp() * torch.randn_like(mean))
    np.testing.assert_allclose(got.detach().numpy(), expected.detach().numpy(), rtol=1e-6)


def test_shift_from_sample_linearises_at_a_draw_of_the_policy() -> None:
    """PARL's variant: u ~ N(mu_T, S), then u + shift(u) + noise."""
    algo = _oac(shift_from="sample")
    obs = torch.rand(3, 3)
    actor = algo.model
    torch.manual_seed(5)
    mean, log_std = actor(obs)
    std = log_std.exp().detach()
    u = (mean.detach() + std * torch.randn_like(mean)).requires_grad_(True)
    q1, q2 = algo.critic(obs, actor.bias + actor.scale * torch.tanh(u))
    (g,) = torch.autograd.grad(ops.q_upper_bound(q1, q2, algo.beta_ub).sum(), u)
    mu_e = u.detach() + ops.optimistic_shift(g, std**2, algo.delta)
    expected = actor.bias + actor.scale * torch.tanh(mu_e + std * torch.randn_like(mu_e))
    torch.manual_seed(5)
    np.testing.assert_allclose(algo.sample(obs).action.detach().numpy(), expected.detach().numpy(), rtol=1e-5)


def test_oac_learns_exactly_as_sac() -> None:
    oac = _oac(alpha=0.2)
    sac = rl.SAC(copy.deepcopy(oac.model), copy.deepcopy(cast(rl.TwinQCritic, oac.critic)), alpha=0.2)
    rng = np.random.default_rng(0)
    n = 16
    batch = ReplayBatch(
        *(
            torch.as_tensor(x)
            for x in (
                rng.uniform(-1, 1, (n, 3)).astype(np.float32),
                rng.uniform(-2, 2, (n, 2)).astype(np.float32),
                rng.normal(size=n).astype(np.float32),
                rng.uniform(-1, 1, (n, 3)).astype(np.float32),
                np.zeros(n, bool),
                np.zeros(n, bool),
                np.ones(n, np.float32),
                np.arange(n),
            )
        )
    )
    for algo in (oac, sac):
        torch.manual_seed(11)
        algo.learn(batch)
    for a, b in ((oac.model, sac.model), (oac.critic, sac.critic), (oac.target_critic, sac.target_critic)):
        for (name, x), y in zip(a.get_weights().items(), b.get_weights().values(), strict=True):
            np.testing.assert_array_equal(x, y, err_msg=name)


@pytest.mark.parametrize(("kwargs", "message"), [({"delta": -1.0}, "delta"), ({"shift_from": "median"}, "shift_from")])
def test_settings_that_cannot_work_are_refused(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        _oac(**kwargs)


def test_short_pendulum_run() -> None:
    """The real loop with OAC's exploration: warm-up, then optimistic actions inside the bounds."""
    torch.manual_seed(0)
    config = rl.CollectorConfig("Pendulum-v1", num_envs=2, num_steps=4, seed=0)
    obs_space, act_space = rl.collector.env_spaces(config)
    algo = rl.OAC(rl.SquashedGaussianActor(obs_space, act_space, HIDDEN), rl.TwinQCritic(obs_space, act_space, HIDDEN))
    agent = rl.Agent(algo)
    assert obs_space.shape is not None and act_space.shape is not None
    replay = rl.UniformReplay(2_000, obs_space.shape, act_space.shape, seed=0)
    collector = rl.Collector(config, agent)
    try:
        result = rl.train_off_policy(agent, collector, replay, 400, learning_starts=200, batch_size=32)
    finally:
        collector.close()
    assert result.env_steps == 400 and algo.updates > 100
    assert np.abs(replay.actions[:400]).max() <= 2.0
