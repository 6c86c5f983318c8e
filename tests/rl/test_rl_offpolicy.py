"""DDPG, TD3 and SAC: their models, their updates, and short runs on real environments."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch

import rl
import rl.precision
from rl.replay import ReplayBatch

OBS = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
ACT = gym.spaces.Box(-2.0, 2.0, (1,), np.float32)
HIDDEN = (32, 32)


def _sac(**kwargs: Any) -> rl.SAC:
    return rl.SAC(rl.SquashedGaussianActor(OBS, ACT, HIDDEN), rl.TwinQCritic(OBS, ACT, HIDDEN), **kwargs)


def _make(name: str, **kwargs: Any) -> rl.DDPG | rl.TD3 | rl.SAC:
    if name == "SAC":
        return _sac(**kwargs)
    if name == "TD3":
        return rl.TD3(rl.DeterministicActor(OBS, ACT, HIDDEN), rl.TwinQCritic(OBS, ACT, HIDDEN), **kwargs)
    return rl.DDPG(rl.DeterministicActor(OBS, ACT, HIDDEN), rl.QCritic(OBS, ACT, HIDDEN), **kwargs)


def _bandit(n: int, seed: int) -> ReplayBatch:
    """One-step episodes: reward ``-(a - 0.5 - obs_0)^2``, every transition terminal."""
    rng = np.random.default_rng(seed)
    obs = rng.uniform(-1, 1, (n, 2)).astype(np.float32)
    actions = rng.uniform(-2, 2, (n, 1)).astype(np.float32)
    rewards = -((actions[:, 0] - 0.5 - obs[:, 0]) ** 2).astype(np.float32)
    ones = np.ones(n, bool)
    return ReplayBatch(obs, actions, rewards, obs, ones, ~ones, np.ones(n, np.float32), np.arange(n))


def test_squashed_gaussian_log_prob_is_the_density_of_its_actions() -> None:
    """Against torch.distributions: Normal, then tanh, then the affine map onto [-2, 2]."""
    torch.manual_seed(0)
    actor = rl.SquashedGaussianActor(OBS, ACT, HIDDEN)
    obs = torch.rand(64, 2) * 2 - 1
    torch.manual_seed(1)
    action, log_prob = actor.sample(obs)
    assert action.abs().max() <= 2.0
    mean, log_std = actor(obs)
    dist = torch.distributions.TransformedDistribution(
        torch.distributions.Normal(mean, log_std.exp()),
        [torch.distributions.TanhTransform(), torch.distributions.AffineTransform(actor.bias, actor.scale)],
    )
    reference = dist.log_prob(action.clamp(-2 + 1e-5, 2 - 1e-5)).sum(-1)
    np.testing.assert_allclose(log_prob.detach().numpy(), reference.detach().numpy(), rtol=1e-3, atol=1e-3)
    assert (log_std >= -5).all() and (log_std <= 2).all()


@pytest.mark.parametrize("autocast", [None, torch.bfloat16], ids=["float32", "bf16"])
@pytest.mark.parametrize("name", ["DDPG", "TD3", "SAC"])
def test_actor_climbs_the_critic_on_a_bandit(name: str, autocast: torch.dtype | None) -> None:
    """On one-step episodes with reward -(a - 0.5 - s_0)^2 the greedy action goes to 0.5 + s_0
    (with the updates' forward passes in float32 or in bfloat16)."""
    torch.manual_seed(0)
    algo = _make(name, actor_lr=3e-3, critic_lr=3e-3, autocast=autocast)
    agent = rl.Agent(algo)
    for i in range(400):
        stats = agent.learn(_bandit(128, i))
    assert all(np.isfinite(v) for v in stats.values()), stats
    test = _bandit(256, 10_000)
    greedy = agent.predict(test.obs)[:, 0]
    error = np.abs(greedy - (0.5 + test.obs[:, 0]))
    assert error.mean() < 0.15, (name, error.mean())
    assert algo.td_errors.shape == (128,)


@pytest.mark.parametrize("name", ["DDPG", "TD3", "SAC"])
def test_bf16_autocast_is_used_in_the_update_and_stays_close_to_float32(name: str) -> None:
    """The same weights, batch and random draws: the bfloat16 update computes different (rounded)
    but close losses, float32 TD errors and float32 weights; acting is unchanged."""
    import copy

    torch.manual_seed(0)
    full = _make(name)
    mixed = copy.deepcopy(full)
    mixed.autocast = torch.bfloat16
    batch = _bandit(256, 0)
    obs = batch.obs[:8]
    assert np.array_equal(rl.Agent(full).predict(obs), rl.Agent(mixed).predict(obs))
    torch.manual_seed(1)
    a = rl.Agent(full).learn(batch)
    torch.manual_seed(1)
    b = rl.Agent(mixed).learn(batch)
    assert a["critic_loss"] != b["critic_loss"]  # the matmuls did run in bfloat16
    assert b["critic_loss"] == pytest.approx(a["critic_loss"], rel=0.05)
    assert mixed.td_errors.dtype == np.float32
    np.testing.assert_allclose(mixed.td_errors, full.td_errors, atol=0.05 * np.abs(full.td_errors).max())
    assert all(p.dtype == torch.float32 for p in mixed.critic.parameters())


def test_autocast_names_a_dtype_it_cannot_use() -> None:
    with pytest.raises(ValueError, match=r"autocast must be .*torch\.int8"):
        _sac(autocast=torch.int8)


def _slow_bf16_warnings(make: Any) -> list[warnings.WarningMessage]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        make()
    return [w for w in caught if "without native bfloat16 matmuls" in str(w.message)]


@pytest.mark.parametrize("name", ["SAC", "TD3", "DDPG"])
def test_bf16_autocast_warns_on_a_machine_without_bfloat16_matmuls(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """bfloat16 without AVX512-BF16/AMX runs many times slower than float32 (scalar fallback): the
    algorithm warns where it is built, once. This machine answers one way for real; the other
    answer is the hardware query's, replaced."""
    native = rl.precision.native_bfloat16_matmul()
    assert native == torch.ops.mkldnn._is_mkldnn_bf16_supported()
    assert len(_slow_bf16_warnings(lambda: _make(name, autocast=torch.bfloat16))) == (0 if native else 1)
    assert not _slow_bf16_warnings(lambda: _make(name))  # float32: nothing to say

    for answer in (True, False):
        monkeypatch.setattr(rl.precision, "native_bfloat16_matmul", lambda device="cpu", a=answer: a)
        caught = _slow_bf16_warnings(lambda: _make(name, autocast=torch.bfloat16))
        assert len(caught) == (0 if answer else 1)
    (w,) = caught
    assert w.category is RuntimeWarning and w.filename == __file__  # the line that built it
    assert "Use autocast=None" in str(w.message)


def test_td3_delays_the_actor_and_targets() -> None:
    torch.manual_seed(0)
    algo = _make("TD3", policy_delay=2)
    actor0 = algo.model.get_weights()
    target0 = algo.target_critic.get_weights()
    rl.Agent(algo).learn(_bandit(32, 0))
    assert all(np.array_equal(actor0[k], v) for k, v in algo.model.get_weights().items())
    assert all(np.array_equal(target0[k], v) for k, v in algo.target_critic.get_weights().items())
    rl.Agent(algo).learn(_bandit(32, 1))
    assert not all(np.array_equal(actor0[k], v) for k, v in algo.model.get_weights().items())


def test_ddpg_targets_follow_by_polyak_averaging() -> None:
    torch.manual_seed(0)
    algo = _make("DDPG", tau=0.1)
    before = {k: v.copy() for k, v in algo.target_critic.get_weights().items()}
    rl.Agent(algo).learn(_bandit(32, 0))
    online, after = algo.critic.get_weights(), algo.target_critic.get_weights()
    for k in before:
        np.testing.assert_allclose(after[k], 0.9 * before[k] + 0.1 * online[k], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("target_entropy,direction", [(-50.0, -1), (50.0, +1)])
def test_sac_temperature_moves_towards_the_entropy_target(target_entropy: float, direction: int) -> None:
    torch.manual_seed(0)
    algo = _sac(alpha=0.5, alpha_lr=1e-2, target_entropy=target_entropy)
    agent = rl.Agent(algo)
    for i in range(20):
        agent.learn(_bandit(64, i))
    assert np.sign(algo.alpha - 0.5) == direction, algo.alpha


def test_uniform_exploration_covers_the_bounds_and_sample_stays_inside() -> None:
    torch.manual_seed(0)
    for name in ("DDPG", "TD3", "SAC"):
        algo = _make(name, **({"exploration_noise": 5.0} if name != "SAC" else {}))
        agent = rl.Agent(algo)
        obs = np.random.default_rng(0).uniform(-1, 1, (2000, 2)).astype(np.float32)
        acted = agent.sample(obs)
        assert acted.min() >= -2.0 and acted.max() <= 2.0, name
        algo.uniform_exploration = True
        uniform = agent.sample(obs)
        assert uniform.min() < -1.9 and uniform.max() > 1.9 and abs(uniform.mean()) < 0.1, name


def test_state_dict_round_trip_includes_temperature(tmp_path: Path) -> None:
    torch.manual_seed(0)
    algo = _sac(alpha=0.3)
    rl.Agent(algo).learn(_bandit(32, 0))
    rl.Agent(algo).save(tmp_path / "sac.pt")
    fresh = _sac(alpha=1.0)
    rl.Agent(fresh).restore(tmp_path / "sac.pt")
    assert fresh.alpha == pytest.approx(algo.alpha)
    for k, v in algo.target_critic.get_weights().items():
        np.testing.assert_array_equal(fresh.target_critic.get_weights()[k], v)


@pytest.mark.parametrize("name", ["DDPG", "TD3", "SAC"])
@pytest.mark.parametrize("prioritized", [False, True])
def test_short_pendulum_run(name: str, prioritized: bool) -> None:
    """A few hundred steps of the real loop: warm-up, updates at the ratio, priorities updated."""
    torch.manual_seed(0)
    config = rl.CollectorConfig("Pendulum-v1", num_envs=2, num_steps=4, seed=0)
    obs_space, act_space = rl.collector.env_spaces(config)
    actor = (rl.SquashedGaussianActor if name == "SAC" else rl.DeterministicActor)(obs_space, act_space, HIDDEN)
    critic = (rl.QCritic if name == "DDPG" else rl.TwinQCritic)(obs_space, act_space, HIDDEN)
    algo = getattr(rl, name)(actor, critic)
    agent = rl.Agent(algo)
    replay_cls = rl.PrioritizedReplay if prioritized else rl.UniformReplay
    assert obs_space.shape is not None and act_space.shape is not None
    replay = replay_cls(10_000, obs_space.shape, act_space.shape, seed=0)
    collector = rl.Collector(config, agent)
    try:
        result = rl.train_off_policy(
            agent, collector, replay, 600, learning_starts=200, batch_size=32, updates_per_step=0.5
        )
    finally:
        collector.close()
    assert result.env_steps == 600 and len(replay) == 600
    # 0.5 updates per env step from the collect that crossed learning_starts (8 steps each).
    assert 0.5 * (600 - 200) <= algo.updates <= 0.5 * (600 - 200 + 8)
    assert result.episodes == 2  # 300 steps per env: one 200-step episode each
    if prioritized:
        assert isinstance(replay, rl.PrioritizedReplay)
        leaves = replay.tree[np.arange(600)]
        assert len(np.unique(leaves)) > 50  # priorities follow the TD errors, not all the maximum
        assert replay.beta == pytest.approx(0.4 + 0.6 * 592 / 600)  # annealed to 1 (set before the last collect)


def _set_q_output_bias(critic: torch.nn.Module, value: float) -> None:
    """Fill the output layers' biases (the only ones of width 1) with ``value``."""
    with torch.no_grad():
        for name, p in critic.named_parameters():
            if name.endswith("bias") and p.shape[-1] == 1:
                p.fill_(value)


@pytest.mark.parametrize("fused", [True, False])
def test_network_outputs_stay_float32_inside_a_mixed_precision_update(fused: bool) -> None:
    """Under bfloat16 autocast the hidden layers run in bfloat16, the output layers in float32:
    a Q-value of ~800 keeps its fraction (bfloat16 would round it to a multiple of 4)."""
    torch.manual_seed(0)
    obs = torch.rand(64, 2) * 2 - 1
    action = torch.rand(64, 1) * 4 - 2
    twin = rl.TwinQCritic(OBS, ACT, HIDDEN, fused=fused)
    single = rl.QCritic(OBS, ACT, HIDDEN)
    _set_q_output_bias(twin, 800.3)
    _set_q_output_bias(single, 800.3)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        q1, q2 = twin(obs, action)
        q = single(obs, action)
        sampled, log_prob = rl.SquashedGaussianActor(OBS, ACT, HIDDEN).sample(obs)
        mu = rl.DeterministicActor(OBS, ACT, HIDDEN)(obs)
    for out in (q1, q2, q, sampled, log_prob, mu):
        assert out.dtype == torch.float32
    for values in (q1, q2, q):
        assert np.abs(np.modf(values.detach().numpy() / 4)[0]).max() > 0.01  # not on bfloat16's grid of 4


def test_bf16_sac_td_errors_are_not_rounded_to_bfloat16() -> None:
    torch.manual_seed(0)
    algo = _sac(autocast=torch.bfloat16)
    _set_q_output_bias(algo.critic, 800.3)
    _set_q_output_bias(algo.target_critic, 400.3)
    batch = _bandit(256, 0)
    rl.Agent(algo).learn(batch)
    # Terminal transitions: y = r, so the Q-values learned from are r - TD error (~800): each a
    # multiple of 4 if the critic's output were bfloat16.
    q = batch.rewards - algo.td_errors
    assert q.min() > 700
    assert np.abs(np.modf(q / 4)[0]).max() > 0.01


def test_sac_default_entropy_target_is_the_papers_for_normalised_actions() -> None:
    """``-dim(A)`` for actions in [-1, 1], as SB3 and RLlib apply it: log pi is a density over
    the environment's actions here, so on [-2, 2] the target moves by ``log 2`` per dimension."""
    wide = _sac()  # ACT is [-2, 2]
    assert wide.target_entropy == pytest.approx(-1 + np.log(2))
    unit = gym.spaces.Box(-1.0, 1.0, (6,), np.float32)
    assert rl.SAC(rl.SquashedGaussianActor(OBS, unit), rl.TwinQCritic(OBS, unit)).target_entropy == -6
    assert _sac(target_entropy=-3.0).target_entropy == -3.0


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda: _make("TD3", policy_delay=0), "policy_delay must be >= 1"),
        (lambda: _make("DDPG", tau=1.5), r"tau must be in \(0, 1\] \(0 would freeze the targets\), got 1.5"),
        (lambda: _sac(tau=-0.1), r"tau must be in \(0, 1\] \(0 would freeze the targets\), got -0.1"),
        (lambda: _sac(alpha=0.0), "alpha .* must be > 0, got 0.0"),
        (lambda: _sac(autocast=torch.float16), "autocast must be None or torch.bfloat16"),
        (lambda: rl.UniformReplay(8, (2,), (1,)).sample(4), "sample from an empty replay"),
        (lambda: _make("TD3", noise_clip=-0.5), "noise_clip must be >= 0, got -0.5"),
        (lambda: _make("TD3", policy_noise=-0.2), "policy_noise must be >= 0, got -0.2"),
        (lambda: _make("DDPG", exploration_noise=-0.1), "exploration_noise must be >= 0, got -0.1"),
        (lambda: rl.PrioritizedReplay(8, (2,), (1,), eps=0.0), r"eps must be > 0 \(it keeps every priority above"),
    ],
    ids=[
        "policy_delay",
        "ddpg tau",
        "sac tau",
        "alpha",
        "float16",
        "empty replay",
        "noise_clip",
        "policy_noise",
        "exploration_noise",
        "per eps",
    ],
)
def test_off_policy_arguments_that_cannot_work_are_refused_when_given(make: Any, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        make()


@pytest.mark.parametrize("replay_cls", [rl.UniformReplay, rl.PrioritizedReplay])
def test_a_batch_of_nothing_is_refused(replay_cls: Any) -> None:
    replay = replay_cls(8, (2,), (1,))
    batch = _bandit(4, 0)
    replay.add(batch.obs, batch.actions, batch.rewards, batch.next_obs, batch.terminated)
    with pytest.raises(ValueError, match="batch_size must be >= 1, got 0"):
        replay.sample(0)
