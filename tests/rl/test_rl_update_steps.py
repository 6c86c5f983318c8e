"""The update steps PG, A2C and PPO take on prepared tensors (what ``learn`` calls after its
returns, and what PARL's faces call), and the options PARL's maths needs: A2C's summed losses,
PPO's clipped value loss, each optimiser's ``eps``, a DQN target synced by the caller."""

from __future__ import annotations

import copy

import gymnasium as gym
import numpy as np
import pytest
import torch

import rl
from rl.storage import Transition

OBS = gym.spaces.Box(-1.0, 1.0, (4,), np.float32)
ACT = gym.spaces.Discrete(3)
N = 32


def _data(seed: int = 0) -> tuple[torch.Tensor, ...]:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(N, 4, generator=g), torch.randint(0, 3, (N,), generator=g), torch.randn(N, generator=g)


def _model() -> rl.ActorCritic:
    torch.manual_seed(0)
    return rl.ActorCritic(OBS, ACT, (16,), fused=False)


def _grads(algo: rl.Algorithm) -> list[torch.Tensor]:
    return [p.grad.clone() for p in algo.model.parameters() if p.grad is not None]


def test_a2c_summed_losses_are_n_times_the_mean() -> None:
    obs, actions, adv = _data()
    returns = adv + 1.0
    mean = rl.A2C(_model(), optimizer="adam", max_grad_norm=None, ent_coef=0.01)
    summed = rl.A2C(_model(), optimizer="adam", max_grad_norm=None, ent_coef=0.01, loss_reduction="sum")
    stats_mean = mean.update(obs, actions, adv, returns)
    stats_sum = summed.update(obs, actions, adv, returns)
    for key in ("policy_loss", "value_loss", "entropy"):
        assert stats_sum[key] == pytest.approx(N * stats_mean[key], rel=1e-5)
    for a, b in zip(_grads(summed), _grads(mean), strict=True):
        torch.testing.assert_close(a, N * b, rtol=1e-4, atol=1e-6)
    with pytest.raises(ValueError, match="loss_reduction"):
        rl.A2C(_model(), loss_reduction="median")


def test_ppo_update_clips_the_value_loss_around_the_behaviour_values() -> None:
    obs, actions, adv = _data(1)
    returns, old_values = adv + 2.0, torch.zeros(N)
    algo = rl.PPO(_model(), clip_range_vf=0.1, normalize_advantages=False)
    ref = copy.deepcopy(algo.model)
    log_prob, _, _ = ref.evaluate(obs, actions)
    stats = algo.update(obs, actions, log_prob.detach(), adv, returns, old_values)
    _, _, value = ref.evaluate(obs, actions)
    clipped = old_values + (value - old_values).clamp(-0.1, 0.1)
    expected = torch.max((returns - value) ** 2, (returns - clipped) ** 2).mean()
    assert stats["value_loss"] == pytest.approx(expected.item(), rel=1e-5)
    assert stats["clip_fraction"] == 0.0 and stats["approx_kl"] == pytest.approx(0.0, abs=1e-7)
    with pytest.raises(ValueError, match="old_values"):
        algo.update(obs, actions, log_prob.detach(), adv, returns)
    with pytest.raises(ValueError, match="clip_range_vf"):
        rl.PPO(_model(), clip_range_vf=0.0)


def test_ppo_learn_takes_its_minibatch_steps_through_the_same_step() -> None:
    """One epoch of one minibatch: learn (GAE first) equals update on the advantages it computed."""
    rng = np.random.default_rng(0)
    t, b = 4, 8

    def f(*shape: int) -> torch.Tensor:
        return torch.as_tensor(rng.standard_normal(shape), dtype=torch.float32)

    batch = rl.Rollout(
        f(t, b, 4), torch.as_tensor(rng.integers(0, 3, (t, b))), f(t, b), torch.zeros(t, b, dtype=torch.bool),
        torch.zeros(t, b, dtype=torch.bool), f(t, b) - 1.0, f(t, b), f(t, b, 4), torch.zeros(t, b), f(b, 4), f(b),
        torch.zeros(0), torch.zeros(0, dtype=torch.int64),
    )  # fmt: skip
    a, b2 = rl.PPO(_model(), num_epochs=1, num_minibatches=1), rl.PPO(_model(), num_epochs=1, num_minibatches=1)
    stats = a.learn(batch)
    adv, returns = rl.ops.gae(batch.rewards, batch.values, batch.bootstrap_value, 0.99 * torch.ones(t, b), 0.95)

    def flat(x: torch.Tensor) -> torch.Tensor:
        return x.reshape(t * b, *x.shape[2:])

    stats2 = b2.update(flat(batch.obs), flat(batch.actions), flat(batch.log_probs), flat(adv), flat(returns))
    assert stats == pytest.approx(stats2, rel=1e-5)
    for x, y in zip(a.model.parameters(), b2.model.parameters(), strict=True):
        torch.testing.assert_close(x, y)


def test_the_optimisers_eps_is_set() -> None:
    assert rl.PolicyGradient(_model(), optimizer_eps=1e-8).optimizer.defaults["eps"] == 1e-8
    assert rl.A2C(_model(), optimizer_eps=1e-8).optimizer.defaults["eps"] == 1e-8
    assert rl.PPO(_model()).optimizer.defaults["eps"] == 1e-5


def test_pg_update_is_reinforce_on_given_returns() -> None:
    obs, actions, returns = _data(2)
    algo = rl.PolicyGradient(_model(), vf_coef=0.0, normalize_advantages=False, max_grad_norm=None)
    log_prob, _, value = copy.deepcopy(algo.model).evaluate(obs, actions)
    stats = algo.update(obs, actions, returns)
    assert stats["policy_loss"] == pytest.approx(-(log_prob * (returns - value.detach())).mean().item(), rel=1e-5)


def test_dqn_without_an_interval_syncs_its_target_only_when_told() -> None:
    torch.manual_seed(0)
    algo = rl.DQN(rl.QNetwork(OBS, ACT, (16,)), target_update_interval=None)
    before = copy.deepcopy(algo.target_model.state_dict())
    obs, actions, rewards = _data(3)
    for _ in range(5):
        algo.learn(Transition(obs, actions, rewards, obs, torch.zeros(N, dtype=torch.bool)))
    for k, v in algo.target_model.state_dict().items():
        assert torch.equal(v, before[k]), k
    algo.sync_target()
    for k, v in algo.target_model.state_dict().items():
        assert torch.equal(v, algo.model.state_dict()[k]), k
