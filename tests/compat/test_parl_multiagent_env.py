"""``parl.env.multiagent_env.MAenv`` on mpe2: PARL's per-agent spaces and sizes, its list
interface for ``reset`` and ``step``, action mapping, and 25-step episodes."""

from __future__ import annotations

import numpy as np
import pytest

from actorrt.compat.parl.env.multiagent_env import MAenv, scenario_names

pytest.importorskip("mpe2")


def test_simple_spread_has_parls_spaces_and_shapes() -> None:
    env = MAenv("simple_spread")
    assert env.n == 3 and env.agents_name == ["agent_0", "agent_1", "agent_2"]
    assert env.obs_shape_n == [18, 18, 18] and env.act_shape_n == [5, 5, 5]
    assert len(env.observation_space) == len(env.action_space) == 3
    assert all(s.n == 5 for s in env.action_space)
    obs_n = env.reset(seed=0)
    assert len(obs_n) == 3 and all(o.shape == (18,) and o.dtype == np.float32 for o in obs_n)
    for t in range(25):
        # A relaxed action (probabilities): the argmax is taken, as MADDPG's scripts give them.
        obs_n, reward_n, done_n, info_n = env.step([np.eye(5)[t % 5]] * 3)
        assert len(obs_n) == len(reward_n) == len(done_n) == len(info_n) == 3
        assert all(isinstance(r, float) for r in reward_n)
        assert all(done_n) is (t == 24)  # the episode ends after 25 steps
    assert len(set(reward_n)) == 1  # local_ratio=0: every agent gets the shared reward
    env.close()


def test_continuous_actions_in_minus_one_one_map_onto_the_box() -> None:
    env = MAenv("simple_spread", continuous_actions=True)
    assert env.act_shape_n == [5, 5, 5] and all(s.low.min() == 0.0 and s.high.max() == 1.0 for s in env.action_space)
    env.reset(seed=1)
    env.step([np.full(5, -1.0)] * 3)
    env.step([np.ones(5)] * 3)
    with pytest.raises(ValueError, match=r"agent_0's action should be in \[-1, 1\]"):
        env.step([np.full(5, 2.0)] * 3)


@pytest.mark.parametrize("name", scenario_names())
def test_every_parl_scenario_is_there(name: str) -> None:
    env = MAenv(name)
    obs_n = env.reset(seed=0)
    assert len(obs_n) == env.n == len(env.obs_shape_n) == len(env.act_shape_n)
    assert [o.shape[0] for o in obs_n] == env.obs_shape_n
    env.step([np.ones(d) for d in env.act_shape_n])
    env.close()


def test_what_cannot_be_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown scenario 'simple_soccer'"):
        MAenv("simple_soccer")
    env = MAenv("simple")
    env.reset()
    with pytest.raises(ValueError, match="2 actions for 1 agents"):
        env.step([np.ones(5), np.ones(5)])
    with pytest.raises(RuntimeError, match="render_mode"):
        env.render()
