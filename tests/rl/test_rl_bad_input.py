"""Mistakes a first-time user of ``rl`` makes, each refused with an error that names it (before,
each gave a library's traceback that did not, or was accepted and computed nonsense)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

import rl
from rl.collector import env_spaces
from rl.envs import PointReach
from rl.her import HerReplay, run_goal_episode, train_goal_conditioned

PENDULUM = rl.CollectorConfig("Pendulum-v1", num_envs=1, num_steps=8)
CARTPOLE = rl.CollectorConfig("CartPole-v1", num_envs=1, num_steps=8)


def _sac() -> rl.Agent:
    obs, act = env_spaces(PENDULUM)
    return rl.Agent(rl.SAC(rl.SquashedGaussianActor(obs, act, (16,)), rl.TwinQCritic(obs, act, (16,))))


def _ppo() -> rl.Agent:
    obs, act = env_spaces(CARTPOLE)
    return rl.Agent(rl.PPO(rl.ActorCritic(obs, act, (16,))))


def _dqn(**kwargs: Any) -> rl.DQN:
    obs, act = env_spaces(CARTPOLE)
    return rl.DQN(rl.QNetwork(obs, act, (16,)), **kwargs)


def _es(**kwargs: Any) -> rl.ES:
    obs, act = env_spaces(CARTPOLE)
    return rl.ES(rl.MLPPolicy(obs, act, (4,)), rl.NoiseTable(10_000), population=4, **kwargs)


def _replay(**kwargs: Any) -> rl.UniformReplay:
    return rl.UniformReplay(100, (3,), **kwargs)


def _add(replay: rl.UniformReplay, obs_cols: int = 3, act_shape: tuple[int, ...] = (), n: int = 5) -> None:
    replay.add(
        np.zeros((n, obs_cols), np.float32),
        np.zeros((n, *act_shape), np.float32),
        np.zeros(n, np.float32),
        np.zeros((n, 3), np.float32),
        np.zeros(n, bool),
    )


def _train_off_policy_too_short() -> None:
    agent = _sac()
    collector = rl.Collector(PENDULUM, agent)
    try:
        rl.train_off_policy(agent, collector, rl.UniformReplay(1000, (3,), (1,)), total_steps=200)
    finally:
        collector.close()


def _train_on_policy_with_sac() -> None:
    agent = _sac()
    collector = rl.Collector(PENDULUM, agent)
    try:
        rl.train_on_policy(agent, collector, 100)
    finally:
        collector.close()


CASES: dict[str, tuple[Callable[[], Any], type[Exception], str]] = {
    "discrete observations": (
        lambda: rl.QNetwork(gym.spaces.Discrete(16), gym.spaces.Discrete(4)),
        TypeError,
        r"Discrete\(16\) holds indices, not vectors: for observations, one-hot them with .*FlattenObservation",
    ),
    "dict observations": (
        lambda: rl.ActorCritic(PointReach().observation_space, gym.spaces.Discrete(2)),
        TypeError,
        "Dict observations: flatten them",
    ),
    "collector num_envs 0": (lambda: rl.CollectorConfig(num_envs=0), ValueError, "num_envs must be a whole number"),
    "collector num_steps -1": (lambda: rl.CollectorConfig(num_steps=-1), ValueError, "num_steps must be"),
    "collector seed None": (lambda: rl.CollectorConfig(seed=None), TypeError, "seed must be an int"),  # type: ignore[arg-type]
    "replay capacity of a fraction": (lambda: rl.UniformReplay(100.5, (3,)), ValueError, "capacity must be a whole"),  # type: ignore[arg-type]
    "replay obs_shape as an int": (lambda: rl.UniformReplay(100, 3), TypeError, r"obs_shape must be a tuple"),  # type: ignore[arg-type]
    "replay add with the action dim missing": (
        lambda: _add(_replay(), act_shape=(1,)),
        ValueError,
        r"actions has shape \(5, 1\); this replay stores actions as \(5,\).*action_shape",
    ),
    "replay add broadcasting obs": (
        lambda: _add(_replay(), obs_cols=1),
        ValueError,
        r"obs has shape \(5, 1\); this replay stores obs as \(5, 3\)",
    ),
    "prioritized alpha -1": (lambda: rl.PrioritizedReplay(10, (3,), alpha=-1), ValueError, "alpha must be >= 0"),
    "prioritized beta 5": (lambda: rl.PrioritizedReplay(10, (3,), beta=5), ValueError, r"beta must be in \[0, 1\]"),
    "prioritized eps -1": (lambda: rl.PrioritizedReplay(10, (3,), eps=-1), ValueError, "eps must be > 0"),
    "dqn tau 0": (lambda: _dqn(tau=0.0), ValueError, r"tau must be in \(0, 1\]"),
    "dqn tau 2": (lambda: _dqn(tau=2.0), ValueError, r"tau must be in \(0, 1\]"),
    "dqn target_update_interval 0": (lambda: _dqn(target_update_interval=0), ValueError, "target_update_interval"),
    "gamma 1.5": (lambda: _dqn(gamma=1.5), ValueError, r"gamma \(the discount\) must be in \[0, 1\]"),
    "ppo gae_lambda 2": (
        lambda: rl.PPO(rl.ActorCritic(*env_spaces(CARTPOLE)), gae_lambda=2.0),
        ValueError,
        r"gae_lambda must be in \[0, 1\]",
    ),
    "ppo num_minibatches 0": (
        lambda: rl.PPO(rl.ActorCritic(*env_spaces(CARTPOLE)), num_minibatches=0),
        ValueError,
        "num_epochs and num_minibatches must be >= 1",
    ),
    "es sigma 0": (lambda: _es(sigma=0.0), ValueError, "sigma .* must be > 0"),
    "es nan return": (
        lambda: _es().tell(np.array([0, 1]), np.array([np.nan, 1.0]), np.array([0.0, 2.0])),
        ValueError,
        "returns_pos holds non-finite returns",
    ),
    "es returns of another length": (
        lambda: _es().tell(np.array([0, 1]), np.array([1.0, 2.0, 3.0]), np.array([0.0, 2.0])),
        ValueError,
        r"returns_pos has shape \(3,\); one return per offset: \(2,\)",
    ),
    "off-policy run shorter than learning_starts": (
        _train_off_policy_too_short,
        ValueError,
        "learning_starts=1000 > total_steps=200: the run would end before its first update",
    ),
    "train_on_policy with SAC": (
        _train_on_policy_with_sac,
        TypeError,
        "SAC learns from a replay: use rl.train_off_policy",
    ),
    "her on a non-goal env": (
        lambda: run_goal_episode(gym.make("Pendulum-v1"), lambda x: np.zeros((1, 1))),
        TypeError,
        "a goal-conditioned env needs Dict observations",
    ),
    "her with DQN": (
        lambda: train_goal_conditioned(rl.Agent(_dqn()), PointReach(), None, 1),  # type: ignore[arg-type]
        TypeError,
        "needs an agent around DDPG, TD3 or SAC, not DQN",
    ),
    "her n_sampled_goal -1": (
        lambda: HerReplay(100, 2, 2, (2,), 10, PointReach().compute_reward, n_sampled_goal=-1),
        ValueError,
        "n_sampled_goal must be >= 0",
    ),
    "weights of another model": (
        lambda: _ppo().set_weights(rl.Agent(_dqn()).get_weights()),
        KeyError,
        "they are the weights of another model",
    ),
}


@pytest.mark.parametrize("name", list(CASES))
def test_a_mistake_is_refused_naming_it(name: str) -> None:
    call, error, message = CASES[name]
    with pytest.raises(error, match=message):
        call()


def test_a_capacity_written_as_a_float_is_taken() -> None:
    assert rl.UniformReplay(1e3, (3,)).capacity == 1000  # type: ignore[arg-type]


def test_a_checkpoint_of_another_algorithm_is_refused(tmp_path: Path) -> None:
    """PPO's checkpoint loaded into A2C went in, and the first update failed with KeyError 'betas'."""
    obs, act = env_spaces(CARTPOLE)
    path = tmp_path / "ppo.pt"
    rl.Agent(rl.PPO(rl.ActorCritic(obs, act, (16,)))).save(path)
    a2c = rl.Agent(rl.A2C(rl.ActorCritic(obs, act, (16,))))
    with pytest.raises(ValueError, match="this state is a PPO's; it cannot be loaded into a A2C"):
        a2c.restore(path)
    again = rl.Agent(rl.PPO(rl.ActorCritic(obs, act, (16,))))
    again.restore(path)  # its own kind loads


def test_ppo_with_more_minibatches_than_samples_says_so() -> None:
    agent = rl.Agent(rl.PPO(rl.ActorCritic(*env_spaces(CARTPOLE), (16,)), num_minibatches=32))
    collector = rl.Collector(CARTPOLE, agent)
    try:
        rollout = collector.collect()
    finally:
        collector.close()
    with pytest.raises(ValueError, match="num_minibatches=32 is more than the rollout's 8 samples"):
        agent.learn(rollout)
