"""One ``Learner``, configured by where each operation runs (after Nappo's schemes).

- **collection**: ``local`` (in the learner's process) or ``remote`` (``num_collectors`` actors);
  ``sync`` (wait for every collector, then update) or ``async`` (take rollouts as they arrive
  while collectors run ahead with the weights they have: needs off-policy correction).
- **gradients**: ``central`` (the learner computes them) or ``remote`` (``num_gradient_workers``
  actors that collect their own rollouts and return gradients); ``sync`` (average all, one step)
  or ``async`` (apply each as it arrives: A3C).
- **update**: ``central`` (the learner's optimizer steps and weights are broadcast) or
  ``decentralised`` (every gradient worker applies the same averaged gradients itself).

- **replay**: ``none`` (learn from each rollout once), ``learner`` (DDPG, TD3, SAC: rollouts go
  into the learner's replay, and the learner takes ``updates_per_step`` updates per env step
  received, on sampled batches, broadcasting weights every ``broadcast_every`` updates) or
  ``actor`` (the same, with the replay in a :class:`rl.learners.workers.ReplayActor` that remote
  collectors add to directly and the learner samples from, as in Ape-X).

A2C, IMPALA and off-policy learning are presets (:func:`a2c_scheme`, :func:`impala_scheme`,
:func:`off_policy_scheme`: :mod:`rl.learners.scheme`). Components that do not fit together
fail at construction with an error that says why. Each way of training is a loop of its own
(:mod:`rl.learners.loops`, :mod:`rl.learners.off_policy`); the learner is their coordinator: it
starts and stops the workers (:class:`rl.learners.pool.WorkerPool`) and gives them its state,
runs the loop its scheme names, and saves and restores checkpoints. Everything runs on the
caller's event loop; updates run in a worker thread so the loop keeps receiving rollouts meanwhile.
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Callable
from dataclasses import replace
from typing import Any, Literal

import torch

import actorrt
from rl.agent import Agent, save_checkpoint
from rl.collector import CollectorConfig
from rl.learners.loops import (
    AsyncCollection,
    AsyncGradients,
    LocalCollection,
    SyncCollection,
    SyncGradients,
    TrainingLoop,
    UpdateThread,
)
from rl.learners.off_policy import ReplayLearning
from rl.learners.pool import RolloutPumps, WorkerPool
from rl.learners.progress import LearnerResult, Progress
from rl.learners.scheme import Scheme, SchemeError
from rl.learners.workers import GradientWorker, RemoteCollector
from rl.logger import TrainingLogger
from rl.metrics import LearnerMetrics
from rl.replay import UniformReplay

__all__ = ["Learner"]


class Learner:
    """``async with Learner(make_agent, CollectorConfig(...), impala_scheme(4)) as learner:
    result = await learner.train(200_000, solved_return=475)``.

    ``make_agent`` builds a fresh :class:`rl.Agent`; it runs here for the learner's copy and in
    every remote worker's process for theirs, so it must be picklable (a module-level function).
    ``env_fn`` (picklable too) builds one environment when ``gym.make(config.env_id)`` is not
    enough (wrappers, e.g. :class:`rl.atari.AtariEnv`). An off-policy scheme stores what the
    collectors send in ``replay`` (or a replay actor started from it), samples ``batch_size``
    transitions per update, and takes none before ``learning_starts`` env steps (the collectors
    act uniformly at random until then).
    """

    def __init__(
        self,
        make_agent: Callable[[], Agent],
        collector_config: CollectorConfig,
        scheme: Scheme,
        *,
        logger: TrainingLogger | None = None,
        metrics: LearnerMetrics | None = None,
        window: int = 20,
        env_fn: Callable[[], Any] | None = None,
        replay: UniformReplay | None = None,
        batch_size: int = 256,
        learning_starts: int = 1000,
    ) -> None:
        self.make_agent = make_agent
        self.env_fn = env_fn
        self.config = collector_config
        self.scheme = scheme
        self.agent = make_agent()
        scheme.check(self.agent.algorithm)
        if scheme.replay != "none" and replay is None:
            raise SchemeError(
                f"replay={scheme.replay!r} needs a replay storage: Learner(..., replay=rl.UniformReplay(...))"
            )
        self.logger = logger
        self.metrics = metrics
        self.window = window
        self.batch_size = batch_size
        self.learning_starts = learning_starts
        """Env steps of uniformly random actions (in every collector) before the first update."""
        self.progress = Progress(window, logger, metrics)
        self._thread = UpdateThread()
        self._pool = self._make_pool()
        self._loop = self._make_loop(replay)
        self._phase: Literal["new", "started", "closed"] = "new"
        self._training = False

    def _make_pool(self) -> WorkerPool | None:
        """The remote workers the scheme names (none for local collection); started by :meth:`start`."""
        s = self.scheme
        cls: Any
        if s.gradients == "remote":
            cls, n = GradientWorker, s.num_gradient_workers
        elif s.collection == "remote":
            cls, n = RemoteCollector, s.num_collectors
        else:
            return None
        configs = [replace(self.config, seed=self.config.seed + 10_000 * (i + 1)) for i in range(n)]
        return WorkerPool(
            cls,
            configs,
            self.make_agent,
            self.env_fn,
            s.worker_timeout_s,
            self.logger,
            self.metrics,
            set_up=self._set_up_replacement,
        )

    def _make_loop(self, replay: UniformReplay | None) -> TrainingLoop:
        """The training loop the scheme names."""
        s, pool = self.scheme, self._pool
        agent, thread, progress = self.agent, self._thread, self.progress
        pumps = None
        if pool is not None and s.collection_mode == "async":
            pumps = RolloutPumps(pool, s.rollouts_in_flight, s.max_queued_rollouts)
        if replay is not None and s.replay != "none":
            return ReplayLearning(
                agent,
                thread,
                progress,
                replay,
                updates_per_step=s.updates_per_step,
                batch_size=self.batch_size,
                learning_starts=self.learning_starts,
                broadcast_every=s.broadcast_every,
                in_actor=s.replay == "actor",
                pool=pool,
                pumps=pumps,
                config=self.config,
                env_fn=self.env_fn,
            )
        if pool is None:
            return LocalCollection(agent, thread, progress, self.config, self.env_fn)
        if s.gradients == "remote":
            if s.gradient_mode == "async":
                return AsyncGradients(agent, thread, progress, pool)
            return SyncGradients(agent, thread, progress, pool, s.update == "decentralised")
        if pumps is not None:
            return AsyncCollection(agent, thread, progress, pool, pumps, s.broadcast_every)
        return SyncCollection(agent, thread, progress, pool)

    # ---- what a checkpoint and the caller see -------------------------------------------------

    @property
    def env_steps(self) -> int:
        return self.progress.env_steps

    @property
    def updates(self) -> int:
        return self.progress.updates

    @property
    def version(self) -> int:
        """The version of the learner's weights (see :attr:`rl.learners.progress.Progress.version`)."""
        return self.progress.version

    @property
    def replaced(self) -> int:
        """Workers replaced since the learner started."""
        return 0 if self._pool is None else self._pool.replaced

    @property
    def mean_return(self) -> float:
        return self.progress.returns.mean

    @property
    def replay(self) -> UniformReplay | None:
        """Where an off-policy scheme stores what collectors send (``None`` otherwise). With a
        replay actor, the storage it started from (the actor holds the live one)."""
        return self._loop.replay

    @property
    def replay_actor(self) -> Any:
        """The :class:`rl.learners.workers.ReplayActor`'s handle while one runs (``scheme.replay == "actor"``)."""
        return self._loop.replay_actor

    # ---- lifecycle ----------------------------------------------------------------------------

    async def start(self) -> Learner:
        """Start the remote workers (and the replay actor); if any of them cannot start, stop
        those that did and raise. A Learner starts once."""
        if self._phase != "new":
            raise RuntimeError(f"this Learner was {self._phase} already: a Learner starts once")
        self._phase = "started"
        try:
            self._thread.start()
            await self._loop.start()
            if self._pool is not None:
                await self._pool.start()
                await self._push_to_workers()
        except BaseException:
            await self.close()
            raise
        return self

    def _state_for_workers(self) -> Any:
        """What every worker must hold of the learner's copy: its weights or, with a decentralised
        update, its optimizer too (each worker steps its own copy, whose moments must be the learner's)."""
        if self.scheme.update == "decentralised":
            return copy.deepcopy(self.agent.algorithm.state_dict())
        return self.agent.get_weights()

    async def _give_state(self, pool: WorkerPool, handle: Any, state: Any, fresh: bool) -> None:
        """``state`` (:meth:`_state_for_workers`) and what the loop needs to a worker."""
        version = self.progress.version
        if self.scheme.update == "decentralised":
            await pool.answer(handle, handle.set_state(state, version), "set_state", deadline=not fresh)
        else:
            await pool.answer(handle, handle.set_weights(state, version), "set_weights", deadline=not fresh)
        await self._loop.set_up_worker(pool, handle, fresh)

    async def _set_up_replacement(self, handle: Any) -> None:
        """A worker started in a dead one's place gets what the others hold."""
        assert self._pool is not None
        # Read in the learner's thread: an update may be running there (this runs in a pump task).
        state = await self._thread.run(self._state_for_workers)
        await self._give_state(self._pool, handle, state, fresh=True)

    async def _push_to_workers(self) -> None:
        """Give every worker the learner's state. A worker found dead is replaced."""
        pool = self._pool
        assert pool is not None
        state = self._state_for_workers()
        results = await asyncio.gather(
            *[self._give_state(pool, h, state, fresh=False) for h in pool.handles], return_exceptions=True
        )
        for i, result in enumerate(results):
            if isinstance(result, BaseException):
                if not isinstance(result, actorrt.ActorDiedError):
                    raise result
                await pool.replace(i, result)  # the replacement is given all of the above
        pool.needs_set_up = False

    async def close(self) -> None:
        """Stop every worker and the replay actor (their slots are free when it returns)."""
        self._phase = "closed"
        await self._loop.close()
        if self._pool is not None:
            await self._pool.close()
        self._thread.close()

    async def __aenter__(self) -> Learner:
        return await self.start()

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    # ---- checkpoints ----------------------------------------------------------------------------

    async def save(self, path: str, replay: bool = True) -> None:
        """Models, optimizers, counters and, for an off-policy scheme unless ``replay=False``, the
        replay (from the replay actor when one holds it): :meth:`restore` resumes the run. The
        file is replaced whole or not at all (:func:`rl.agent.save_checkpoint`)."""
        if replay and self._phase == "closed" and self.scheme.replay == "actor":
            raise RuntimeError(
                "save() after close() with replay='actor': the replay lived in the replay actor, which "
                "close() stopped; save inside `async with Learner(...)`, or save(path, replay=False)"
            )
        held = None
        if replay and self.replay_actor is not None:
            held = await actorrt.get_attr(self.replay_actor, "replay")
        elif replay:
            held = self.replay

        def write() -> None:
            """In the learner's thread, where updates run: never beside one (a checkpoint saved
            while ``train`` runs holds weights, optimizers and replay from between two updates;
            its counters may not yet count the rollout of the last)."""
            state: dict[str, Any] = {
                "algorithm": self.agent.algorithm.state_dict(),
                "env_steps": self.progress.env_steps,
                "updates": self.progress.updates,
                "version": self.progress.version,
            }
            if held is not None:
                state["replay"] = held
            save_checkpoint(state, path)  # whole or not at all

        if self._thread.running:
            await self._thread.run(write)
        else:  # not started, or closed: no update can be running
            write()

    def restore(self, path: str) -> None:
        """Load what :meth:`save` wrote, before :meth:`start` or between :meth:`train` calls (the
        workers are given the restored weights, optimizer state for a decentralised update, and
        warm-up when the next ``train`` starts). A checkpoint without the replay (``save(..., replay=False)``) resumes
        with an empty one (the learner's replay is emptied), and the first ``learning_starts``
        env steps after it only refill it (acting with the restored policy): no update is taken
        on a replay of a few rollouts."""
        if self._training:
            raise RuntimeError("restore() while train() runs: restore before start(), or between train() calls")
        state = torch.load(path, weights_only=False)
        saved = state.get("replay")
        if saved is not None:
            if self.replay is None:
                raise ValueError(f"{path} holds a replay, but this learner's scheme has none")
            if type(saved) is not type(self.replay) or saved.capacity != self.replay.capacity:
                raise ValueError(
                    f"{path} holds a {type(saved).__name__} of capacity {saved.capacity}; this learner has a "
                    f"{type(self.replay).__name__} of capacity {self.replay.capacity}"
                )
        if self.replay_actor is not None:
            raise RuntimeError(
                "restore before start() with replay='actor': the replay actor is running and holds the replay"
            )
        self.agent.algorithm.load_state_dict(state["algorithm"])
        self.progress.restore(state["env_steps"], state["updates"], state["version"])
        self._loop.restored(saved)
        if self._pool is not None:
            self._pool.needs_set_up = True  # the workers get what was restored when train() next starts

    # ---- training -----------------------------------------------------------------------------

    async def train(
        self,
        total_steps: int,
        solved_return: float | None = None,
        stop_when_solved: bool = True,
    ) -> LearnerResult:
        """Train until ``total_steps`` env steps or, with ``stop_when_solved``, until solved."""
        if total_steps < 1:
            raise ValueError(f"total_steps must be >= 1, got {total_steps}")
        if self._phase != "started":
            raise RuntimeError(
                "this Learner is closed"
                if self._phase == "closed"
                else "start the Learner first: `async with Learner(...) as learner:` or `await learner.start()`"
            )
        if self._training:
            raise RuntimeError("train() is already running on this Learner")
        self._training = True
        try:
            if self._pool is not None:
                await self._pool.settle_respawns()  # a cancelled train() may have left some going
                if self._pool.needs_set_up:  # restored since start(), or a set-up cut short
                    await self._push_to_workers()
            self.progress.begin(total_steps, solved_return if stop_when_solved else None)
            await self._loop.run()
            return self.progress.result(solved_return, self.replaced)
        finally:
            self._training = False
