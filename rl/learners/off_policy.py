"""DDPG, TD3 and SAC on a :class:`rl.learners.Learner`: collectors feed a replay, and the learner
takes the updates each rollout is owed on batches sampled from it (:class:`ReplayLearning`)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import numpy as np

import actorrt
from rl.agent import Agent
from rl.algorithms._off_policy import OffPolicyAlgorithm
from rl.bookkeeping import BetaAnnealing, UpdateRatio, learn_from_replay
from rl.collector import Collector, CollectorConfig
from rl.learners.loops import TrainingLoop, UpdateThread
from rl.learners.pool import RolloutPumps, WorkerPool
from rl.learners.progress import Progress
from rl.learners.workers import Fed, ReplayActor, ReplayLostError
from rl.replay import PrioritizedReplay, ReplayBatch, UniformReplay
from rl.storage import Rollout

__all__ = ["ReplayLearning"]


class ReplayLearning(TrainingLoop):
    """DDPG / TD3 / SAC: rollouts, from a collector in the learner's process or from remote ones
    (synchronous, or asynchronous: ``pumps``), go into a replay, and each is owed updates at
    ``updates_per_step`` per env step (none before ``learning_starts``), taken on sampled
    batches; the TD errors set a prioritised replay's priorities, and its ``beta`` is annealed
    to 1 at the run's end (as in :func:`rl.train_off_policy`).

    The replay is the learner's (``replay``; the rollouts pass through the learner) or, with
    ``in_actor``, a :class:`rl.learners.workers.ReplayActor` started from it, which the collectors
    feed directly and the learner samples from (Ape-X). Remote collectors act uniformly at random
    until ``learning_starts`` (the warm-up), and get new weights once at least ``broadcast_every``
    updates were taken since they last did.
    """

    replay: UniformReplay

    def __init__(
        self,
        agent: Agent,
        thread: UpdateThread,
        progress: Progress,
        replay: UniformReplay,
        *,
        updates_per_step: float,
        batch_size: int,
        learning_starts: int,
        broadcast_every: int,
        in_actor: bool,
        pool: WorkerPool | None = None,
        pumps: RolloutPumps | None = None,
        config: CollectorConfig | None = None,
        env_fn: Callable[[], Any] | None = None,
    ) -> None:
        super().__init__(agent, thread, progress)
        self.replay = replay
        self.in_actor = in_actor
        self.batch_size = batch_size
        self.learning_starts = learning_starts
        self.broadcast_every = broadcast_every
        self.pool = pool
        """The remote collectors (``None``: a collector in the learner's process, built from ``config``)."""
        self.pumps = pumps
        """With remote collectors, when they run ahead of the learner (asynchronous collection)."""
        self.config = config
        self.env_fn = env_fn
        self.local: Collector | None = None
        self.ratio = UpdateRatio(updates_per_step)
        self.beta = BetaAnnealing(replay)
        self.first_update_at = learning_starts
        """No update before this many env steps: ``learning_starts``, or after a restore without
        the replay, ``learning_starts`` more."""
        self.updates_at_broadcast = 0
        self.warmup = learning_starts > 0
        """Whether the remote collectors act uniformly at random (until ``learning_starts``)."""
        self._priorities: Any = None
        """The last priority update sent to the replay actor (its error surfaces before the next)."""

    @property
    def algorithm(self) -> OffPolicyAlgorithm:
        algorithm = self.agent.algorithm
        assert isinstance(algorithm, OffPolicyAlgorithm)
        return algorithm

    async def start(self) -> None:
        # A restored run past learning_starts does not warm up again.
        self.warmup = self.progress.env_steps < self.learning_starts
        if self.pool is None:
            assert self.config is not None
            self.local = Collector(self.config, self.agent, self.env_fn)
        if self.in_actor:
            self.replay_actor = await ReplayActor.remote(self.replay)

    async def set_up_worker(self, pool: WorkerPool, handle: Any, fresh: bool) -> None:
        """Whether to act uniformly at random (the warm-up; a fresh worker acts by its policy
        already), and the replay actor to feed."""
        uniform, deadline = self.warmup, not fresh
        if uniform or not fresh:
            await pool.answer(handle, handle.set_uniform_exploration(uniform), "set_uniform_exploration", deadline)
        if self.replay_actor is not None:
            await pool.answer(handle, handle.feed(self.replay_actor), "feed", deadline)
        if uniform and not self.warmup:  # the warm-up ended meanwhile: its end went to the others
            await pool.answer(handle, handle.set_uniform_exploration(False), "set_uniform_exploration", deadline)

    def restored(self, replay: UniformReplay | None) -> None:
        """Take the checkpoint's replay; without one, empty this one and let the first
        ``learning_starts`` env steps only refill it (acting with the restored policy)."""
        if self.pumps is not None:
            self.pumps.carried.clear()  # collected by the policy the checkpoint replaces
        self.updates_at_broadcast, self.ratio.due = self.progress.updates, 0.0
        if replay is not None:
            self.replay = replay
            self.first_update_at = self.learning_starts
        else:
            self.replay.clear()
            self.first_update_at = self.progress.env_steps + self.learning_starts
        self.warmup = self.progress.env_steps < self.learning_starts

    async def run(self) -> None:
        progress = self.progress
        if self.local is not None:
            algorithm = self.algorithm
            while not progress.done():
                algorithm.uniform_exploration = progress.env_steps < self.learning_starts
                await self._step(self.local.collect(), 0)
            algorithm.uniform_exploration = False
            return
        assert self.pool is not None
        if self.pumps is None:
            while not progress.done():
                for rollout, version in (await self.pool.call_all("collect")).values():
                    await self._step(rollout, progress.version - version)
        else:
            self.pumps.start()
            try:
                while not progress.done():
                    rollout, version, _ = await self.pumps.next()
                    await self._step(rollout, progress.version - version)
            except BaseException:
                await self.pumps.stop(settle=False)
                raise
            await self.pumps.stop()
        await self._priorities_sent()

    async def _step(self, rollout: Rollout[np.ndarray] | Fed, lag: int) -> None:
        """Ingest one rollout (or a collector's report that the replay actor holds it), take the
        updates it is owed, record it, end the warm-up, and broadcast the weights once at least
        ``broadcast_every`` updates were taken since the last broadcast (checked after each
        rollout: a rollout owed many updates gives one broadcast, not one per update)."""
        if self.replay_actor is not None and not isinstance(rollout, Fed):
            raise RuntimeError(
                "a collector sent its rollout to the learner while a replay actor holds the replay "
                "(it was never given the replay actor to feed)"
            )
        progress = self.progress
        owed = (
            0 if progress.env_steps + rollout.num_steps < self.first_update_at else self.ratio.owed(rollout.num_steps)
        )
        if isinstance(rollout, Fed):
            stats = await self._from_replay_actor(owed)
        else:
            stats = await self.thread.run(self._ingest, rollout, owed, progress.fraction)
        progress.updates += owed
        progress.record(rollout.episode_returns, rollout.episode_lengths, rollout.num_steps, stats, lag, owed)
        if self.warmup and progress.env_steps >= self.learning_starts:
            self.warmup = False
            if self.pool is not None:
                for handle in self.pool.handles:  # queued before their next collect
                    self.pool.send(handle.set_uniform_exploration(False))
        if self.pool is not None and progress.updates - self.updates_at_broadcast >= self.broadcast_every:
            self.updates_at_broadcast = progress.updates
            self.broadcast(self.pool)

    def _ingest(self, rollout: Rollout[np.ndarray], owed: int, fraction: float) -> dict[str, float]:
        """Store a rollout, then take the updates it is owed (in the learner's thread: the replay
        is only ever touched there)."""
        self.replay.add_rollout(rollout)
        self.beta.anneal(self.replay, fraction)
        return learn_from_replay(self.agent, self.replay, self.batch_size, owed)

    def _learn_batches(self, batches: ReplayBatch[np.ndarray], owed: int) -> tuple[dict[str, float], np.ndarray]:
        """``owed`` updates on consecutive ``batch_size`` slices of what the replay actor sent;
        the stats of the last and every TD error (for the priorities), in the learner's thread."""
        algorithm = self.algorithm
        stats: dict[str, float] = {}
        td_errors = []
        for k in range(owed):
            part = slice(k * self.batch_size, (k + 1) * self.batch_size)
            stats = self.agent.learn(ReplayBatch(*(column[part] for column in batches)))
            td_errors.append(algorithm.td_errors)
        return stats, np.concatenate(td_errors)

    async def _from_replay_actor(self, owed: int) -> dict[str, float]:
        """Take ``owed`` updates on batches sampled from the replay actor (one call for all of
        them), then send the TD errors back for the priorities (of a prioritised replay)."""
        if owed == 0:
            return {}
        await self._priorities_sent()  # ordered before the sample anyway; its error must not vanish
        try:
            batches, stamps = await self.replay_actor.sample(
                self.batch_size, owed, self.beta.at(self.progress.fraction)
            )
        except actorrt.ActorDiedError as e:
            raise ReplayLostError(f"the replay actor died: {e}") from None
        stats, td_errors = await self.thread.run(self._learn_batches, batches, owed)
        if isinstance(self.replay, PrioritizedReplay):  # the actor holds a replay of the same kind
            self._priorities = self.replay_actor.update_priorities(batches.indices, td_errors, stamps)
        return stats

    async def _priorities_sent(self) -> None:
        """Wait for the last priority update sent to the replay actor (raise what it failed with)."""
        pending, self._priorities = self._priorities, None
        if pending is None:
            return
        try:
            await pending
        except actorrt.ActorDiedError as e:
            raise ReplayLostError(f"the replay actor died: {e}") from None

    async def close(self) -> None:
        """Stop the pumps, the replay actor and the local collector."""
        if self.pumps is not None:
            await self.pumps.close()
        if self._priorities is not None:  # a failure there is the run's error already, or moot now
            await asyncio.gather(self._priorities, return_exceptions=True)
            self._priorities = None
        if self.replay_actor is not None:
            await asyncio.gather(actorrt.kill(self.replay_actor), return_exceptions=True)
            self.replay_actor = None
        if self.local is not None:
            self.local.close()
