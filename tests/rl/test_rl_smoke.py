"""Fast smoke runs: every algorithm trains for a few hundred steps without error."""

from __future__ import annotations

import copy
import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import torch

import rl
from rl.collector import env_spaces


def _on_policy(algo_cls: Callable[..., rl.Algorithm], env_id: str, **kwargs: Any) -> tuple[rl.Agent, rl.Collector]:
    torch.manual_seed(0)
    config = rl.CollectorConfig(env_id=env_id, num_envs=4, num_steps=16, seed=0)
    obs_space, act_space = env_spaces(config)
    agent = rl.Agent(algo_cls(rl.ActorCritic(obs_space, act_space, hidden=(16, 16)), **kwargs))
    return agent, rl.Collector(config, agent)


@pytest.mark.parametrize("algo_cls", [rl.PolicyGradient, rl.A2C, rl.PPO, rl.IMPALA])
@pytest.mark.parametrize("env_id", ["CartPole-v1", "Pendulum-v1"])
def test_on_policy_smoke(algo_cls: Callable[..., rl.Algorithm], env_id: str) -> None:
    agent, collector = _on_policy(algo_cls, env_id)
    before = agent.get_weights()
    result = rl.train_on_policy(agent, collector, total_steps=320, solved_return=None)
    collector.close()
    assert result.env_steps == 320 and not result.solved
    after = agent.get_weights()
    assert any(not np.array_equal(before[k], after[k]) for k in before)  # it learned something
    assert collector.observation_space.shape is not None
    obs = np.zeros((3, *collector.observation_space.shape), np.float32)
    assert agent.predict(obs).shape[0] == 3


def test_ppo_stats_are_finite() -> None:
    agent, collector = _on_policy(rl.PPO, "CartPole-v1", num_epochs=2, num_minibatches=2)
    stats = agent.learn(collector.collect())
    collector.close()
    assert set(stats) >= {"policy_loss", "value_loss", "entropy", "approx_kl", "clip_fraction"}
    assert all(math.isfinite(v) for v in stats.values())


@pytest.mark.parametrize("num_minibatches, sizes", [(3, [22, 21, 21]), (5, [13, 13, 13, 13, 12]), (4, [16] * 4)])
def test_ppo_takes_its_minibatches_and_every_sample(num_minibatches: int, sizes: list[int]) -> None:
    """``num_minibatches`` minibatches per epoch, also where it does not divide the 64 samples
    (sizes differ by at most one), and each sample in one of them."""
    agent, collector = _on_policy(rl.PPO, "CartPole-v1", num_epochs=2, num_minibatches=num_minibatches)
    rollout = collector.collect()
    collector.close()
    model = agent.algorithm.model
    assert isinstance(model, rl.ActorCriticModel)
    seen: list[torch.Tensor] = []
    evaluate = model.evaluate

    def recording(obs: torch.Tensor, action: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        seen.append(obs.detach().clone())
        return evaluate(obs, action)

    model.evaluate = recording  # type: ignore[method-assign]
    agent.learn(rollout)
    flat = torch.from_numpy(rollout.obs.reshape(64, -1))
    for epoch in (seen[: len(sizes)], seen[len(sizes) :]):
        assert [len(mb) for mb in epoch] == sizes
        rows = torch.cat(epoch)
        assert all((rows == row).all(dim=1).any() for row in flat)  # every sample, once: 64 in all


def test_impala_corrects_stale_behaviour() -> None:
    """Rollouts from an older policy: the learner sees rho != 1 and still updates."""
    agent, collector = _on_policy(rl.IMPALA, "CartPole-v1", lr=1e-2)
    stale = collector.collect()
    agent.learn(collector.collect())  # the learner moves on
    stats = agent.learn(stale)
    collector.close()
    assert abs(stats["mean_rho"] - 1.0) > 1e-4 and math.isfinite(stats["policy_loss"])


def test_dqn_smoke() -> None:
    torch.manual_seed(0)
    config = rl.CollectorConfig(env_id="CartPole-v1", num_envs=2, num_steps=8, seed=0)
    obs_space, act_space = env_spaces(config)
    algo = rl.DQN(rl.QNetwork(obs_space, act_space, hidden=(32,)), target_update_interval=5)
    agent = rl.Agent(algo)
    collector = rl.Collector(config, agent)
    assert obs_space.shape is not None
    buffer = rl.UniformReplay(1000, obs_space.shape, action_dtype=np.int64, seed=0)
    target_before = algo.target_model.get_weights()
    result = rl.train_dqn(
        agent, collector, buffer, total_steps=400, learning_starts=100, batch_size=32, gradient_steps=2
    )
    collector.close()
    assert result.env_steps == 400 and len(buffer) == 400
    assert algo.epsilon < 1.0
    after = algo.target_model.get_weights()
    assert any(not np.array_equal(target_before[k], after[k]) for k in after)  # target followed


def test_prioritised_dqn_weighs_its_loss_and_updates_priorities() -> None:
    """DQN on a prioritised replay: the importance weights scale each sample's loss (the step
    differs from the unweighted one), ``td_errors`` are ``y - Q``, and ``train_dqn`` gives them
    back as priorities and anneals ``beta`` towards 1."""
    config = rl.CollectorConfig(env_id="CartPole-v1", num_envs=2, num_steps=8, seed=0)
    obs_space, act_space = env_spaces(config)
    assert obs_space.shape is not None
    torch.manual_seed(0)
    algo = rl.DQN(rl.QNetwork(obs_space, act_space, hidden=(16,)), target_update_interval=5)
    agent = rl.Agent(algo)
    collector = rl.Collector(config, agent)
    replay = rl.PrioritizedReplay(1000, obs_space.shape, action_dtype=np.int64, seed=0, beta=0.4)
    try:
        rl.train_dqn(agent, collector, replay, total_steps=320, learning_starts=64, batch_size=32, gradient_steps=2)
    finally:
        collector.close()
    leaves = replay.tree[np.arange(len(replay))]
    assert len(np.unique(leaves)) > 10  # priorities followed the TD errors, not all the initial maximum
    assert replay.tree.total == pytest.approx(leaves.sum())
    assert 0.4 < replay.beta <= 1.0 and replay.beta > 0.9

    batch = replay.sample(32)
    tensors = rl.agent.to_torch(batch)
    state = copy.deepcopy(algo.state_dict())
    algo.learn(tensors)
    weighted = {k: v.clone() for k, v in algo.model.state_dict().items()}
    algo.load_state_dict(state)
    algo.learn(tensors._replace(weights=torch.ones_like(tensors.weights)))
    unweighted = algo.model.state_dict()
    assert not tensors.weights.eq(1).all()
    assert any(not torch.equal(weighted[k], unweighted[k]) for k in weighted)
    assert algo.td_errors.shape == (32,) and np.isfinite(algo.td_errors).all()


def test_training_loops_refuse_what_would_silently_not_train() -> None:
    """A ratio of 0 updates per step would collect forever without learning."""
    pendulum = rl.CollectorConfig("Pendulum-v1", num_envs=1, num_steps=8, seed=0)
    obs, act = env_spaces(pendulum)
    assert obs.shape is not None and act.shape is not None
    sac = rl.Agent(rl.SAC(rl.SquashedGaussianActor(obs, act, (8,)), rl.TwinQCritic(obs, act, (8,))))
    collector = rl.Collector(pendulum, sac)
    try:
        with pytest.raises(ValueError, match="updates_per_step must be > 0, got 0"):
            rl.train_off_policy(sac, collector, rl.UniformReplay(100, obs.shape, act.shape), 100, updates_per_step=0)
    finally:
        collector.close()
