"""DQN's TD loss: the squared error keeps CartPole's values bounded, the Huber loss does not."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch

import rl


@pytest.fixture(scope="module")
def random_buffer() -> rl.UniformReplay:
    """5000 CartPole transitions of the uniform random policy (about 4% terminal)."""
    env = gym.make("CartPole-v1")
    env.action_space.seed(0)
    buffer = rl.UniformReplay(5000, (4,), action_dtype=np.int64, seed=0)
    obs, _ = env.reset(seed=0)
    for _ in range(5000):
        action = env.action_space.sample()
        nxt, reward, term, trunc, _ = env.step(action)
        buffer.add(obs[None], np.array([action]), np.array([reward], np.float32), nxt[None], np.array([term]))
        obs = nxt if not (term or trunc) else env.reset()[0]
    env.close()
    return buffer


@pytest.mark.parametrize("loss", ["mse", "huber"])
def test_td_loss_and_value_bound(random_buffer: rl.UniformReplay, loss: str) -> None:
    """With reward 1 per step, Q <= 1 / (1 - gamma) = 100. The squared error stays below it;
    the Huber loss (gradient capped at 1, so the rare terminal targets cannot pull values down)
    overshoots it within 800 updates: why ``loss="mse"`` is the default."""
    torch.manual_seed(0)
    space = gym.spaces.Box(-np.inf, np.inf, (4,))
    algo = rl.DQN(
        rl.QNetwork(space, gym.spaces.Discrete(2), hidden=(64, 64)), lr=1e-3, target_update_interval=20, loss=loss
    )
    agent = rl.Agent(algo)
    for _ in range(800):
        stats = agent.learn(random_buffer.sample(64))
    if loss == "mse":
        assert stats["q_mean"] < 100, stats
    else:
        assert stats["q_mean"] > 100, stats


def test_unknown_loss_is_refused() -> None:
    with pytest.raises(ValueError):
        rl.DQN(rl.QNetwork(gym.spaces.Box(-1, 1, (4,)), gym.spaces.Discrete(2)), loss="l1")
