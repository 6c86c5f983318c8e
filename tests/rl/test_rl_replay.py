"""Replay storages: the ring buffer, the sum tree and prioritised sampling, HER relabelling."""

from __future__ import annotations

import pickle
import re

import numpy as np
import pytest
import torch

import rl
from rl.collector import env_spaces
from rl.envs import PointReach
from rl.her import GoalEpisode, HerReplay, run_goal_episode
from rl.replay import PrioritizedReplay, SumTree, UniformReplay


def _add_numbered(replay: UniformReplay, first: int, n: int) -> None:
    x = np.arange(first, first + n, dtype=np.float32)
    replay.add(x[:, None], x[:, None], x, x[:, None] + 0.5, x % 3 == 0, x % 3 == 1)


def test_ring_keeps_the_newest_and_samples_only_them() -> None:
    replay = UniformReplay(5, (1,), (1,), seed=0)
    _add_numbered(replay, 0, 3)
    _add_numbered(replay, 3, 4)  # 7 added: 2..6 remain
    assert len(replay) == 5 and replay.total_added == 7
    batch = replay.sample(500)
    assert set(batch.rewards.tolist()) == {2.0, 3.0, 4.0, 5.0, 6.0}
    np.testing.assert_array_equal(batch.next_obs[:, 0], batch.rewards + 0.5)
    np.testing.assert_array_equal(batch.terminated, batch.rewards % 3 == 0)
    np.testing.assert_array_equal(batch.truncated, batch.rewards % 3 == 1)
    assert np.all(batch.weights == 1.0)
    _add_numbered(replay, 100, 12)  # more than capacity in one call: the last 5
    assert sorted(replay.rewards.tolist()) == [107.0, 108.0, 109.0, 110.0, 111.0]


def test_rollouts_keep_truncation_apart_and_store_the_final_observation() -> None:
    """Pendulum only truncates (200 steps): no transition is terminal, and the truncating step's
    next_obs is the true last observation, not the reset that followed it."""
    config = rl.CollectorConfig("Pendulum-v1", num_envs=2, num_steps=150, seed=0)
    obs_space, act_space = env_spaces(config)
    agent = rl.Agent(rl.DDPG(rl.DeterministicActor(obs_space, act_space), rl.QCritic(obs_space, act_space)))
    collector = rl.Collector(config, agent)
    assert obs_space.shape is not None and act_space.shape is not None
    replay = UniformReplay(1000, obs_space.shape, act_space.shape)
    try:
        rollouts = [collector.collect() for _ in range(2)]
    finally:
        collector.close()
    for r in rollouts:
        replay.add_rollout(r)
    assert not replay.terminated.any()
    assert replay.truncated.sum() == 2  # one time limit per env within 300 steps
    (slots,) = np.nonzero(replay.truncated[: len(replay)])
    r = rollouts[1]  # steps 150..299: the time limit hit at step 199 (t = 49 of this rollout)
    assert r.truncated[49].all()
    np.testing.assert_array_equal(replay.next_obs[slots], np.concatenate([r.final_obs[49]]))
    assert not np.allclose(replay.next_obs[slots], r.obs[50])  # not the first obs of the next episode


def test_sum_tree_matches_cumulative_sums() -> None:
    rng = np.random.default_rng(0)
    tree = SumTree(37)
    values = rng.random(37)
    tree.update(np.arange(37), values)
    values[[3, 30]] = [5.0, 0.0]
    tree.update(np.array([3, 30]), np.array([5.0, 0.0]))
    assert tree.total == pytest.approx(values.sum())
    u = rng.uniform(0, values.sum(), 1000)
    reference = np.searchsorted(np.cumsum(values), u, side="right")
    np.testing.assert_array_equal(tree.find(u), reference)
    assert 30 not in tree.find(u)  # zero priority: never found


def test_prioritized_sampling_frequencies_and_weights() -> None:
    """P(i) = p_i^a / sum p^a and w_i = (N P(i))^-b / max w, against the formulas computed here."""
    alpha, beta = 0.6, 0.4
    replay = PrioritizedReplay(8, (1,), (1,), seed=1, alpha=alpha, beta=beta, eps=1e-12)
    _add_numbered(replay, 0, 8)
    td = np.array([0.1, 0.5, 1.0, 2.0, 4.0, 0.2, 0.3, 3.0])
    replay.update_priorities(np.arange(8), td)
    probs = td**alpha / (td**alpha).sum()
    counts = np.zeros(8)
    for _ in range(200):
        batch = replay.sample(256)
        counts += np.bincount(batch.indices, minlength=8)
    np.testing.assert_allclose(counts / counts.sum(), probs, atol=0.01)
    w = (8 * probs) ** -beta
    np.testing.assert_allclose(batch.weights, (w / w[batch.indices].max())[batch.indices], rtol=1e-5)
    # A new transition gets the largest priority seen (4.0), so it is the likeliest.
    _add_numbered(replay, 8, 1)  # overwrites slot 0
    assert replay.tree[np.array([0])][0] == pytest.approx(4.0**alpha)


@pytest.mark.parametrize("kind", [UniformReplay, PrioritizedReplay])
def test_a_cleared_replay_samples_only_what_came_after(kind: type[UniformReplay]) -> None:
    replay = kind(8, (1,), (1,), seed=0)
    _add_numbered(replay, 0, 8)
    if isinstance(replay, PrioritizedReplay):
        replay.update_priorities(np.arange(8), np.full(8, 5.0))
    replay.clear()
    assert len(replay) == 0 and replay.total_added == 8
    _add_numbered(replay, 100, 3)
    assert set(replay.sample(300).rewards.tolist()) == {100.0, 101.0, 102.0}
    if isinstance(replay, PrioritizedReplay):  # fresh priorities: the old maximum (5) is gone too
        assert replay.tree.total == pytest.approx(3.0)


@pytest.mark.parametrize("kind", [UniformReplay, PrioritizedReplay])
@pytest.mark.parametrize("filled", [0, 700, 2500])
def test_a_pickled_replay_holds_only_its_filled_rows_and_comes_back_equal(
    kind: type[UniformReplay], filled: int
) -> None:
    """What a replay actor is shipped: an empty or part-filled replay pickles without its unused
    capacity; after it wraps, everything. The copy stores, samples and prioritises as the original."""
    replay = kind(1000, (3,), (2,), seed=5)
    rng = np.random.default_rng(0)
    for start in range(0, filled, 100):
        n = min(100, filled - start)
        replay.add(
            rng.standard_normal((n, 3)), rng.standard_normal((n, 2)), rng.standard_normal(n),
            rng.standard_normal((n, 3)), rng.random(n) < 0.1, rng.random(n) < 0.1,
        )  # fmt: skip
    if filled and isinstance(replay, PrioritizedReplay):
        replay.update_priorities(np.arange(50), rng.random(50) * 3)
    data = pickle.dumps(replay)
    row_bytes = 4 * (3 + 3 + 2 + 1) + 2
    assert len(data) < 4096 + min(filled, 1000) * (row_bytes + 8 * (kind is PrioritizedReplay)), len(data)
    copy = pickle.loads(data)
    assert len(copy) == len(replay) and copy.total_added == replay.total_added and copy.capacity == 1000
    for name in UniformReplay._ARRAYS:
        assert getattr(copy, name).shape == getattr(replay, name).shape
        np.testing.assert_array_equal(getattr(copy, name), getattr(replay, name))
    if isinstance(replay, PrioritizedReplay):
        np.testing.assert_allclose(copy.tree.nodes, replay.tree.nodes, rtol=1e-12)
    if filled:
        a, b = replay.sample(64), copy.sample(64)
        for x, y in zip(a, b, strict=True):
            np.testing.assert_array_equal(x, y)
    copy.add(np.ones((1, 3)), np.ones((1, 2)), np.ones(1), np.ones((1, 3)), np.zeros(1, bool))
    assert len(copy) == min(filled + 1, 1000)


def test_her_future_relabelling() -> None:
    env = PointReach(dim=2, max_steps=10)
    replay = HerReplay(1000, 2, 2, (2,), 10, env.compute_reward, n_sampled_goal=4, seed=0)
    rng = np.random.default_rng(0)
    episodes = [run_goal_episode(env, lambda o: rng.uniform(-1, 1, (1, 2)), seed=i) for i in range(5)]
    for ep in episodes:
        replay.add_episode(ep)
    assert len(replay) == 50
    batch = replay.sample(4000)
    obs, goal = batch.obs[:, :2], batch.obs[:, 2:]
    np.testing.assert_array_equal(batch.next_obs[:, 2:], goal)  # the same goal on both sides
    np.testing.assert_array_equal(batch.rewards, env.compute_reward(batch.next_obs[:, :2], goal))
    relabelled = 0
    for ob, nxt, g in zip(obs, batch.next_obs[:, :2], goal, strict=True):
        ep, t = next((e, int(i)) for e in episodes for i in np.flatnonzero((e.observations[:-1] == ob).all(1)))
        np.testing.assert_array_equal(nxt, ep.observations[t + 1])
        if not np.array_equal(g, ep.desired_goal):
            relabelled += 1
            later = ep.achieved_goals[t + 1 :]
            assert (later == g).all(1).any(), "a relabelled goal is achieved later in its own episode"
    assert 0.75 < relabelled / len(batch.rewards) < 0.85  # 1 - 1/(1+4) = 0.8
    assert (batch.rewards == 0).mean() > 0.1  # hindsight goals are often reached

    plain = HerReplay(1000, 2, 2, (2,), 10, env.compute_reward, n_sampled_goal=0, seed=0)
    for ep in episodes:
        plain.add_episode(ep)
    g = plain.sample(1000).obs[:, 2:]
    goals = np.stack([e.desired_goal for e in episodes])
    assert all((goals == x).all(1).any() for x in g)


def test_her_replay_refuses_too_long_episodes() -> None:
    replay = HerReplay(100, 1, 1, (1,), 5, PointReach(dim=1).compute_reward)
    z = np.zeros
    with pytest.raises(ValueError):
        replay.add_episode(GoalEpisode(z((7, 1)), z((7, 1)), z(1), z((6, 1)), z(6, bool), z(6, bool), 0.0, False))


@pytest.mark.parametrize(
    "field, bad",
    [
        ("achieved_goals", (4, 1)),  # would be copied into all 3 goal columns
        ("desired_goal", (1,)),
        ("actions", (3, 1)),  # would be copied into both action columns
        ("observations", (1, 2)),  # one row would fill every step
        ("terminated", (2,)),
    ],
)
def test_her_replay_refuses_episodes_of_other_shapes(field: str, bad: tuple[int, ...]) -> None:
    """numpy would broadcast each of these into the episode's slot and train on it."""
    replay = HerReplay(100, 2, 3, (2,), 5, PointReach(dim=3).compute_reward)
    z = np.zeros
    fields = dict(
        observations=z((4, 2)),
        achieved_goals=z((4, 3)),
        desired_goal=z(3),
        actions=z((3, 2)),
        terminated=z(3, bool),
        truncated=z(3, bool),
    )
    replay.add_episode(GoalEpisode(**fields, episode_return=0.0, success=False))  # the right shapes go in
    fields[field] = z(bad, bool if field == "terminated" else np.float32)
    with pytest.raises(ValueError, match=f"add_episode: {field} has shape {re.escape(str(bad))}; this replay needs"):
        replay.add_episode(GoalEpisode(**fields, episode_return=0.0, success=False))
    assert len(replay) == 3
    with pytest.raises(ValueError, match="batch_size must be >= 1, got 0"):
        replay.sample(0)


def test_priority_updates_for_slots_the_replay_does_not_hold_are_refused() -> None:
    """A negative index (HER's "no slot" -1) would write an inner sum of the tree, an index past
    the filled rows a padding leaf, and one error for many indices would be broadcast: each left
    the tree's total unequal to its leaves' sum, and sampling skewed, without an error."""
    replay = PrioritizedReplay(5, (1,), (1,), seed=0)
    _add_numbered(replay, 0, 4)
    leaves = lambda: replay.tree[np.arange(5)]  # noqa: E731
    before, total = leaves().copy(), replay.tree.total
    for indices, errors, kind in [
        ([-1], [100.0], IndexError),
        ([4], [50.0], IndexError),  # slot 4 not filled yet
        ([6], [50.0], IndexError),  # in the tree's padding
        ([0, 1, 2, 3], [1.0], ValueError),
        ([[0, 1]], [[1.0, 2.0]], ValueError),
    ]:
        with pytest.raises(kind, match="update_priorities"):
            replay.update_priorities(np.array(indices), np.array(errors))
        np.testing.assert_array_equal(leaves(), before)
        assert replay.tree.total == total
    with pytest.raises(IndexError, match=r"leaf indices must be in \[0, 5\), got \[-1\]"):
        replay.tree.update(np.array([-1]), np.array([1.0]))
    replay.update_priorities(np.array([0, 3]), np.array([2.0, -3.0]))  # what a TD step gives
    assert replay.tree.total == pytest.approx(leaves().sum())
    np.testing.assert_allclose(leaves()[[0, 3]], (np.array([2.0, 3.0]) + replay.eps) ** replay.alpha)


def test_total_added_counts_every_transition_given() -> None:
    replay = UniformReplay(4, (1,), (1,))
    _add_numbered(replay, 0, 10)  # more than the capacity at once: the last 4 are kept
    assert len(replay) == 4 and replay.total_added == 10
    np.testing.assert_array_equal(np.sort(replay.obs[:, 0]), [6, 7, 8, 9])


def test_point_reach_reward_is_sparse() -> None:
    env = PointReach(dim=2)
    obs, info = env.reset(seed=0)
    assert set(obs) == {"observation", "achieved_goal", "desired_goal"}
    goal = obs["desired_goal"]
    assert env.compute_reward(goal, goal) == 0.0
    assert env.compute_reward(goal + 0.5, goal) == -1.0
    torch.manual_seed(0)
    steps = 0
    while True:
        obs, reward, terminated, truncated, info = env.step(np.clip((goal - obs["observation"]) * 10, -1, 1))
        steps += 1
        assert not terminated
        if truncated:
            break
    assert steps == env.max_steps and info["is_success"] and reward == 0.0


def _ddpg_on_point_reach(n_sampled_goal: int, seed: int = 0) -> float:
    import gymnasium as gym

    from rl.her import success_rate, train_goal_conditioned

    torch.manual_seed(seed)
    env = PointReach(dim=2, max_steps=50)
    obs_space = gym.spaces.Box(-1.0, 1.0, (4,), np.float32)  # goal_obs: observation + goal
    algo = rl.DDPG(
        rl.DeterministicActor(obs_space, env.action_space, (64, 64)),
        rl.QCritic(obs_space, env.action_space, (64, 64)),
        gamma=0.95,
        exploration_noise=0.2,
    )
    agent = rl.Agent(algo)
    replay = HerReplay(100_000, 2, 2, (2,), 50, env.compute_reward, n_sampled_goal=n_sampled_goal, seed=seed)
    train_goal_conditioned(agent, env, replay, episodes=100, batch_size=128, seed=seed)
    return success_rate(agent, env, 100)


@pytest.mark.slow
def test_her_learns_point_reach_where_plain_replay_does_not() -> None:
    """DDPG, 100 episodes of 50 steps (~10 s each way): with HER the greedy policy reaches the
    goal almost always (0.98-1.0 on seeds 0-2); on the same episodes budget without it, never."""
    with_her = _ddpg_on_point_reach(n_sampled_goal=4)
    without = _ddpg_on_point_reach(n_sampled_goal=0)
    assert with_her >= 0.8, (with_her, without)
    assert with_her - without >= 0.5, (with_her, without)
