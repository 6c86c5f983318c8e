"""Observation and reward normalisation: running statistics, and what travels with the weights."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

import rl
from rl.collector import env_spaces
from rl.normalization import NormalizingAgent, RunningMeanStd

CONFIG = rl.CollectorConfig("Pendulum-v1", num_envs=3, num_steps=70, seed=0)


def _agent() -> NormalizingAgent:
    torch.manual_seed(0)
    obs, act = env_spaces(CONFIG)
    assert obs.shape is not None
    return NormalizingAgent(rl.PPO(rl.ActorCritic(obs, act), num_minibatches=2, num_epochs=1), obs.shape, gamma=0.9)


def test_running_mean_std_equals_the_statistics_of_everything_seen() -> None:
    rng = np.random.default_rng(0)
    batches = [rng.normal(3.0, 2.0, (n, 4)) for n in (1, 7, 100, 3)]
    rms = RunningMeanStd((4,))
    for b in batches:
        rms.update(b)
    everything = np.concatenate(batches)
    np.testing.assert_allclose(rms.mean.numpy(), everything.mean(0), rtol=1e-12)
    np.testing.assert_allclose(rms.var.numpy(), everything.var(0), rtol=1e-12)
    assert float(rms.count) == len(everything)
    z = rms.normalize(everything, clip=10.0)
    np.testing.assert_allclose(z.mean(0), 0.0, atol=1e-5)
    np.testing.assert_allclose(z.std(0), 1.0, atol=1e-4)


def test_rewards_are_scaled_by_the_std_of_discounted_returns_reset_at_episode_ends() -> None:
    agent = _agent()
    collector = rl.Collector(CONFIG, agent)
    try:
        rollouts = [collector.collect() for _ in range(4)]  # 280 steps per env: one time limit each
    finally:
        collector.close()
    returns, seen = np.zeros(3), []
    for r in rollouts:
        scaled = agent.scale_rewards(r)
        for t in range(r.rewards.shape[0]):  # the reference: G <- gamma G + r, zeroed after an episode ends
            returns = 0.9 * returns + r.rewards[t]
            seen.append(returns.copy())
            returns[r.terminated[t] | r.truncated[t]] = 0.0
        std = np.sqrt(np.concatenate(seen).var() + 1e-8)
        np.testing.assert_allclose(scaled, np.clip(r.rewards / std, -10, 10), rtol=1e-5)
    assert sum(r.truncated.sum() for r in rollouts) == 3


def test_interleaved_collectors_each_keep_their_running_returns() -> None:
    """Two collectors' rollouts arriving interleaved (an asynchronous learner): each collector's
    environments continue their own discounted returns; the return statistics take in both. (One
    tracker per column used to carry one collector's returns into the other's rewards.)"""
    agent = _agent()
    collectors = [rl.Collector(dataclasses.replace(CONFIG, seed=s), _agent()) for s in (0, 1)]
    try:
        rollouts = [(i, c.collect()) for _ in range(3) for i, c in enumerate(collectors)]
    finally:
        for c in collectors:
            c.close()
    returns, seen = {0: np.zeros(3), 1: np.zeros(3)}, []
    for i, r in rollouts:
        agent.select_stream(i)
        scaled = agent.scale_rewards(r)
        for t in range(r.rewards.shape[0]):
            returns[i] = 0.9 * returns[i] + r.rewards[t]
            seen.append(returns[i].copy())
            returns[i][r.terminated[t] | r.truncated[t]] = 0.0
        std = np.sqrt(np.concatenate(seen).var() + 1e-8)
        np.testing.assert_allclose(scaled, np.clip(r.rewards / std, -10, 10), rtol=1e-5)


def test_statistics_travel_with_the_weights_and_the_learner_normalises_as_collectors_did() -> None:
    learner, collector_agent = _agent(), _agent()
    collector = rl.Collector(CONFIG, collector_agent)
    try:
        for _ in range(3):
            rollout = collector.collect()
            before = learner.preprocess_obs(rollout.obs[0])
            batch = learner.preprocess_batch(rollout)
            # normalised with the statistics the collector acted with (before this rollout's update)
            np.testing.assert_array_equal(batch.obs[0], before)
            assert batch.episode_returns is rollout.episode_returns  # returns stay the env's own
            learner.learn(rollout)
            weights = learner.get_weights()
            assert {"obs_rms.mean", "obs_rms.var", "obs_rms.count", "ret_rms.var"} <= set(weights)
            collector.set_weights(weights)
            np.testing.assert_array_equal(collector_agent.obs_rms.mean.numpy(), learner.obs_rms.mean.numpy())
    finally:
        collector.close()
    assert float(learner.obs_rms.count) == 2 * 3 * 70 * 3  # preprocess_batch above and learn() each took it in
    obs = rollout.obs.reshape(-1, 3)
    np.testing.assert_array_equal(learner.preprocess_obs(obs), collector_agent.preprocess_obs(obs))


def test_a_normalizing_agent_refuses_batches_it_would_not_normalise() -> None:
    """Off-policy batches (replay) would be learned on raw observations while it acts on
    normalised ones: refused, naming why."""
    agent = _agent()
    batch = rl.Transition(*(np.zeros((4, 3), np.float32) for _ in range(5)))
    with pytest.raises(TypeError, match=r"NormalizingAgent learns from rollouts .* got a Transition"):
        agent.learn(batch)
