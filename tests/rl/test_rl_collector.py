"""The Collector keeps terminated and truncated apart and bootstraps on truncation."""

from __future__ import annotations

import pickle
from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch

import rl
from rl.algorithm import PolicyStep
from rl.ops import gae
from rl.storage import bootstrapped_rewards, episode_discounts

GAMMA = 0.9
EPISODE_LEN = 3


class Chain(gym.Env):
    """Observation = steps taken so far; reward 1 per step; terminates after 3 steps if ``terminal``."""

    observation_space: gym.spaces.Box[Any] = gym.spaces.Box(0, 100, (1,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def __init__(self, terminal: bool) -> None:
        self.terminal = terminal
        self.t = 0

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        super().reset(seed=seed)
        self.t = 0
        return np.array([0.0], np.float32), {}

    def step(self, action: int) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        self.t += 1
        return np.array([self.t], np.float32), 1.0, self.terminal and self.t == EPISODE_LEN, False, {}


def _make(terminal: bool, time_limit: bool | None = None) -> Callable[[], gym.Env]:
    """A chain that terminates after 3 steps, or a time limit of 3 steps, or (both) the two."""
    if time_limit is None:
        time_limit = not terminal
    if not time_limit:
        return lambda: Chain(terminal=terminal)
    return lambda: gym.wrappers.TimeLimit(Chain(terminal=terminal), max_episode_steps=EPISODE_LEN)


class ConstantPolicy(rl.Algorithm):
    """Always action 0; V(s) = 10 + s, so the final observation's value is recognisable."""

    def __init__(self) -> None:
        super().__init__(rl.Model())

    def sample(self, obs: torch.Tensor) -> PolicyStep:
        n = obs.shape[0]
        return PolicyStep(torch.zeros(n, dtype=torch.int64), torch.full((n,), -0.5), self.value(obs))

    def value(self, obs: torch.Tensor) -> torch.Tensor:
        return 10.0 + obs[:, 0]


def _collect(terminal: bool, num_steps: int = 5, time_limit: bool | None = None) -> rl.Rollout:
    config = rl.CollectorConfig(env_id="unused", num_envs=2, num_steps=num_steps)
    collector = rl.Collector(config, rl.Agent(ConstantPolicy()), env_fn=_make(terminal, time_limit))
    try:
        return collector.collect()
    finally:
        collector.close()


def test_truncation_is_not_termination() -> None:
    r = _collect(terminal=False)
    assert r.obs.shape == (5, 2, 1) and r.actions.shape == (5, 2)
    assert not r.terminated.any()
    assert r.truncated[:, 0].tolist() == [False, False, True, False, False]
    np.testing.assert_array_equal(r.final_obs[2, :, 0], [3.0, 3.0])  # the true last observation
    np.testing.assert_array_equal(r.obs[3, :, 0], [0.0, 0.0])  # already reset
    np.testing.assert_array_equal(r.final_values[2], [13.0, 13.0])  # V(final_obs), bootstrapped
    assert r.final_values[[0, 1, 3, 4]].sum() == 0
    np.testing.assert_array_equal(r.next_obs()[:, 0, 0], [1, 2, 3, 1, 2])
    np.testing.assert_array_equal(r.bootstrap_obs[:, 0], [2.0, 2.0])
    np.testing.assert_array_equal(r.bootstrap_value, [12.0, 12.0])
    np.testing.assert_array_equal(r.log_probs, -0.5)
    np.testing.assert_array_equal(r.episode_returns, [3.0, 3.0])
    np.testing.assert_array_equal(r.episode_lengths, [3, 3])
    pickle.loads(pickle.dumps(r))  # plain numpy: can travel between processes


def test_termination_does_not_bootstrap() -> None:
    r = _collect(terminal=True)
    assert r.terminated[:, 0].tolist() == [False, False, True, False, False]
    assert not r.truncated.any()
    assert r.final_values.sum() == 0
    np.testing.assert_array_equal(r.final_obs[2, :, 0], [3.0, 3.0])


def test_a_terminal_step_that_is_also_the_time_limit_does_not_bootstrap() -> None:
    """gymnasium's TimeLimit says ``truncated`` on its last step whatever the env said: an episode
    that terminates on exactly that step reports both, and its last step has no future."""
    r = _collect(terminal=True, time_limit=True)
    assert r.terminated[:, 0].tolist() == [False, False, True, False, False]
    assert r.truncated[:, 0].tolist() == [False, False, True, False, False]  # both, as gymnasium says
    assert r.final_values.sum() == 0  # V(final_obs) not asked for
    t = rl.agent.to_torch(r)
    rewards = bootstrapped_rewards(t.rewards, t.terminated, t.truncated, t.final_values, GAMMA)
    torch.testing.assert_close(rewards, t.rewards)
    # a Rollout made elsewhere with V(final_obs) filled in at such a step bootstraps no more
    filled = torch.full_like(t.final_values, 13.0)
    torch.testing.assert_close(
        bootstrapped_rewards(t.rewards, t.terminated, t.truncated, filled, GAMMA)[2], t.rewards[2]
    )


def test_impala_bootstraps_a_time_limit_with_the_learners_critic() -> None:
    """The behaviour critic's ``final_values`` lag the learner's, as its policy does: IMPALA asks
    its own ``V(final_obs)`` where an episode was cut, and nowhere else."""
    r = rl.agent.to_torch(_collect(terminal=False))
    torch.manual_seed(0)
    space = gym.spaces.Box(0, 100, (1,), np.float32)
    model = rl.ActorCritic(space, gym.spaces.Discrete(2), (8,))
    weights = {k: v.clone() for k, v in model.state_dict().items()}
    stale = r._replace(final_values=torch.full_like(r.final_values, 1000.0))
    stats = {}
    for name, batch in (("rollout's", r), ("stale", stale)):
        model.load_state_dict(weights)
        stats[name] = rl.IMPALA(model, ent_coef=0.01).learn(batch)
    assert stats["rollout's"] == stats["stale"]  # the behaviour's V(final_obs) is not read
    # the targets are the learner's: r + gamma V(final_obs) at the truncated step 2
    model.load_state_dict(weights)
    with torch.no_grad():
        v_final = model.value(r.final_obs[2])
        values, boot = model.value(r.obs), model.value(r.bootstrap_obs)
    rewards = r.rewards.clone()
    rewards[2] += GAMMA * v_final
    vs, _ = rl.ops.vtrace(
        torch.zeros_like(r.rewards), episode_discounts(r.terminated, r.truncated, GAMMA), rewards, values, boot
    )
    expected_baseline = 0.5 * (vs - values).pow(2).mean().item()
    learned = rl.IMPALA(model, gamma=GAMMA).learn(r._replace(log_probs=model.evaluate(r.obs, r.actions)[0].detach()))
    assert learned["baseline_loss"] == pytest.approx(expected_baseline, rel=1e-5)


class Chain64(Chain):
    """The chain with float64 observations, as MuJoCo's envs give them."""

    observation_space = gym.spaces.Box(0, 100, (1,), np.float64)

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        obs, info = super().reset(seed=seed, options=options)
        return obs.astype(np.float64), info

    def step(self, action: int) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        obs, *rest = super().step(action)
        return (obs.astype(np.float64), *rest)  # type: ignore[return-value]


@pytest.mark.parametrize("algo", [rl.A2C, rl.PPO, rl.PolicyGradient, rl.IMPALA])
def test_a_plain_agent_learns_on_float64_observations(algo: Callable[[Any], rl.Algorithm]) -> None:
    """The networks are float32: a plain Agent casts a float64 env's observations for acting,
    and (its default ``preprocess_batch``) for learning too."""
    env_fn = lambda: gym.wrappers.TimeLimit(Chain64(terminal=False), max_episode_steps=EPISODE_LEN)  # noqa: E731
    model = rl.ActorCritic(Chain64.observation_space, gym.spaces.Discrete(2), (8,))
    agent = rl.Agent(algo(model))
    collector = rl.Collector(rl.CollectorConfig(env_id="unused", num_envs=2, num_steps=4), agent, env_fn=env_fn)
    try:
        rollout = collector.collect()
    finally:
        collector.close()
    assert rollout.obs.dtype == rollout.final_obs.dtype == np.float64  # stored as the env gave them
    batch = agent.preprocess_batch(rollout)
    assert batch.obs.dtype == batch.final_obs.dtype == batch.bootstrap_obs.dtype == np.float32
    np.testing.assert_array_equal(batch.obs, rollout.obs)
    stats = agent.learn(rollout)
    assert all(np.isfinite(v) for v in stats.values())


def test_bootstrapping_changes_the_value_targets() -> None:
    """Same rewards and observations; only truncated-vs-terminated differs, and so do the targets."""
    targets = {}
    for terminal in (True, False):
        r = rl.agent.to_torch(_collect(terminal))
        discounts = episode_discounts(r.terminated, r.truncated, GAMMA)
        rewards = bootstrapped_rewards(r.rewards, r.terminated, r.truncated, r.final_values, GAMMA)
        targets[terminal] = gae(rewards, r.values, r.bootstrap_value, discounts, 1.0).returns[:, 0]
    # step 2 ends the episode: terminal -> r = 1; truncated -> r + gamma * V(s_3) = 1 + 0.9 * 13
    assert targets[True][2].item() == 1.0
    assert abs(targets[False][2].item() - (1.0 + GAMMA * 13.0)) < 1e-5
    # the trace never crosses the boundary: steps 3, 4 are identical in both cases
    torch.testing.assert_close(targets[True][3:], targets[False][3:])
    # earlier steps inherit the difference through the discounted sum
    assert abs((targets[False][0] - targets[True][0]).item() - GAMMA**3 * 13.0) < 1e-4


def test_replay_buffer_stores_final_obs_and_only_terminated() -> None:
    r = _collect(terminal=False)
    buf = rl.UniformReplay(100, obs_shape=(1,), action_dtype=np.int64, seed=0)
    buf.add_rollout(r)
    assert len(buf) == 10
    np.testing.assert_array_equal(buf.next_obs[:10, 0], r.next_obs()[:, :, 0].reshape(-1))
    assert not buf.terminated[:10].any()  # truncation: bootstrap from next_obs = final obs
    batch = buf.sample(4)
    assert batch.obs.shape == (4, 1) and batch.actions.dtype == np.int64


def test_collector_continues_episodes_across_calls_and_counts_steps() -> None:
    config = rl.CollectorConfig(env_id="unused", num_envs=2, num_steps=2)
    collector = rl.Collector(config, rl.Agent(ConstantPolicy()), env_fn=_make(False))
    first, second = collector.collect(), collector.collect()
    collector.close()
    assert collector.total_steps == 8
    np.testing.assert_array_equal(first.obs[:, 0, 0], [0, 1])
    np.testing.assert_array_equal(second.obs[:, 0, 0], [2, 0])
    assert second.truncated[0].all() and len(second.episode_returns) == 2


def test_continuous_actions_are_clipped_for_the_env_but_stored_raw() -> None:
    torch.manual_seed(0)
    config = rl.CollectorConfig(env_id="Pendulum-v1", num_envs=2, num_steps=50)
    obs_space, act_space = rl.collector.env_spaces(config)
    model = rl.ActorCritic(obs_space, act_space, log_std_init=1.5)  # std 4.5 >> bound 2
    collector = rl.Collector(config, rl.Agent(rl.PPO(model)))
    r = collector.collect()
    collector.close()
    assert r.actions.shape == (50, 2, 1) and np.abs(r.actions).max() > 2.0
    assert r.actions.dtype == np.float32
