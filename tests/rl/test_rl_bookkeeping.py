"""rl.bookkeeping: the running return window, the updates owed at an update-to-data ratio, beta's
annealing and the replay updates, each against what the training loops used to write out."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import rl
from rl.bookkeeping import BetaAnnealing, ReturnWindow, UpdateRatio, learn_from_replay, linear_schedule


def test_return_window_keeps_the_last_returns_and_counts_every_episode() -> None:
    window = ReturnWindow(3)
    assert np.isnan(window.mean) and len(window) == 0 and not window.solved(0.0)
    window.add(np.array([1.0, 2.0]))
    assert window.mean == 1.5 and window.episodes == 2
    assert not window.solved(1.0)  # not full yet
    window.add(np.array([3.0, 4.0, 5.0]))
    assert len(window) == 3 and window.mean == 4.0 and window.episodes == 5
    assert window.solved(4.0) and not window.solved(4.5) and not window.solved(None)
    window.add(np.zeros(0))
    assert window.episodes == 5 and window.mean == 4.0


def _owed_as_the_loops_wrote_it(updates_per_step: float, rollouts: list[int]) -> list[int]:
    """``rl.train_off_policy``'s loop before the ratio was written once."""
    due, owed = 0.0, []
    for steps in rollouts:
        due += updates_per_step * steps
        n = 0
        while due >= 1.0:
            n += 1
            due -= 1.0
        owed.append(n)
    return owed


@given(
    st.floats(min_value=0.001, max_value=64.0, allow_nan=False),
    st.lists(st.integers(min_value=0, max_value=4096), max_size=60),
)
def test_update_ratio_owes_what_the_loops_owed(updates_per_step: float, rollouts: list[int]) -> None:
    ratio = UpdateRatio(updates_per_step)
    assert [ratio.owed(steps) for steps in rollouts] == _owed_as_the_loops_wrote_it(updates_per_step, rollouts)


def test_update_ratio_carries_fractions_over() -> None:
    ratio = UpdateRatio(0.25)
    assert [ratio.owed(3) for _ in range(4)] == [0, 1, 1, 1]  # 0.75, 1.5, 1.25, 1.0 due
    assert ratio.due == 0.0  # 12 steps, 3 updates: nothing left
    assert UpdateRatio(2.5).owed(3) == 7


def test_beta_is_annealed_linearly_to_one_on_a_prioritised_replay_only() -> None:
    per = rl.PrioritizedReplay(8, (1,), (1,), beta=0.4)
    beta = BetaAnnealing(per)
    assert beta.at(0.0) == pytest.approx(0.4) and beta.at(0.5) == pytest.approx(0.7) and beta.at(2.0) == 1.0
    assert beta.at(0.5) == linear_schedule(0.4, 1.0, 1.0, 0.5)
    beta.anneal(per, 0.5)
    assert per.beta == pytest.approx(0.7)
    uniform = rl.UniformReplay(8, (1,), (1,))
    assert BetaAnnealing(uniform).at(0.5) is None
    BetaAnnealing(uniform).anneal(uniform, 0.5)  # nothing to anneal
    assert not hasattr(uniform, "beta")


def test_learn_from_replay_samples_learns_and_sets_the_priorities() -> None:
    obs_space = gym.spaces.Box(-1.0, 1.0, (3,), np.float32)
    act_space = gym.spaces.Box(-1.0, 1.0, (1,), np.float32)
    algorithm = rl.SAC(rl.SquashedGaussianActor(obs_space, act_space, (8,)), rl.TwinQCritic(obs_space, act_space, (8,)))
    agent = rl.Agent(algorithm)
    replay = rl.PrioritizedReplay(64, (3,), (1,), seed=0)
    rng = np.random.default_rng(0)
    n = 64
    replay.add(
        rng.uniform(-1, 1, (n, 3)).astype(np.float32),
        rng.uniform(-1, 1, (n, 1)).astype(np.float32),
        rng.standard_normal(n).astype(np.float32),
        rng.uniform(-1, 1, (n, 3)).astype(np.float32),
        np.zeros(n, bool),
    )
    assert learn_from_replay(agent, replay, 16, 0) == {} and algorithm.updates == 0
    stats = learn_from_replay(agent, replay, 16, 3)
    assert algorithm.updates == 3 and set(stats) >= {"critic_loss", "actor_loss"}
    priorities = replay.tree[np.arange(n)]
    assert len(np.unique(priorities)) > 1  # entered all equal; the sampled rows took their TD errors
