"""Model weight exchange, soft updates, Agent save/restore and hooks (the fast paths: test_rl_fused.py)."""

from __future__ import annotations

import pickle
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch

import rl


def _ac(seed: int = 0) -> rl.ActorCritic:
    torch.manual_seed(seed)
    return rl.ActorCritic(gym.spaces.Box(-1, 1, (4,)), gym.spaces.Discrete(2))


def test_weights_round_trip_is_numpy_and_picklable() -> None:
    a, b = _ac(0), _ac(1)
    w = pickle.loads(pickle.dumps(a.get_weights()))
    assert all(isinstance(v, np.ndarray) for v in w.values())
    b.set_weights(w)
    for (ka, va), (kb, vb) in zip(a.state_dict().items(), b.state_dict().items(), strict=True):
        assert ka == kb and torch.equal(va, vb)
    # get_weights returns copies: mutating them does not touch the model
    name = next(iter(w))
    w[name][...] = 0
    assert not torch.all(a.state_dict()[name] == 0)


def test_set_weights_rejects_wrong_names() -> None:
    a = _ac()
    w = a.get_weights()
    w.pop(next(iter(w)))
    with pytest.raises(KeyError):
        a.set_weights(w)


@pytest.mark.parametrize("decay", [0.0, 0.3, 0.99, 1.0])
def test_sync_weights_to_soft_update(decay: float) -> None:
    src, tgt = _ac(0), _ac(1)
    before = {k: v.clone() for k, v in tgt.state_dict().items()}
    src.sync_weights_to(tgt, decay=decay)
    for k, v in tgt.state_dict().items():
        expected = decay * before[k] + (1 - decay) * src.state_dict()[k]
        torch.testing.assert_close(v, expected)


def test_agent_save_restore(tmp_path: Path) -> None:
    a = rl.Agent(rl.PPO(_ac(0)))
    b = rl.Agent(rl.PPO(_ac(1)))
    obs = np.random.default_rng(0).normal(size=(5, 4)).astype(np.float32)
    value_a, value_b = a.value(obs), b.value(obs)
    assert value_a is not None and value_b is not None  # PPO has a critic
    assert not np.allclose(value_a, value_b)
    a.save(tmp_path / "ckpt" / "agent.pt")
    b.restore(tmp_path / "ckpt" / "agent.pt")
    np.testing.assert_array_equal(a.value(obs), b.value(obs))
    np.testing.assert_array_equal(a.predict(obs), b.predict(obs))
    assert b.algorithm.optimizer.state_dict()["param_groups"] == a.algorithm.optimizer.state_dict()["param_groups"]


def test_agent_numpy_in_out_and_preprocess_hook() -> None:
    class Doubling(rl.Agent):
        def preprocess_obs(self, obs: np.ndarray) -> np.ndarray:
            return (2 * obs).astype(np.float32)

    model = _ac()
    obs = np.ones((3, 4), dtype=np.float64)
    step = Doubling(rl.A2C(model)).sample_with_info(obs)
    assert step.action.shape == (3,) and step.action.dtype == np.int64
    assert step.log_prob is not None and step.log_prob.shape == (3,)
    assert step.value is not None
    np.testing.assert_allclose(step.value, model.value(torch.full((3, 4), 2.0)).detach().numpy(), rtol=1e-6)
