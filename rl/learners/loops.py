"""The training loops of a :class:`rl.learners.Learner`, one per way its scheme can train, behind
one interface (:class:`TrainingLoop`); the learner builds the one its scheme names:

- :class:`LocalCollection`: rollouts collected in the learner's process, an update on each;
- :class:`SyncCollection` (A2C): every collector's rollout with the newest weights, one update on all;
- :class:`AsyncCollection` (IMPALA): collectors run ahead; an update on each rollout as it arrives;
- :class:`SyncGradients`: the gradient workers' gradients averaged into one step, taken by the
  learner (its weights then broadcast) or by every worker (a decentralised update);
- :class:`AsyncGradients` (A3C): each worker's gradients applied as they arrive;
- :class:`rl.learners.off_policy.ReplayLearning` (DDPG, TD3, SAC; Ape-X with a replay actor):
  rollouts feed a replay, and updates on sampled batches keep an update-to-data ratio.

Everything here runs on the learner's event loop; updates run in its :class:`UpdateThread`, so
the loop keeps receiving rollouts meanwhile.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import numpy as np
import torch

import actorrt
from rl.agent import Agent
from rl.collector import Collector, CollectorConfig
from rl.learners.pool import RolloutPumps, WorkerPool
from rl.learners.progress import Progress
from rl.learners.workers import GradientResult, apply_gradients, concat_rollouts
from rl.replay import UniformReplay
from rl.storage import Rollout

__all__ = [
    "AsyncCollection",
    "AsyncGradients",
    "LocalCollection",
    "SyncCollection",
    "SyncGradients",
    "TrainingLoop",
    "UpdateThread",
]

T = TypeVar("T")


class UpdateThread:
    """The one thread a learner's updates run in (its agent is touched there only, once started),
    so that its event loop keeps receiving rollouts meanwhile."""

    def __init__(self) -> None:
        self._executor: ThreadPoolExecutor | None = None

    def start(self) -> None:
        self._executor = ThreadPoolExecutor(1, thread_name_prefix="rl-learner")

    @property
    def running(self) -> bool:
        """Whether it was started and not closed (an update may be running in it)."""
        return self._executor is not None

    async def run(self, fn: Callable[..., T], *args: Any) -> T:
        """``fn(*args)`` in the thread."""
        return await asyncio.get_running_loop().run_in_executor(self._executor, fn, *args)

    def close(self) -> None:
        """Wait for the update running, and end the thread."""
        if self._executor is not None:
            self._executor.shutdown(wait=True)
            self._executor = None


class TrainingLoop:
    """One way a learner trains: where its rollouts (or gradients) come from, what it does with
    each, and when its workers get new weights. :meth:`run` trains until ``progress`` is
    :meth:`~rl.learners.progress.Progress.done`; the learner calls it once per ``train``, between
    :meth:`start` (once, before its workers start) and :meth:`close`."""

    replay: UniformReplay | None = None
    """Where an off-policy loop stores what collectors send (``None`` for the others)."""
    replay_actor: Any = None
    """The handle of the replay actor that holds the replay, while one runs."""

    def __init__(self, agent: Agent, thread: UpdateThread, progress: Progress) -> None:
        self.agent = agent
        """The learner's copy, updated in ``thread``."""
        self.thread = thread
        self.progress = progress

    async def start(self) -> None:
        """What the loop needs before the learner's workers start (nothing by default)."""

    async def run(self) -> None:
        """Train until ``progress`` is done."""
        raise NotImplementedError

    async def set_up_worker(self, pool: WorkerPool, handle: Any, fresh: bool) -> None:
        """Tell a worker of ``pool`` what this loop needs it to know besides the learner's weights
        (nothing by default). ``fresh``: a replacement just started, whose calls may take as long
        as they take (else each within the pool's ``timeout_s``)."""

    def restored(self, replay: UniformReplay | None) -> None:
        """The learner loaded a checkpoint (with its ``replay``, or without one) between runs:
        forget what the policy it replaced collected (nothing to forget by default)."""

    async def close(self) -> None:
        """Stop what the loop started (nothing by default)."""

    async def learn(self, batch: Rollout[np.ndarray], source: str | None = None) -> dict[str, float]:
        """One update on ``batch``; ``source``: the collector it came from, when rollouts of
        several collectors arrive interleaved (one update at a time: the agent hears it first)."""
        if source is not None:
            self.agent.select_stream(source)
        stats = await self.thread.run(self.agent.learn, batch)
        self.progress.updates += 1
        return stats

    def record(self, rollout: Rollout[np.ndarray], stats: dict[str, float], lag: int) -> None:
        """A rollout learned from, by one update."""
        self.progress.record(rollout.episode_returns, rollout.episode_lengths, rollout.num_steps, stats, lag)

    def broadcast(self, pool: WorkerPool) -> None:
        """The learner's weights to every worker of ``pool``, as a new version; queued behind
        their current call (raises first what an earlier call sent without waiting failed with)."""
        pool.raise_send_error()
        self.progress.version += 1
        pool.broadcast(self.agent.get_weights(), self.progress.version)


class _RemoteLoop(TrainingLoop):
    """A loop whose rollouts or gradients come from a :class:`WorkerPool`."""

    def __init__(self, agent: Agent, thread: UpdateThread, progress: Progress, pool: WorkerPool) -> None:
        super().__init__(agent, thread, progress)
        self.pool = pool


class LocalCollection(TrainingLoop):
    """Collect a rollout in the learner's own process, learn from it, repeat."""

    def __init__(
        self,
        agent: Agent,
        thread: UpdateThread,
        progress: Progress,
        config: CollectorConfig,
        env_fn: Callable[[], Any] | None,
    ) -> None:
        super().__init__(agent, thread, progress)
        self.config = config
        self.env_fn = env_fn
        self.collector: Collector | None = None

    async def start(self) -> None:
        self.collector = Collector(self.config, self.agent, self.env_fn)

    async def run(self) -> None:
        assert self.collector is not None
        while not self.progress.done():
            rollout = self.collector.collect()
            self.record(rollout, await self.learn(rollout), 0)

    async def close(self) -> None:
        if self.collector is not None:
            self.collector.close()


class SyncCollection(_RemoteLoop):
    """A2C: every collector acts with the newest weights; one update on all their rollouts, then
    the new weights to all."""

    async def run(self) -> None:
        while not self.progress.done():
            rollouts = list((await self.pool.call_all("collect")).values())
            if not rollouts:
                continue
            batch = concat_rollouts([r for r, _ in rollouts])
            lag = max(self.progress.version - v for _, v in rollouts)
            self.record(batch, await self.learn(batch), lag)
            self.broadcast(self.pool)


class AsyncCollection(_RemoteLoop):
    """IMPALA: collectors never wait for the learner (:class:`RolloutPumps`; a bounded queue keeps
    memory flat); an update per rollout as it arrives, with the policy lag V-trace corrects, and
    the weights to every collector each ``broadcast_every`` updates."""

    def __init__(
        self,
        agent: Agent,
        thread: UpdateThread,
        progress: Progress,
        pool: WorkerPool,
        pumps: RolloutPumps,
        broadcast_every: int,
    ) -> None:
        super().__init__(agent, thread, progress, pool)
        self.pumps = pumps
        self.broadcast_every = broadcast_every

    async def run(self) -> None:
        self.pumps.start()
        try:
            while not self.progress.done():
                rollout, version, source = await self.pumps.next()
                stats = await self.learn(rollout, source)
                self.record(rollout, stats, self.progress.version - version)
                if self.progress.updates % self.broadcast_every == 0:
                    self.broadcast(self.pool)
        except BaseException:
            await self.pumps.stop(settle=False)
            raise
        await self.pumps.stop()

    def restored(self, replay: UniformReplay | None) -> None:
        self.pumps.carried.clear()  # collected by the policy the checkpoint replaces

    async def close(self) -> None:
        await self.pumps.close()


class _GradientLoop(_RemoteLoop):
    """A loop of gradient workers: each collects its own rollouts and answers with gradients."""

    async def apply(self, grads: list[np.ndarray], statistics: list[Any]) -> None:
        """One optimizer step of the learner's copy on ``grads``, and what the workers' running
        statistics (a normaliser's) took in, which its weights carry back to them; one more version."""
        await self.thread.run(self._apply, self.agent.algorithm.optimizer, grads, statistics)
        self.progress.updates += 1
        self.progress.version += 1

    def _apply(self, optimizer: torch.optim.Optimizer, grads: list[np.ndarray], statistics: list[Any]) -> None:
        """The learner's thread."""
        apply_gradients(optimizer, grads)
        for taken in statistics:
            self.agent.add_statistics(taken)


class SyncGradients(_GradientLoop):
    """Synchronous gradient workers: their gradients averaged, one step of the learner's copy;
    then the new weights to every worker (central update) or, decentralised, the same averaged
    gradients to every worker, which steps its own copy and optimizer."""

    def __init__(
        self, agent: Agent, thread: UpdateThread, progress: Progress, pool: WorkerPool, decentralised: bool
    ) -> None:
        super().__init__(agent, thread, progress, pool)
        self.decentralised = decentralised

    async def run(self) -> None:
        while not self.progress.done():
            answered: dict[int, GradientResult] = await self.pool.call_all("compute_gradients")
            if not answered:
                continue
            good = list(answered.values())
            mean_grads = [np.mean([r.grads[k] for r in good], axis=0) for k in range(len(good[0].grads))]
            await self.apply(mean_grads, [r.statistics for r in good])
            if self.decentralised:
                await self._apply_everywhere(mean_grads, answered)
            else:
                self.progress.version -= 1  # broadcast() counts this version itself
                self.broadcast(self.pool)
            stats = {k: float(np.mean([r.stats[k] for r in good])) for k in good[0].stats}
            lag = max(self.progress.version - 1 - r.version for r in good)
            self.progress.record(
                np.concatenate([r.episode_returns for r in good]),
                np.concatenate([r.episode_lengths for r in good]),
                sum(r.env_steps for r in good),
                stats,
                lag,
            )

    async def _apply_everywhere(self, mean_grads: list[np.ndarray], answered: dict[int, GradientResult]) -> None:
        """The averaged gradients to every worker, with the statistics the others took in; a
        worker that died is replaced (its replacement gets the state with this step in it)."""
        pool, version = self.pool, self.progress.version
        applied = await asyncio.gather(
            *[
                pool.answer(
                    h,
                    h.apply_gradients(mean_grads, version, [r.statistics for j, r in answered.items() if j != i]),
                    "apply_gradients",
                )
                for i, h in enumerate(pool.handles)
            ],
            return_exceptions=True,
        )
        for i, error in enumerate(applied):
            if isinstance(error, actorrt.ActorDiedError):
                await pool.replace(i, error)
            elif isinstance(error, BaseException):
                raise error


class AsyncGradients(_GradientLoop):
    """A3C: each worker's gradients are applied as they come; that worker gets the new weights
    and computes its next gradients on them, while the others work on."""

    async def run(self) -> None:
        pool = self.pool
        pending = {
            asyncio.ensure_future(pool.answer(h, h.compute_gradients(), "compute_gradients")): i
            for i, h in enumerate(pool.handles)
        }
        try:
            while not self.progress.done():
                done, _ = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
                for fut in done:
                    i = pending.pop(fut)
                    try:
                        r: GradientResult = fut.result()
                    except actorrt.ActorDiedError as e:
                        handle = await pool.replace(i, e)
                    else:
                        pool.deaths.answered(i)
                        await self.apply(r.grads, [r.statistics])
                        version = self.progress.version
                        self.progress.record(
                            r.episode_returns, r.episode_lengths, r.env_steps, r.stats, version - 1 - r.version
                        )
                        handle = pool.handles[i]
                        pool.send(handle.set_weights(self.agent.get_weights(), version))
                    pending[
                        asyncio.ensure_future(pool.answer(handle, handle.compute_gradients(), "compute_gradients"))
                    ] = i
                pool.raise_send_error()  # a weight send that failed (other than a death)
        finally:
            for fut in pending:
                fut.cancel()
