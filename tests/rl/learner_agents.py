"""What the learner tests share: the agents the workers build (module-level, so that they
pickle by reference), their environments' configs and replays, and ``on`` to run a coroutine on
a test cluster's loop."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

import actorrt
import rl
from rl.collector import env_spaces

T = TypeVar("T")
CONFIG = rl.CollectorConfig("CartPole-v1", num_envs=4, num_steps=16, seed=0)
PENDULUM = rl.CollectorConfig("Pendulum-v1", num_envs=2, num_steps=16, seed=0)


def on(cluster: actorrt.Cluster, coro: Coroutine[Any, Any, T], timeout: float = 120) -> T:
    return asyncio.run_coroutine_threadsafe(coro, cluster.loop).result(timeout)


def make_impala() -> rl.Agent:
    obs, act = env_spaces(CONFIG)
    return rl.Agent(rl.IMPALA(rl.ActorCritic(obs, act), lr=1e-3, max_grad_norm=0.5))


def make_normalized_impala() -> rl.Agent:
    obs, act = env_spaces(CONFIG)
    assert obs.shape is not None
    algorithm = rl.IMPALA(rl.ActorCritic(obs, act), lr=1e-3, max_grad_norm=0.5)
    return rl.NormalizingAgent(algorithm, obs.shape, gamma=0.99)


def make_a2c() -> rl.Agent:
    obs, act = env_spaces(CONFIG)
    return rl.Agent(rl.A2C(rl.ActorCritic(obs, act), lr=1e-3))


def make_ppo() -> rl.Agent:
    obs, act = env_spaces(CONFIG)
    return rl.Agent(rl.PPO(rl.ActorCritic(obs, act)))


def make_normalized_a2c() -> rl.Agent:
    obs, act = env_spaces(CONFIG)
    assert obs.shape is not None
    return rl.NormalizingAgent(rl.A2C(rl.ActorCritic(obs, act), lr=1e-3), obs.shape, gamma=0.99)


def make_sac() -> rl.Agent:
    obs, act = env_spaces(PENDULUM)
    return rl.Agent(rl.SAC(rl.SquashedGaussianActor(obs, act, (32, 32)), rl.TwinQCritic(obs, act, (32, 32))))


def make_td3() -> rl.Agent:
    obs, act = env_spaces(PENDULUM)
    return rl.Agent(rl.TD3(rl.DeterministicActor(obs, act, (32, 32)), rl.TwinQCritic(obs, act, (32, 32))))


def pendulum_replay() -> rl.UniformReplay:
    obs, act = env_spaces(PENDULUM)
    assert obs.shape is not None and act.shape is not None
    return rl.UniformReplay(50_000, obs.shape, act.shape, seed=0)


def prioritised_replay() -> rl.PrioritizedReplay:
    obs, act = env_spaces(PENDULUM)
    assert obs.shape is not None and act.shape is not None
    return rl.PrioritizedReplay(50_000, obs.shape, act.shape, seed=0)
