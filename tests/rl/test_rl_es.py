"""Evolution strategies (OpenAI-ES and CMA-ES): the noise table, the batched policy, ask/tell,
and remote workers."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import Callable, Coroutine, Iterator
from pathlib import Path
from typing import Any, TypeVar

import gymnasium as gym
import numpy as np
import pytest
import torch

import actorrt
import rl
from rl.learners.es import ESLearner, evaluate_population
from rl.learners.workers import WorkerFailedError
from tests.examples_run import run_example
from tests.rl.faulty_envs import OneProcessOnly, dying_cartpole

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


def make_cmaes_agent() -> rl.Agent:
    torch.manual_seed(0)
    return rl.Agent(rl.CMAES(make_policy(), sigma=0.5, population=16, seed=0))


def test_cmaes_descends_a_rotated_ill_conditioned_quadratic() -> None:
    """ask/tell with returns -(theta - c)^T H (theta - c), H rotated with condition number 1e3:
    CMA-ES learns the covariance and gets to c (isotropic steps would crawl along the flat axes)."""
    torch.manual_seed(0)
    cmaes = rl.CMAES(rl.MLPPolicy(OBS, gym.spaces.Discrete(2), hidden=(2,)), sigma=0.5, seed=0)
    d = cmaes.dim
    rng = np.random.default_rng(0)
    q, _ = np.linalg.qr(rng.standard_normal((d, d)))
    h = q @ np.diag(np.logspace(0, 3, d)) @ q.T
    c = rng.uniform(-1, 1, d)

    def f(x: np.ndarray) -> np.ndarray:
        e = x.astype(np.float64) - c
        return np.einsum("ki,ij,kj->k", e, h, e)

    start = float(f(cmaes.theta()[None])[0])
    assert cmaes.population == 4 + int(3 * np.log(d))  # CMA-ES's default lambda
    for _ in range(400):
        candidates = cmaes.ask()
        assert candidates.shape == (cmaes.population, d) and candidates.dtype == np.float32
        stats = cmaes.tell(candidates, -f(candidates))
    assert float(f(cmaes.theta()[None])[0]) < 1e-4 * start
    assert cmaes.generation == 400 and stats["sigma"] < 0.5
    # The model holds the distribution's mean: acting uses it.
    np.testing.assert_allclose(cmaes.model.flat_parameters().numpy(), cmaes.theta())


def test_cmaes_rejects_what_it_cannot_use() -> None:
    cmaes = rl.CMAES(make_policy(), population=8)
    candidates = cmaes.ask()
    with pytest.raises(ValueError, match="candidates for n returns"):
        cmaes.tell(candidates[:, :-1], np.zeros(8))
    with pytest.raises(ValueError, match="non-finite"):
        cmaes.tell(candidates, np.array([np.nan] + [0.0] * 7))
    with pytest.raises(ValueError, match="sigma must be > 0"):
        rl.CMAES(make_policy(), sigma=0.0)
    with pytest.raises(ValueError, match="population must be >= 2"):
        rl.CMAES(make_policy(), population=1)
    with pytest.raises(TypeError, match="ask\\(\\)/tell\\(\\)"):
        cmaes.learn(None)


def test_cmaes_checkpoint_restarts_the_search_at_the_saved_mean(tmp_path: Path) -> None:
    agent = make_cmaes_agent()
    cmaes = agent.algorithm
    assert isinstance(cmaes, rl.CMAES)
    for _ in range(3):
        candidates = cmaes.ask()
        cmaes.tell(candidates, -np.abs(candidates).sum(1))
    agent.save(tmp_path / "cmaes.pt")
    fresh = make_cmaes_agent()
    fresh.restore(tmp_path / "cmaes.pt")
    assert isinstance(fresh.algorithm, rl.CMAES)
    np.testing.assert_array_equal(fresh.algorithm.theta(), cmaes.theta())
    # The next generation is centred on the restored mean, with the initial step size.
    candidates = fresh.algorithm.ask()
    assert fresh.algorithm.sigma == 0.5
    assert np.abs(candidates.mean(0) - cmaes.theta()).max() < 1.0


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


@pytest.mark.parametrize(
    "agent_fn,killed,steps", [(make_agent, 0, 60_000), (make_cmaes_agent, 1, 40_000)], ids=["es", "cmaes"]
)
def test_remote_workers_train_and_a_killed_one_is_replaced(
    rl_cluster: actorrt.Cluster, agent_fn: Callable[[], rl.Agent], killed: int, steps: int
) -> None:
    async def go() -> Any:
        async with ESLearner(agent_fn, make_policy, "CartPole-v1", num_workers=2, theta_episodes=2) as learner:
            pid = await learner.handles[killed].pid()
            training = asyncio.ensure_future(learner.train(steps, stop_when_solved=False))
            while learner.es.generation < 2:
                await asyncio.sleep(0.01)
            os.kill(pid, signal.SIGKILL)
            result = await training
            return result, learner.history

    result, history = on(rl_cluster, go())
    assert result.replaced_workers == 1 and result.env_steps >= steps
    assert result.updates == len(history) and result.episodes == 2 * len(history)
    # Learning happened: the population's mean return grew from the first generations to the last.
    first = np.mean([h["population_return"] for h in history[:3]])
    last = np.mean([h["population_return"] for h in history[-3:]])
    assert last > first + 20, (first, last)


def test_a_hung_es_worker_is_killed_and_replaced(rl_cluster: actorrt.Cluster) -> None:
    """A worker alive but stuck (its process stopped with SIGSTOP) held every generation after it
    forever; past ``worker_timeout_s`` it is killed as hung, and a new worker takes its share."""

    async def go() -> Any:
        async with ESLearner(
            make_agent, make_policy, "CartPole-v1", num_workers=2, theta_episodes=2, worker_timeout_s=2.0
        ) as learner:
            pid = await learner.handles[0].pid()
            training = asyncio.ensure_future(learner.train(8_000, stop_when_solved=False))
            while learner.es.generation < 2:
                await asyncio.sleep(0.01)
            os.kill(pid, signal.SIGSTOP)
            try:
                return await asyncio.wait_for(training, 90)
            finally:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)

    result = on(rl_cluster, go())
    assert result.replaced_workers == 1 and result.env_steps >= 8_000
    with pytest.raises(ValueError, match="worker_timeout_s must be > 0"):
        ESLearner(make_agent, make_policy, "CartPole-v1", worker_timeout_s=0)


def make_one_pair_agent() -> rl.Agent:
    torch.manual_seed(0)
    return rl.Agent(rl.ES(make_policy(), rl.NoiseTable(2**16, 7), population=2, sigma=0.1, lr=0.05))


def test_more_es_workers_than_work_leaves_the_spare_ones_idle(rl_cluster: actorrt.Cluster) -> None:
    """One antithetic pair and one theta episode over two workers: the second's share is empty
    (it raised "need at least one array to stack" from inside the worker)."""

    async def go() -> Any:
        async with ESLearner(
            make_one_pair_agent, make_policy, "CartPole-v1", num_workers=2, theta_episodes=1
        ) as learner:
            return await learner.train(200, stop_when_solved=False)

    result = on(rl_cluster, go())
    assert result.env_steps >= 200 and result.episodes >= 1


def test_an_es_worker_that_dies_every_time_ends_training_with_a_clear_error(rl_cluster: actorrt.Cluster) -> None:
    async def go() -> tuple[BaseException, int]:
        async with ESLearner(make_agent, make_policy, "CartPole-v1", num_workers=1, env_fn=dying_cartpole) as learner:
            with pytest.raises(WorkerFailedError) as caught:
                await asyncio.wait_for(learner.train(10_000), 60)
            return caught.value, learner.replaced

    error, replaced = on(rl_cluster, go())
    assert str(error).startswith("ESWorker 0 died 4 times in a row without delivering a result"), error
    assert replaced == 3
    assert rl_cluster.status().result().slots_used == 0


def test_a_failing_share_stops_the_generation_without_replacing_the_other_worker(
    rl_cluster: actorrt.Cluster, tmp_path: Path
) -> None:
    """One worker's env raises: train raises that error, the other share is cancelled, and no
    replacement for the worker that close() then kills is started (no slot is held after)."""
    env_fn = OneProcessOnly(str(tmp_path / "owner"), broken_step=True)

    async def go() -> int:
        async with ESLearner(make_agent, make_policy, "CartPole-v1", num_workers=2, env_fn=env_fn) as learner:
            with pytest.raises(actorrt.RemoteError, match="this env's step is broken"):
                await learner.train(1_000_000)
        await asyncio.sleep(1.0)  # a replacement started after close() would hold a slot by now
        return learner.replaced

    assert on(rl_cluster, go()) == 0
    status = rl_cluster.status().result()
    assert status.slots_used == 0, status.actors


def test_an_es_learner_must_be_started_to_train() -> None:
    learner = ESLearner(make_agent, make_policy, "CartPole-v1")
    with pytest.raises(RuntimeError, match="start the ESLearner first"):
        asyncio.run(learner.train(100))


def test_es_learner_refuses_a_worker_policy_of_another_size() -> None:
    """The workers evaluate theta in the policy ``make_policy`` builds: a smaller one used the
    first part of theta and ignored the rest, without an error."""

    def smaller() -> rl.MLPPolicy:
        return rl.MLPPolicy(OBS, gym.spaces.Discrete(2), hidden=(4,))

    with pytest.raises(ValueError, match=r"make_policy builds a policy of \d+ parameters, but the agent's ES searches"):
        ESLearner(make_agent, smaller, "CartPole-v1")


def test_es_learner_names_an_algorithm_it_cannot_drive() -> None:
    def dqn_agent() -> rl.Agent:
        return rl.Agent(rl.DQN(rl.QNetwork(OBS, gym.spaces.Discrete(2))))

    with pytest.raises(TypeError, match=r"rl\.ES or rl\.CMAES, not DQN"):
        ESLearner(dqn_agent, make_policy, "CartPole-v1")


@pytest.mark.slow
def test_es_cartpole_example_solves(tmp_path: Path) -> None:
    """The example on its own embedded cluster, 2 workers: 9-31 generations on seeds 0-3."""
    rc, line, stderr = run_example("es_cartpole", tmp_path / "run", "--total-steps", "2000000")
    assert rc == 0 and line["solved"] and line["mean_return"] >= 475, (line, stderr)


def test_cmaes_cartpole_example_solves(tmp_path: Path) -> None:
    """``examples/es_cartpole.py --algo cmaes`` on its own embedded cluster, 2 workers: solved in
    73k-142k env steps (~2 s of training) on seeds 0-3."""
    args = ["--algo", "cmaes", "--total-steps", "1000000"]
    rc, line, stderr = run_example("es_cartpole", tmp_path / "run", *args, timeout=200)
    assert rc == 0 and line["algo"] == "CMA-ES", (line, stderr)
    assert line["solved"] and line["mean_return"] >= 475, line
