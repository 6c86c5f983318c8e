"""Evolution strategies: the noise table, the batched policy, ask/tell, and remote workers."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
from collections.abc import Coroutine, Iterator
from pathlib import Path
from typing import Any, TypeVar

import gymnasium as gym
import numpy as np
import pytest
import torch

import actorrt
import rl
from rl.learners.es import ESLearner, evaluate_population

T = TypeVar("T")
ROOT = Path(__file__).resolve().parents[2]
OBS = gym.spaces.Box(-np.inf, np.inf, (4,), np.float32)


def make_policy() -> rl.MLPPolicy:
    return rl.MLPPolicy(OBS, gym.spaces.Discrete(2), hidden=(8,))


def make_agent() -> rl.Agent:
    torch.manual_seed(0)
    return rl.Agent(rl.ES(make_policy(), rl.NoiseTable(2**16, 7), population=16, sigma=0.1, lr=0.05))


def test_noise_table_is_the_same_everywhere_and_offsets_fit() -> None:
    a, b = rl.NoiseTable(10_000, 5), rl.NoiseTable(10_000, 5)
    np.testing.assert_array_equal(a.noise, b.noise)
    assert not np.array_equal(a.noise, rl.NoiseTable(10_000, 6).noise)
    offsets = a.sample_offsets(np.random.default_rng(0), 300, 5000)
    assert offsets.min() >= 0 and offsets.max() <= 10_000 - 300
    assert a.stack(offsets[:3], 300).shape == (3, 300)
    np.testing.assert_array_equal(a.stack(offsets[:1], 300)[0], a.noise[offsets[0] : offsets[0] + 300])
    with pytest.raises(ValueError):
        a.sample_offsets(np.random.default_rng(0), 20_000, 1)


@pytest.mark.parametrize("space", [gym.spaces.Discrete(3), gym.spaces.Box(-2.0, 2.0, (2,), np.float32)])
def test_batched_forward_equals_one_model_per_row(space: gym.Space) -> None:
    torch.manual_seed(0)
    policy = rl.MLPPolicy(OBS, space, hidden=(8, 8))
    flat = torch.randn(5, policy.num_parameters)
    obs = torch.randn(5, 4)
    batched = policy.batched_forward(flat, obs)
    for k in range(5):
        policy.set_flat_parameters(flat[k])
        np.testing.assert_allclose(
            policy(obs[k : k + 1])[0].detach().numpy(), batched[k].detach().numpy(), rtol=1e-5, atol=1e-6
        )
    np.testing.assert_array_equal(policy.flat_parameters().numpy(), flat[4].numpy())


def test_es_ascends_a_quadratic() -> None:
    """ask/tell with returns -|theta - c|^2 (no environment): theta moves to c."""
    torch.manual_seed(0)
    es = rl.ES(make_policy(), rl.NoiseTable(2**16, 1), population=32, sigma=0.05, lr=0.05, l2_coeff=0.0)
    c = np.linspace(-1, 1, es.dim).astype(np.float32)
    start = np.linalg.norm(es.theta() - c)
    for _ in range(300):
        offsets = es.ask()
        pop = es.population(es.theta(), offsets)
        returns = -((pop - c) ** 2).sum(1)
        es.tell(offsets, returns[: len(offsets)], returns[len(offsets) :])
    assert np.linalg.norm(es.theta() - c) < 0.2 * start


def test_mirrored_pairs_share_their_episode_seed() -> None:
    """A policy that ignores its parameters scores the same on + and -: common random numbers."""
    policy = make_policy()
    envs = [gym.make("CartPole-v1") for _ in range(4)]
    zeros = np.zeros((4, policy.num_parameters), np.float32)
    returns, lengths = evaluate_population(envs, policy, zeros, np.array([3, 4, 3, 4]))
    assert returns[0] == returns[2] and returns[1] == returns[3] and lengths.sum() == returns.sum()


@pytest.fixture(scope="module")
def rl_cluster() -> Iterator[actorrt.Cluster]:
    from tests.conftest import shared_embedded_cluster

    with shared_embedded_cluster(num_cpus=2, preload=["rl.learners"]) as c:
        yield c


def on(cluster: actorrt.Cluster, coro: Coroutine[Any, Any, T], timeout: float = 120) -> T:
    return asyncio.run_coroutine_threadsafe(coro, cluster.loop).result(timeout)


def test_remote_workers_train_and_a_killed_one_is_replaced(rl_cluster: actorrt.Cluster) -> None:
    async def go() -> Any:
        async with ESLearner(make_agent, make_policy, "CartPole-v1", num_workers=2, theta_episodes=2) as learner:
            pid = await learner.handles[0].pid()
            training = asyncio.ensure_future(learner.train(60_000, stop_when_solved=False))
            while learner.es.generation < 2:
                await asyncio.sleep(0.01)
            os.kill(pid, signal.SIGKILL)
            result = await training
            return result, learner.history

    result, history = on(rl_cluster, go())
    assert result.replaced_workers == 1 and result.env_steps >= 60_000
    assert result.updates == len(history) and result.episodes == 2 * len(history)
    # Learning happened: the population's mean return grew from the first generations to the last.
    first = np.mean([h["population_return"] for h in history[:3]])
    last = np.mean([h["population_return"] for h in history[-3:]])
    assert last > first + 20, (first, last)


@pytest.mark.slow
def test_es_cartpole_example_solves(tmp_path: Path) -> None:
    """The example on its own embedded cluster, 2 workers: 9-31 generations on seeds 0-3."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run(
        [
            sys.executable,
            "examples/es_cartpole.py",
            "--no-progress",
            "--no-tensorboard",
            "--run-dir",
            str(tmp_path / "run"),
            "--total-steps",
            "2000000",
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=280,
    )
    line = json.loads(proc.stdout.strip().splitlines()[-1])
    assert proc.returncode == 0 and line["solved"] and line["mean_return"] >= 475, (line, proc.stderr[-2000:])
