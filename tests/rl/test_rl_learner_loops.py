"""The Learner's training loops (rl.learners.loops, rl.learners.off_policy) and its WorkerPool,
each driven by its events in this process: workers that answer at once (or die), an agent that
counts what it learns. What each loop does with a rollout or a gradient, when the workers get new
weights, and what the run counts; the loops on a real cluster are tests/rl/test_rl_learners.py."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch

import actorrt
import rl
from rl.learners import loops
from rl.learners.off_policy import ReplayLearning
from rl.learners.pool import RolloutPumps, WorkerPool
from rl.learners.progress import Progress
from rl.learners.workers import GradientResult, WorkerFailedError
from rl.storage import Rollout

CONFIG = rl.CollectorConfig("Pendulum-v1", num_envs=2, num_steps=4, seed=0)
STEPS = 8  # a rollout of CONFIG: 4 steps of 2 environments


def _rollout(returns: tuple[float, ...] = (1.0,), envs: int = 2, obs_dim: int = 3) -> Rollout[np.ndarray]:
    t = 4
    zeros = np.zeros((t, envs), np.float32)
    no = np.zeros((t, envs), bool)
    obs = np.random.default_rng(len(returns)).uniform(-1, 1, (t, envs, obs_dim)).astype(np.float32)
    return Rollout(
        obs,
        np.random.default_rng(1).uniform(-2, 2, (t, envs, 1)).astype(np.float32),
        zeros + 0.5,
        no,
        no,
        zeros,
        zeros,
        np.zeros_like(obs),
        zeros,
        np.zeros((envs, obs_dim), np.float32),
        np.zeros(envs, np.float32),
        np.array(returns),
        np.full(len(returns), 4, np.int64),
    )


def _answered(value: Any = None, error: BaseException | None = None) -> asyncio.Future[Any]:
    """A call's answer, there at once (as an actor call's future, with its done callbacks)."""
    fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
    if error is None:
        fut.set_result(value)
    else:
        fut.set_exception(error)
    return fut


class FakeWorker:
    """Stands in for a remote worker's handle: answers every call at once and keeps what it got.
    ``dies``: how many of the first workers built die at their first collect (or gradient)."""

    ids = itertools.count()
    dies = 0

    def __init__(self) -> None:
        self.actor_id = f"worker-{next(self.ids)}"
        self.version = 0
        self.calls: list[tuple[str, Any]] = []
        self.collected = 0
        self.dead = FakeWorker.dies > 0
        FakeWorker.dies -= 1

    @classmethod
    async def remote(cls, config: rl.CollectorConfig, make_agent: Any, env_fn: Any) -> FakeWorker:
        return cls()

    def _death(self) -> actorrt.ActorDiedError:
        return actorrt.ActorDiedError(self.actor_id, "killed by the test")

    def collect(self) -> asyncio.Future[Any]:
        if self.dead:
            return _answered(error=self._death())
        self.collected += 1
        return _answered((_rollout(), self.version))

    def compute_gradients(self) -> asyncio.Future[Any]:
        if self.dead:
            return _answered(error=self._death())
        k = int(self.actor_id.rsplit("-", 1)[1])
        result = GradientResult(
            [np.full(2, float(k % 2 + 1), np.float32)], {"loss": 1.0}, np.array([2.0]), np.array([4]), STEPS, 0, k
        )
        return _answered(result)

    def set_weights(self, weights: Any, version: int) -> asyncio.Future[None]:
        self.version = version
        self.calls.append(("set_weights", version))
        return _answered()

    def set_uniform_exploration(self, uniform: bool) -> asyncio.Future[None]:
        self.calls.append(("set_uniform_exploration", uniform))
        return _answered()

    def apply_gradients(self, grads: list[np.ndarray], version: int, others: list[Any]) -> asyncio.Future[None]:
        self.calls.append(("apply_gradients", (grads[0].tolist(), version, list(others))))
        return _answered()

    def pid(self) -> asyncio.Future[int]:
        return _answered(0)

    def sent(self, method: str) -> list[Any]:
        return [arg for name, arg in self.calls if name == method]


class FakeAgent:
    """Learns nothing: counts the batches it was given and the streams they came from."""

    def __init__(self) -> None:
        self.learned: list[Any] = []
        self.streams: list[str] = []
        self.statistics: list[Any] = []
        self.param = torch.nn.Parameter(torch.zeros(2))
        self.algorithm = type("Algorithm", (), {"optimizer": torch.optim.SGD([self.param], lr=1.0)})()

    def learn(self, batch: Any) -> dict[str, float]:
        self.learned.append(batch)
        return {"loss": float(len(self.learned))}

    def select_stream(self, key: str) -> None:
        self.streams.append(key)

    def get_weights(self) -> dict[str, np.ndarray]:
        return {"learned": np.array(len(self.learned))}

    def add_statistics(self, taken: Any) -> None:
        self.statistics.append(taken)


class FakeCollector:
    """A local collector: the same rollout, every time (``before`` is called first)."""

    def __init__(self, before: Callable[[], None] = lambda: None) -> None:
        self.before = before

    def collect(self) -> Rollout[np.ndarray]:
        self.before()
        return _rollout()

    def close(self) -> None:
        pass


@asynccontextmanager
async def _workers(
    n: int = 2, dies: int = 0, set_up: Any = None
) -> AsyncIterator[tuple[loops.UpdateThread, Progress, WorkerPool]]:
    """An update thread, a fresh Progress and a started pool of ``n`` FakeWorkers (the first
    ``dies`` built die at their first call)."""
    FakeWorker.dies = dies
    thread = loops.UpdateThread()
    thread.start()
    unused: Any = None
    pool = WorkerPool(FakeWorker, [CONFIG] * n, make_agent=unused, env_fn=None, timeout_s=None, set_up=set_up)
    await pool.start()
    try:
        yield thread, Progress(20, None, None), pool
    finally:  # nothing to kill: the workers are fakes
        thread.close()


async def _run_locally(loop: loops.TrainingLoop, total_steps: int) -> None:
    """``loop.run()`` to ``total_steps`` env steps, its update thread started for it."""
    loop.thread.start()
    try:
        loop.progress.begin(total_steps, stop_at=None)
        await loop.run()
    finally:
        loop.thread.close()


async def test_local_collection_learns_each_rollout_it_collects() -> None:
    agent: Any = FakeAgent()
    collector: Any = FakeCollector()
    thread, progress = loops.UpdateThread(), Progress(2, None, None)
    loop = loops.LocalCollection(agent, thread, progress, CONFIG, None)
    loop.collector = collector
    await _run_locally(loop, 3 * STEPS)
    assert len(agent.learned) == progress.updates == 3 and progress.env_steps == 3 * STEPS
    assert progress.lags == [0, 0, 0] and progress.version == 0
    assert progress.returns.episodes == 3 and progress.result(1.0, 0).solved


async def test_sync_collection_takes_one_update_on_every_collectors_rollout_then_broadcasts() -> None:
    agent: Any = FakeAgent()
    async with _workers(2) as (thread, progress, pool):
        progress.begin(3 * 2 * STEPS, stop_at=None)
        await loops.SyncCollection(agent, thread, progress, pool).run()
    assert [batch.obs.shape[1] for batch in agent.learned] == [4, 4, 4]  # both collectors' envs, side by side
    assert progress.updates == 3 and progress.env_steps == 6 * STEPS and progress.version == 3
    assert progress.lags == [0, 0, 0]  # every rollout acted with the newest weights
    for worker in pool.handles:
        assert worker.sent("set_weights") == [1, 2, 3]


async def test_async_collection_learns_each_rollout_as_it_arrives_and_carries_the_rest() -> None:
    """An update per rollout, each after the agent heard which collector it came from; the weights
    to every collector each ``broadcast_every`` updates; what the collectors delivered after the
    step count was reached is learned from first by the next run."""
    agent: Any = FakeAgent()
    async with _workers(2) as (thread, progress, pool):
        pumps = RolloutPumps(pool, rollouts_in_flight=2, max_queued=3)
        loop = loops.AsyncCollection(agent, thread, progress, pool, pumps, broadcast_every=2)
        progress.begin(6 * STEPS, stop_at=None)
        await loop.run()
        assert progress.updates == 6 and progress.version == 3
        assert len(agent.streams) == 6 and set(agent.streams) == {w.actor_id for w in pool.handles}
        for worker in pool.handles:
            assert worker.sent("set_weights") == [1, 2, 3]
        carried = len(pumps.carried)
        assert sum(w.collected for w in pool.handles) == 6 + carried and carried > 0
        progress.begin(progress.env_steps + STEPS, stop_at=None)
        await loop.run()
        assert progress.updates == 7 and len(pumps.carried) >= carried - 1
        loop.restored(None)
        assert not pumps.carried  # collected by the policy a checkpoint replaced
        await loop.close()


@pytest.mark.parametrize("decentralised", [False, True], ids=["central", "decentralised"])
async def test_sync_gradients_are_averaged_into_one_step_here_and_in_every_worker(decentralised: bool) -> None:
    agent: Any = FakeAgent()
    async with _workers(2) as (thread, progress, pool):
        progress.begin(2 * STEPS, stop_at=None)
        await loops.SyncGradients(agent, thread, progress, pool, decentralised).run()
    assert progress.updates == 1 and progress.version == 1 and progress.env_steps == 2 * STEPS
    torch.testing.assert_close(agent.param.detach(), torch.full((2,), -1.5))  # SGD(lr=1) on the mean of 1 and 2
    first, second = pool.handles
    ids = [int(w.actor_id.rsplit("-", 1)[1]) for w in (first, second)]
    assert sorted(agent.statistics) == sorted(ids)  # what each worker's normaliser took in
    if decentralised:  # the same mean gradients to each, with the others' statistics; no weights
        assert first.sent("apply_gradients") == [([1.5, 1.5], 1, [ids[1]])]
        assert second.sent("apply_gradients") == [([1.5, 1.5], 1, [ids[0]])]
        assert first.sent("set_weights") == second.sent("set_weights") == []
    else:
        assert first.sent("set_weights") == second.sent("set_weights") == [1]
        assert first.sent("apply_gradients") == second.sent("apply_gradients") == []


async def test_async_gradients_send_new_weights_to_the_worker_that_answered() -> None:
    agent: Any = FakeAgent()
    async with _workers(2) as (thread, progress, pool):
        progress.begin(5 * STEPS, stop_at=None)
        await loops.AsyncGradients(agent, thread, progress, pool).run()
    sent = sorted(v for w in pool.handles for v in w.sent("set_weights"))
    assert progress.updates == progress.version >= 5 and sent == list(range(1, progress.version + 1))
    assert all(w.sent("set_weights") for w in pool.handles)  # each got the weights its gradients made


async def test_a_dead_worker_is_replaced_set_up_and_a_crash_loop_ends() -> None:
    agent: Any = FakeAgent()
    set_up = []

    async def give_state(handle: Any) -> None:
        set_up.append(handle)

    async with _workers(2, dies=1, set_up=give_state) as (thread, progress, pool):
        dead = pool.handles[0]
        progress.begin(2 * 2 * STEPS, stop_at=None)
        await loops.SyncCollection(agent, thread, progress, pool).run()
        assert pool.replaced == 1 and set_up == [pool.handles[0]] and pool.handles[0] is not dead
        assert progress.env_steps == 5 * STEPS  # the round it died in counted the other's rollout only
    async with _workers(1, dies=10) as (thread, progress, pool):
        progress.begin(STEPS, stop_at=None)
        with pytest.raises(WorkerFailedError, match="died 4 times in a row"):
            await loops.SyncCollection(agent, thread, progress, pool).run()
        assert pool.replaced == 3


async def test_a_failed_send_is_raised_at_the_next_broadcast() -> None:
    async with _workers(1) as (_, _, pool):
        pool.send(_answered(error=RuntimeError("set_weights broke")))
        await asyncio.sleep(0)  # its done callback runs
        with pytest.raises(RuntimeError, match="set_weights broke"):
            pool.raise_send_error()
        pool.raise_send_error()  # once
        pool.send(_answered(error=actorrt.ActorDiedError("x", "gone")))
        await asyncio.sleep(0)
        pool.raise_send_error()  # a death surfaces at the worker's next call instead


# -- off-policy -----------------------------------------------------------------------------------

OBS = gym.spaces.Box(-1.0, 1.0, (3,), np.float32)
ACT = gym.spaces.Box(-2.0, 2.0, (1,), np.float32)


def _sac_agent() -> rl.Agent:
    torch.manual_seed(0)
    return rl.Agent(rl.SAC(rl.SquashedGaussianActor(OBS, ACT, (8,)), rl.TwinQCritic(OBS, ACT, (8,))))


def _replay_learning(
    agent: rl.Agent, thread: loops.UpdateThread, progress: Progress, pool: WorkerPool | None = None, **options: Any
) -> ReplayLearning:
    settings: dict[str, Any] = {
        "updates_per_step": 0.5,
        "batch_size": 4,
        "learning_starts": 2 * STEPS,
        "broadcast_every": 8,
        "in_actor": False,
        **options,
    }
    return ReplayLearning(agent, thread, progress, rl.UniformReplay(100, (3,), (1,), seed=0), pool=pool, **settings)


async def test_replay_learning_warms_up_then_keeps_its_update_to_data_ratio() -> None:
    """Locally: uniform actions before ``learning_starts``, then the policy's; no update before
    it, then ``updates_per_step`` per env step of the rollouts from the one that reached it."""
    agent, thread, progress = _sac_agent(), loops.UpdateThread(), Progress(20, None, None)
    loop = _replay_learning(agent, thread, progress)
    uniform: list[bool] = []
    algorithm = agent.algorithm
    assert isinstance(algorithm, rl.SAC)
    collector: Any = FakeCollector(lambda: uniform.append(algorithm.uniform_exploration))
    loop.local = collector
    await _run_locally(loop, 5 * STEPS)
    assert uniform == [True, True, False, False, False] and not algorithm.uniform_exploration
    assert len(loop.replay) == 5 * STEPS
    assert progress.updates == algorithm.updates == 0.5 * 4 * STEPS  # from the rollout that reached 16 steps
    assert progress.version == 0  # nothing to broadcast to


async def test_replay_learning_ends_the_collectors_warm_up_and_broadcasts_every_k_updates() -> None:
    agent = _sac_agent()
    async with _workers(2) as (thread, progress, pool):
        loop = _replay_learning(agent, thread, progress, pool)
        for worker in pool.handles:  # what the learner tells each worker when it starts
            await loop.set_up_worker(pool, worker, fresh=False)
        progress.begin(6 * STEPS, stop_at=None)
        await loop.run()
    for worker in pool.handles:
        assert worker.sent("set_uniform_exploration") == [True, False]
    # 4 updates per rollout from the second on: a broadcast whenever 8 were taken since the last.
    assert progress.updates == 5 * 4 and worker.sent("set_weights") == [1, 2]
    assert len(loop.replay) == 6 * STEPS


async def test_replay_learning_restored_without_its_replay_refills_it_before_learning() -> None:
    agent, thread, progress = _sac_agent(), loops.UpdateThread(), Progress(20, None, None)
    loop = _replay_learning(agent, thread, progress)
    loop.replay.add_rollout(_rollout())
    progress.restore(env_steps=1000, updates=500, version=7)
    loop.restored(None)
    assert len(loop.replay) == 0 and loop.first_update_at == 1000 + 2 * STEPS and not loop.warmup
    assert loop.updates_at_broadcast == 500
    saved = rl.UniformReplay(100, (3,), (1,))
    loop.restored(saved)
    assert loop.replay is saved and loop.first_update_at == 2 * STEPS
