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
:func:`off_policy_scheme`). Components that do not
fit together fail at construction with an error that says why. Everything runs on the caller's
event loop; updates run in a worker thread so the loop keeps receiving rollouts meanwhile.
"""

from __future__ import annotations

import asyncio
import copy
import logging
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Any, Literal, TypeVar

import numpy as np
import torch

import actorrt
from rl.agent import Agent, save_checkpoint
from rl.algorithms import DQN, IMPALA, PPO
from rl.algorithms._off_policy import OffPolicyAlgorithm
from rl.collector import Collector, CollectorConfig
from rl.learners.workers import (
    Deaths,
    Fed,
    GradientResult,
    GradientWorker,
    RemoteCollector,
    ReplayActor,
    ReplayLostError,
    answer_within,
    apply_gradients,
    concat_rollouts,
)
from rl.logger import TrainingLogger
from rl.metrics import LearnerMetrics
from rl.replay import PrioritizedReplay, ReplayBatch, UniformReplay
from rl.storage import Rollout
from rl.trainer import linear_schedule

__all__ = [
    "Learner",
    "LearnerResult",
    "Scheme",
    "SchemeError",
    "a2c_scheme",
    "impala_scheme",
    "off_policy_scheme",
]

Pumped = tuple[Rollout[np.ndarray], int, str]
"""A rollout from a pump: with the version of the weights it was collected with and the actor id
of the collector it came from."""

log = logging.getLogger("rl.learner")
SETTLE_S = 60.0  # how long train() waits, when it ends, for the collect calls it had queued
T = TypeVar("T")


class SchemeError(ValueError):
    """The scheme's parts do not fit together (or not with this algorithm)."""


@dataclass(frozen=True)
class Scheme:
    """Where each operation of training runs. Checked against the algorithm by :meth:`check`."""

    collection: Literal["local", "remote"] = "remote"
    num_collectors: int = 2
    collection_mode: Literal["sync", "async"] = "sync"
    gradients: Literal["central", "remote"] = "central"
    num_gradient_workers: int = 2
    gradient_mode: Literal["sync", "async"] = "sync"
    update: Literal["central", "decentralised"] = "central"
    broadcast_every: int = 1
    """Updates between weight broadcasts to asynchronous collectors (IMPALA's K)."""
    rollouts_in_flight: int = 2
    """Collect calls kept queued on each asynchronous collector, so it never waits for us."""
    max_queued_rollouts: int = 8
    """Rollouts waiting for the learner at most; collectors pause beyond it (memory stays flat)."""
    replay: Literal["none", "learner", "actor"] = "none"
    """``learner``: rollouts feed the learner's replay, updates sample from it (DDPG, TD3, SAC);
    ``actor``: the replay is an actor of its own, which remote collectors feed directly."""
    updates_per_step: float = 1.0
    """With a replay: updates per env step received (the update-to-data ratio)."""
    worker_timeout_s: float | None = 300.0
    """Seconds a worker may take to answer one call (a rollout, a gradient, a weight push); one
    that takes longer is hung (alive but stuck, e.g. in an environment's ``step``): it is killed
    and replaced like a dead one. None: no deadline."""

    def check(self, algorithm: Any) -> None:
        """Raise :class:`SchemeError` naming what does not fit."""
        name = type(algorithm).__name__
        if self.collection not in ("local", "remote"):
            raise SchemeError(f"collection must be 'local' or 'remote', not {self.collection!r}")
        if self.gradients not in ("central", "remote"):
            raise SchemeError(f"gradients must be 'central' or 'remote', not {self.gradients!r}")
        if self.update not in ("central", "decentralised"):
            raise SchemeError(f"update must be 'central' or 'decentralised', not {self.update!r}")
        if isinstance(algorithm, DQN):
            raise SchemeError("DQN learns from a replay buffer: use rl.train_dqn, not a rollout Learner")
        off_policy = isinstance(algorithm, OffPolicyAlgorithm)
        if self.replay not in ("none", "learner", "actor"):
            raise SchemeError(f"replay must be 'none', 'learner' or 'actor', not {self.replay!r}")
        if off_policy and self.replay == "none":
            raise SchemeError(f"{name} learns from a replay: set replay='learner' or 'actor' (see off_policy_scheme)")
        if self.replay != "none":
            if not off_policy:
                raise SchemeError(f"replay={self.replay!r} needs an off-policy algorithm (DDPG, TD3, SAC), not {name}")
            if self.replay == "actor" and self.collection != "remote":
                raise SchemeError("a replay actor is fed by remote collectors: set collection='remote'")
            if self.gradients != "central":
                raise SchemeError("with a replay the learner computes the gradients: set gradients='central'")
            if self.updates_per_step <= 0:
                raise SchemeError("updates_per_step must be > 0")
        if self.collection == "remote" and self.gradients == "central" and self.num_collectors < 1:
            raise SchemeError("remote collection needs num_collectors >= 1")
        if self.collection_mode == "async" and not isinstance(algorithm, (IMPALA, OffPolicyAlgorithm)):
            raise SchemeError(
                f"asynchronous collection feeds the learner rollouts from older policies; {name} has no "
                "off-policy correction (IMPALA's V-trace has; DDPG, TD3 and SAC learn from a replay): "
                "use collection_mode='sync'"
            )
        if self.collection_mode == "async" and self.collection == "local":
            raise SchemeError("asynchronous collection needs remote collectors (collection='remote')")
        if self.gradients == "remote":
            if self.num_gradient_workers < 1:
                raise SchemeError("remote gradients need num_gradient_workers >= 1")
            if self.collection == "remote" and self.collection_mode == "async":
                raise SchemeError("gradient workers collect their own rollouts: drop asynchronous collectors")
            if isinstance(algorithm, PPO):
                raise SchemeError(
                    "PPO takes many optimizer steps per rollout; remote gradient workers need an algorithm "
                    "with one step per rollout (A2C, PolicyGradient, IMPALA)"
                )
        if self.update == "decentralised":
            if self.gradients != "remote":
                raise SchemeError("a decentralised update happens in the gradient workers: set gradients='remote'")
            if self.gradient_mode != "sync":
                raise SchemeError(
                    "a decentralised update needs synchronous gradients: with async ones the workers' "
                    "weights would drift apart"
                )
        if self.broadcast_every < 1 or self.rollouts_in_flight < 1 or self.max_queued_rollouts < 1:
            raise SchemeError("broadcast_every, rollouts_in_flight and max_queued_rollouts must be >= 1")
        if self.worker_timeout_s is not None and not self.worker_timeout_s > 0:
            raise SchemeError(
                f"worker_timeout_s must be > 0 seconds (or None: no deadline), not {self.worker_timeout_s}"
            )


def a2c_scheme(num_collectors: int = 2) -> Scheme:
    """Synchronous A2C: broadcast weights, gather every collector's rollout, one update, repeat."""
    return Scheme(collection="remote", num_collectors=num_collectors, collection_mode="sync")


def impala_scheme(num_collectors: int = 2, broadcast_every: int = 1) -> Scheme:
    """IMPALA: collectors run ahead; the learner corrects with V-trace and broadcasts every K updates."""
    return Scheme(
        collection="remote", num_collectors=num_collectors, collection_mode="async", broadcast_every=broadcast_every
    )


def off_policy_scheme(
    num_collectors: int = 2,
    updates_per_step: float = 1.0,
    broadcast_every: int = 1,
    replay: Literal["learner", "actor"] = "learner",
) -> Scheme:
    """DDPG, TD3, SAC: collectors run ahead and feed the learner's replay; the learner keeps
    ``updates_per_step`` updates per env step received and broadcasts weights every K updates.
    ``num_collectors=0``: collect in the learner's own process instead. ``replay="actor"``: the
    replay lives in an actor of its own, which the collectors feed directly."""
    if num_collectors == 0:
        return Scheme(collection="local", replay=replay, updates_per_step=updates_per_step)
    return Scheme(
        collection="remote",
        num_collectors=num_collectors,
        collection_mode="async",
        replay=replay,
        updates_per_step=updates_per_step,
        broadcast_every=broadcast_every,
    )


@dataclass
class LearnerResult:
    solved: bool
    env_steps: int
    wall_s: float
    mean_return: float
    episodes: int
    updates: int
    frames_per_s: float
    mean_weight_lag: float
    replaced_workers: int

    def json_fields(self) -> dict[str, Any]:
        return {
            "solved": self.solved,
            "env_steps": self.env_steps,
            "wall_s": round(self.wall_s, 3),
            "mean_return": None if np.isnan(self.mean_return) else round(self.mean_return, 2),
            "frames_per_s": round(self.frames_per_s, 1),
            "updates": self.updates,
            "mean_weight_lag": round(self.mean_weight_lag, 2),
            "replaced_workers": self.replaced_workers,
        }


@dataclass
class _Pool:
    """Remote workers of one kind, replaced when one dies."""

    cls: Any
    configs: list[CollectorConfig]
    handles: list[Any] = field(default_factory=list)
    generation: int = 0
    deaths: Deaths = field(init=False)

    def __post_init__(self) -> None:
        self.deaths = Deaths(self.cls.__name__, len(self.configs))


class Learner:
    """``async with Learner(make_agent, CollectorConfig(...), impala_scheme(4)) as learner:
    result = await learner.train(200_000, solved_return=475)``.

    ``make_agent`` builds a fresh :class:`rl.Agent`; it runs here for the learner's copy and in
    every remote worker's process for theirs, so it must be picklable (a module-level function).
    ``env_fn`` (picklable too) builds one environment when ``gym.make(config.env_id)`` is not
    enough (wrappers, e.g. :class:`rl.atari.AtariEnv`).
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
        self.logger = logger
        self.metrics = metrics
        self.window = window
        self.env_steps = 0
        self.updates = 0
        self.version = 0
        self.replaced = 0
        self._recent: deque[float] = deque(maxlen=window)
        self._episodes = 0
        self._lags: list[int] = []
        self._local: Collector | None = None
        self._pool: _Pool | None = None
        self._tasks: list[asyncio.Task[None]] = []
        # Rollouts the collectors delivered after the last train() reached its step count: the
        # next one learns from them first (a run trained in many short calls loses none).
        self._carried: deque[Pumped] = deque()
        self._draining = False  # the pumps finish the collect calls they queued, and start none
        self._timings: set[asyncio.Future[None]] = set()
        """Broadcast timings in flight: the loop keeps only weak references to tasks."""
        self._started = 0.0
        self._executor: ThreadPoolExecutor | None = None
        self._phase: Literal["new", "started", "closed"] = "new"
        self._training = False
        self._start_steps = 0
        self._pushed = True
        """Whether the workers hold the learner's state (:meth:`restore` after :meth:`start` clears it)."""
        self._respawns: set[asyncio.Future[Any]] = set()
        """Replacements being set up: a pump stopped meanwhile does not cut them short."""
        self._send_error: BaseException | None = None
        """What a call sent without awaiting it (:meth:`_send`) failed with, other than a death."""
        if scheme.replay != "none" and replay is None:
            raise SchemeError(
                f"replay={scheme.replay!r} needs a replay storage: Learner(..., replay=rl.UniformReplay(...))"
            )
        self.replay = replay
        """Where an off-policy scheme stores what collectors send (``None`` otherwise). With a
        replay actor, the storage it started from (the actor holds the live one)."""
        self.replay_actor: Any = None
        """The :class:`ReplayActor`'s handle while one runs (``scheme.replay == "actor"``)."""
        self._priorities: Any = None
        """The last priority update sent to the replay actor (its error surfaces before the next)."""
        self._beta_start = replay.beta if isinstance(replay, PrioritizedReplay) else None
        """Prioritised replay's importance-sampling exponent at the start (annealed to 1, as in
        :func:`rl.train_off_policy`)."""
        self._total_steps = 0
        self.batch_size = batch_size
        self.learning_starts = learning_starts
        """Env steps of uniformly random actions (in every collector) before the first update."""
        self._updates_due = 0.0
        self._updates_at_broadcast = 0
        self._warmup = scheme.replay != "none" and learning_starts > 0
        self._first_update_at = learning_starts
        """No update before this many env steps: ``learning_starts``, or after a restore without
        the replay, ``learning_starts`` more."""

    # ---- lifecycle ----------------------------------------------------------------------------

    async def start(self) -> Learner:
        """Start the remote workers (and the replay actor); if any of them cannot start, stop
        those that did and raise. A Learner starts once."""
        if self._phase != "new":
            raise RuntimeError(f"this Learner was {self._phase} already: a Learner starts once")
        self._phase = "started"
        try:
            return await self._start()
        except BaseException:
            await self.close()
            raise

    async def _start(self) -> Learner:
        self._executor = ThreadPoolExecutor(1, thread_name_prefix="rl-learner")
        # A restored run past learning_starts does not warm up again.
        self._warmup = self.scheme.replay != "none" and self.env_steps < self.learning_starts
        s = self.scheme
        if s.gradients == "remote":
            self._pool = self._make_pool(GradientWorker, s.num_gradient_workers)
        elif s.collection == "remote":
            self._pool = self._make_pool(RemoteCollector, s.num_collectors)
        else:
            self._local = Collector(self.config, self.agent, self.env_fn)
        if self._pool is not None:
            built = await asyncio.gather(
                *[self._pool.cls.remote(c, self.make_agent, self.env_fn) for c in self._pool.configs],
                return_exceptions=True,
            )
            self._pool.handles = [h for h in built if not isinstance(h, BaseException)]  # close() stops them
            for failed in built:
                if isinstance(failed, BaseException):
                    raise failed
            await self._push_to_workers()
            if s.replay == "actor":
                self.replay_actor = await ReplayActor.remote(self.replay)
                await asyncio.gather(*[h.feed(self.replay_actor) for h in self._pool.handles])
        return self

    async def _push_to_workers(self) -> None:
        """Give every worker the learner's state: its weights (with a decentralised update, its
        optimizer too: each worker steps its own copy, whose moments must be the learner's), for
        off-policy collectors whether to act uniformly at random (the warm-up), and the replay
        actor to feed. A worker found dead is replaced."""
        pool = self._pool
        assert pool is not None
        if self.scheme.update == "decentralised":
            state = copy.deepcopy(self.agent.algorithm.state_dict())
        else:
            weights = self.agent.get_weights()

        async def push(handle: Any) -> None:
            if self.scheme.update == "decentralised":
                await self._answer(handle, handle.set_state(state, self.version), "set_state")
            else:
                await self._answer(handle, handle.set_weights(weights, self.version), "set_weights")
            if self.scheme.replay != "none":
                await self._answer(handle, handle.set_uniform_exploration(self._warmup), "set_uniform_exploration")
            if self.replay_actor is not None:
                await self._answer(handle, handle.feed(self.replay_actor), "feed")

        results = await asyncio.gather(*[push(h) for h in pool.handles], return_exceptions=True)
        for i, result in enumerate(results):
            if isinstance(result, BaseException):
                if not isinstance(result, actorrt.ActorDiedError):
                    raise result
                await self._replace(i, result)  # the replacement is given all of the above
        self._pushed = True

    def _make_pool(self, cls: Any, n: int) -> _Pool:
        configs = [replace(self.config, seed=self.config.seed + 10_000 * (i + 1)) for i in range(n)]
        return _Pool(cls, configs)

    async def _call_all(self, method: str) -> dict[int, Any]:
        """Call ``method`` on every worker at once; the results of those that answered, by their
        index. A worker that died is replaced (it answers next round); any other error is raised."""
        pool = self._pool
        assert pool is not None
        results = await asyncio.gather(
            *[self._answer(h, getattr(h, method)(), method) for h in pool.handles], return_exceptions=True
        )
        answered = {}
        for i, result in enumerate(results):
            if isinstance(result, BaseException):
                if not isinstance(result, actorrt.ActorDiedError):
                    raise result
                await self._replace(i, result)
            else:
                pool.deaths.answered(i)
                answered[i] = result
        return answered

    def _answer(self, handle: Any, call: Any, what: str) -> Any:
        """``call`` on ``handle``, failing as a death if it does not answer within the scheme's
        ``worker_timeout_s`` (the worker is killed as hung)."""
        return answer_within(handle, call, self.scheme.worker_timeout_s, what)

    async def _replace(self, i: int, error: BaseException) -> Any:
        """A worker died: start another in its place with the current weights, and go on. Raises
        :class:`WorkerFailedError` when its replacements keep dying before they deliver anything."""
        pool = self._pool
        assert pool is not None
        while True:
            pool.deaths.died(i, error)
            pool.generation += 1
            self.replaced += 1
            log.warning("%s %d died (%s); replacing it", pool.cls.__name__, i, error)
            if self.logger is not None:
                self.logger.note(f"{pool.cls.__name__} {i} died ({error}); replaced")
            # Shielded: a pump stopped at the end of train() would otherwise leave the replacement
            # in the pool half set up (the starting weights, no replay actor to feed).
            respawn = asyncio.ensure_future(self._respawn(pool, i))
            self._respawns.add(respawn)
            respawn.add_done_callback(self._respawns.discard)
            try:
                return await asyncio.shield(respawn)
            except actorrt.ActorDiedError as e:  # the new one died while it was being set up
                error = e

    async def _respawn(self, pool: _Pool, i: int) -> Any:
        config = replace(pool.configs[i], seed=pool.configs[i].seed + 997 * pool.generation)
        handle = await pool.cls.remote(config, self.make_agent, self.env_fn)
        pool.handles[i] = handle  # from here on close() stops it
        # Read in the learner's thread: an update may be running there (this runs in a pump task).
        if self.scheme.update == "decentralised":
            state = await self._in_thread(lambda: copy.deepcopy(self.agent.algorithm.state_dict()))
            await handle.set_state(state, self.version)
        else:
            weights = await self._in_thread(self.agent.get_weights)
            await handle.set_weights(weights, self.version)
        uniform = self._warmup
        if uniform:
            await handle.set_uniform_exploration(True)
        if self.replay_actor is not None:
            await handle.feed(self.replay_actor)
        if uniform and not self._warmup:  # the warm-up ended during the awaits above: its end went to the others
            await handle.set_uniform_exploration(False)
        return handle

    async def close(self) -> None:
        """Stop every worker and the replay actor (their slots are free when it returns)."""
        self._phase = "closed"
        self._carried.clear()
        for task in [*self._tasks, *self._respawns]:
            task.cancel()
        await asyncio.gather(*self._tasks, *self._respawns, return_exceptions=True)
        pool, self._pool = self._pool, None
        if pool is not None:
            await asyncio.gather(*[actorrt.kill(h) for h in pool.handles], return_exceptions=True)
        if self._priorities is not None:  # a failure there is the run's error already, or moot now
            await asyncio.gather(self._priorities, return_exceptions=True)
            self._priorities = None
        if self.replay_actor is not None:
            await asyncio.gather(actorrt.kill(self.replay_actor), return_exceptions=True)
            self.replay_actor = None
        if self._local is not None:
            self._local.close()
        if self._executor is not None:
            self._executor.shutdown(wait=True)
            self._executor = None

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
                "env_steps": self.env_steps,
                "updates": self.updates,
                "version": self.version,
            }
            if held is not None:
                state["replay"] = held
            save_checkpoint(state, path)  # whole or not at all

        if self._executor is None:  # not started, or closed: no update can be running
            write()
        else:
            await self._in_thread(write)

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
        self._carried.clear()  # collected by the policy the checkpoint replaces
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
        self.env_steps, self.updates, self.version = state["env_steps"], state["updates"], state["version"]
        self._updates_at_broadcast, self._updates_due = self.updates, 0.0
        if saved is not None:
            self.replay = saved
            self._first_update_at = self.learning_starts
        elif self.replay is not None:
            self.replay.clear()
            self._first_update_at = self.env_steps + self.learning_starts
        self._warmup = self.scheme.replay != "none" and self.env_steps < self.learning_starts
        self._pushed = False  # the workers get what was restored when train() next starts

    # ---- training -----------------------------------------------------------------------------

    @property
    def mean_return(self) -> float:
        return float(np.mean(self._recent)) if self._recent else float("nan")

    def _solved(self, solved_return: float | None) -> bool:
        return solved_return is not None and len(self._recent) == self.window and self.mean_return >= solved_return

    def _record(
        self, returns: np.ndarray, lengths: np.ndarray, steps: int, stats: dict[str, float], lag: int, updates: int = 1
    ) -> None:
        self.env_steps += steps
        self._recent.extend(returns.tolist())
        self._episodes += len(returns)
        self._lags.append(lag)
        if self.metrics is not None:
            self.metrics.frames(steps)
            self.metrics.episodes(returns)
            self.metrics.losses({k: v for k, v in stats.items() if "loss" in k or k == "entropy"})
            self.metrics.update(updates)
            self.metrics.weight_lag(lag)
        if self.logger is not None:
            self.logger.log_episodes(self.env_steps, returns, lengths)
            if not stats:  # off-policy warm-up: no update yet
                return
            fps = (self.env_steps - self._start_steps) / max(1e-9, time.perf_counter() - self._started)
            self.logger.log_update(
                self.env_steps,
                {**stats, "frames_per_s": fps, "weight_lag": float(lag)},
                postfix={"fps": f"{fps:,.0f}", "lag": lag},
            )

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
            await self._settle_respawns()  # a cancelled train() may have left some going
            if not self._pushed and self._pool is not None:  # restored since start(), or a set-up cut
                await self._push_to_workers()
            return await self._train(total_steps, solved_return, stop_when_solved)
        finally:
            self._training = False

    async def _train(self, total_steps: int, solved_return: float | None, stop_when_solved: bool) -> LearnerResult:
        self._started = time.perf_counter()
        self._start_steps = self.env_steps
        self._total_steps = total_steps
        s = self.scheme
        if s.replay != "none":
            loop = self._train_off_policy
        elif s.gradients == "remote":
            if s.gradient_mode == "async":
                loop = self._train_async_gradients
            else:
                loop = self._train_sync_gradients
        elif s.collection == "local":
            loop = self._train_local
        elif s.collection_mode == "async":
            loop = self._train_async_collection
        else:
            loop = self._train_sync_collection
        solved = await loop(total_steps, solved_return if stop_when_solved else None)
        wall = time.perf_counter() - self._started
        return LearnerResult(
            solved=solved or self._solved(solved_return),
            env_steps=self.env_steps,
            wall_s=wall,
            mean_return=self.mean_return,
            episodes=self._episodes,
            updates=self.updates,
            frames_per_s=(self.env_steps - self._start_steps) / max(wall, 1e-9),
            mean_weight_lag=float(np.mean(self._lags)) if self._lags else 0.0,
            replaced_workers=self.replaced,
        )

    def _done(self, total_steps: int, stop_at: float | None) -> bool:
        return self.env_steps >= total_steps or self._solved(stop_at)

    async def _in_thread(self, fn: Callable[..., T], *args: Any) -> T:
        """Run an update off the event loop, so rollouts keep arriving meanwhile."""
        return await asyncio.get_running_loop().run_in_executor(self._executor, fn, *args)

    async def _learn(self, batch: Rollout[np.ndarray], source: str | None = None) -> dict[str, float]:
        """One update on ``batch``; ``source``: the collector it came from, when rollouts of
        several collectors arrive interleaved (one update at a time: the agent hears it first)."""
        if source is not None:
            self.agent.select_stream(source)
        stats = await self._in_thread(self.agent.learn, batch)
        self.updates += 1
        return stats

    def _send(self, call: Any) -> Any:
        """A call to a worker whose answer is not awaited: it is ordered before the worker's
        next call, where a death surfaces; any other error it fails with is raised by the next
        :meth:`_broadcast`."""

        def read(fut: Any) -> None:
            error = None if fut.cancelled() else fut.exception()
            if error is not None and not isinstance(error, actorrt.ActorDiedError) and self._send_error is None:
                self._send_error = error

        call.add_done_callback(read)
        return call

    def _raise_send_error(self) -> None:
        """Raise what a call sent by :meth:`_send` failed with (other than a death), once."""
        if self._send_error is not None:
            error, self._send_error = self._send_error, None
            raise error

    def _broadcast(self) -> None:
        """Send the current weights to every remote worker; queued behind their current call."""
        assert self._pool is not None
        self._raise_send_error()
        self.version += 1
        weights = self.agent.get_weights()
        sent = [self._send(handle.set_weights(weights, self.version)) for handle in self._pool.handles]
        if self.metrics is not None:
            timing = asyncio.ensure_future(self._time_broadcast(sent))
            self._timings.add(timing)
            timing.add_done_callback(self._timings.discard)

    async def _time_broadcast(self, sent: list[Any]) -> None:
        assert self.metrics is not None
        with self.metrics.broadcast():
            await asyncio.gather(*sent, return_exceptions=True)

    async def _train_local(self, total_steps: int, stop_at: float | None) -> bool:
        assert self._local is not None
        while not self._done(total_steps, stop_at):
            rollout = self._local.collect()
            stats = await self._learn(rollout)
            self._record(rollout.episode_returns, rollout.episode_lengths, rollout.num_steps, stats, 0)
        return self._solved(stop_at)

    async def _train_sync_collection(self, total_steps: int, stop_at: float | None) -> bool:
        """A2C: every collector acts with the newest weights; one update on all their rollouts."""
        assert self._pool is not None
        while not self._done(total_steps, stop_at):
            rollouts = list((await self._call_all("collect")).values())
            if not rollouts:
                continue
            batch = concat_rollouts([r for r, _ in rollouts])
            lag = max(self.version - v for _, v in rollouts)
            stats = await self._learn(batch)
            self._record(batch.episode_returns, batch.episode_lengths, batch.num_steps, stats, lag)
            self._broadcast()
        return self._solved(stop_at)

    def _start_pumps(self) -> asyncio.Queue[Pumped]:
        """One task per collector keeps ``rollouts_in_flight`` collect calls queued on it and puts
        the rollouts into a bounded queue (collectors pause when it is full). Dead ones are replaced."""
        pool = self._pool
        assert pool is not None
        queue: asyncio.Queue[Pumped] = asyncio.Queue(self.scheme.max_queued_rollouts)

        async def pump(i: int) -> None:
            in_flight: deque[Any] = deque()
            while True:
                handle = pool.handles[i]  # _replace puts a new worker in this list
                while len(in_flight) < self.scheme.rollouts_in_flight and not self._draining:
                    in_flight.append(handle.collect())
                if not in_flight:  # drained
                    return
                try:
                    item = await self._answer(handle, in_flight.popleft(), "collect")
                except actorrt.ActorDiedError as e:
                    in_flight.clear()
                    if not self._draining:  # else the next train() replaces it
                        await self._replace(i, e)
                    continue
                pool.deaths.answered(i)
                rollout, version = item
                pumped = (rollout, version, handle.actor_id)  # a replacement is another stream
                if self._draining:
                    self._carry(queue)  # what it put in before goes first
                    self._carried.append(pumped)
                else:
                    await queue.put(pumped)

        self._draining = False
        self._tasks = [asyncio.create_task(pump(i)) for i in range(len(pool.handles))]
        return queue

    async def _next_rollout(self, queue: asyncio.Queue[Pumped]) -> Pumped:
        """The next rollout from the pumps, with its weights' version and the collector it came
        from (first those carried over from the last ``train``); raises what a pump failed with
        (other than a dead collector)."""
        if self._carried:
            return self._carried.popleft()
        getter = asyncio.ensure_future(queue.get())
        try:
            done, _ = await asyncio.wait([getter, *self._tasks], return_when=asyncio.FIRST_COMPLETED)
        finally:
            if not getter.done():  # a pump failed, or train() was cancelled: no getter left behind
                getter.cancel()
        if getter not in done:
            for task in done:
                task.result()
        return getter.result()

    async def _settle_respawns(self) -> None:
        """Let replacements being set up finish (a death there is found by the next call), for
        ``SETTLE_S`` at most (one may wait for a free slot); those cut short leave the workers to
        be given the learner's state again when the next ``train`` starts."""
        if not self._respawns:
            return
        _, late = await asyncio.wait(list(self._respawns), timeout=SETTLE_S)
        for task in late:
            task.cancel()
        if late:
            await asyncio.gather(*late, return_exceptions=True)
            self._pushed = False
            log.warning(
                "%d replacement workers were still being set up %gs after training stopped", len(late), SETTLE_S
            )

    async def _stop_pumps(self, queue: asyncio.Queue[Pumped], settle: bool = True) -> None:
        """Stop the pumps. With ``settle`` (a run that reached its step count, not one cancelled
        or failing) they first finish the collect calls they had queued (``SETTLE_S`` at most),
        and what those and ``queue`` hold is carried over to the next ``train``; then wait for
        any call still queued on a collector (a call ordered after them returns once they ran):
        ``train`` returns with its collectors idle and, when they feed a replay actor, nothing
        more on its way there."""
        try:
            if settle:
                self._draining = True
                deadline = time.monotonic() + SETTLE_S
                pending = set(self._tasks)
                while pending and time.monotonic() < deadline:
                    self._carry(queue)  # a pump waiting to put one in is let through
                    _, pending = await asyncio.wait(pending, timeout=0.05)
                self._carry(queue)
        finally:  # also when train() is cancelled while they finish: no pump outlives it
            self._draining = False
            for task in self._tasks:
                task.cancel()
            outcomes = await asyncio.gather(*self._tasks, return_exceptions=True)
            self._tasks = []
        failed = [r for r in outcomes if isinstance(r, Exception)]
        await self._settle_respawns()
        if settle and failed:  # a pump's own error while it finished its calls
            raise failed[0]
        if self._pool is None or not settle:
            return
        settled = [asyncio.ensure_future(handle.pid()) for handle in self._pool.handles]
        done, late = await asyncio.wait(settled, timeout=SETTLE_S)
        for fut in done:
            if not fut.cancelled():
                fut.exception()  # a dead collector's error: the next train() replaces it
        for fut in late:
            fut.cancel()
        if late:
            log.warning(
                "%d of %d collectors were still busy %gs after training stopped", len(late), len(settled), SETTLE_S
            )

    def _carry(self, queue: asyncio.Queue[Pumped]) -> None:
        while not queue.empty():
            self._carried.append(queue.get_nowait())

    async def _train_async_collection(self, total_steps: int, stop_at: float | None) -> bool:
        """IMPALA: collectors never wait for the learner; a bounded queue keeps memory flat."""
        assert self._pool is not None
        queue = self._start_pumps()
        try:
            while not self._done(total_steps, stop_at):
                rollout, version, source = await self._next_rollout(queue)
                stats = await self._learn(rollout, source)
                self._record(
                    rollout.episode_returns, rollout.episode_lengths, rollout.num_steps, stats, self.version - version
                )
                if self.updates % self.scheme.broadcast_every == 0:
                    self._broadcast()
        except BaseException:
            await self._stop_pumps(queue, settle=False)
            raise
        await self._stop_pumps(queue)
        return self._solved(stop_at)

    def _apply(self, optimizer: torch.optim.Optimizer, grads: list[np.ndarray], statistics: list[Any]) -> None:
        """The learner's thread: one optimizer step on its copy, and what the workers' running
        statistics (a normaliser's) took in, which its weights carry back to them."""
        apply_gradients(optimizer, grads)
        for taken in statistics:
            self.agent.add_statistics(taken)

    async def _train_sync_gradients(self, total_steps: int, stop_at: float | None) -> bool:
        """Synchronous gradient workers: average their gradients; one step centrally or in each."""
        assert self._pool is not None
        optimizer = self.agent.algorithm.optimizer
        while not self._done(total_steps, stop_at):
            answered: dict[int, GradientResult] = await self._call_all("compute_gradients")
            if not answered:
                continue
            good = list(answered.values())
            mean_grads = [np.mean([r.grads[k] for r in good], axis=0) for k in range(len(good[0].grads))]
            await self._in_thread(self._apply, optimizer, mean_grads, [r.statistics for r in good])
            self.updates += 1
            self.version += 1
            if self.scheme.update == "decentralised":
                applied = await asyncio.gather(
                    *[
                        self._answer(
                            h,
                            h.apply_gradients(
                                mean_grads, self.version, [r.statistics for j, r in answered.items() if j != i]
                            ),
                            "apply_gradients",
                        )
                        for i, h in enumerate(self._pool.handles)
                    ],
                    return_exceptions=True,
                )
                for i, error in enumerate(applied):
                    if isinstance(error, actorrt.ActorDiedError):
                        await self._replace(i, error)  # its replacement gets the state with this step in it
                    elif isinstance(error, BaseException):
                        raise error
            else:
                self.version -= 1  # _broadcast counts this version itself
                self._broadcast()
            stats = {k: float(np.mean([r.stats[k] for r in good])) for k in good[0].stats}
            lag = max(self.version - 1 - r.version for r in good)
            self._record(
                np.concatenate([r.episode_returns for r in good]),
                np.concatenate([r.episode_lengths for r in good]),
                sum(r.env_steps for r in good),
                stats,
                lag,
            )
        return self._solved(stop_at)

    async def _train_async_gradients(self, total_steps: int, stop_at: float | None) -> bool:
        """A3C: apply each worker's gradients as they come; that worker gets the new weights."""
        assert self._pool is not None
        optimizer = self.agent.algorithm.optimizer
        pending = {
            asyncio.ensure_future(self._answer(h, h.compute_gradients(), "compute_gradients")): i
            for i, h in enumerate(self._pool.handles)
        }
        try:
            while not self._done(total_steps, stop_at):
                done, _ = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
                for fut in done:
                    i = pending.pop(fut)
                    try:
                        r: GradientResult = fut.result()
                    except actorrt.ActorDiedError as e:
                        handle = await self._replace(i, e)
                    else:
                        self._pool.deaths.answered(i)
                        await self._in_thread(self._apply, optimizer, r.grads, [r.statistics])
                        self.updates += 1
                        self.version += 1
                        self._record(
                            r.episode_returns, r.episode_lengths, r.env_steps, r.stats, self.version - 1 - r.version
                        )
                        handle = self._pool.handles[i]
                        self._send(handle.set_weights(self.agent.get_weights(), self.version))
                    pending[
                        asyncio.ensure_future(self._answer(handle, handle.compute_gradients(), "compute_gradients"))
                    ] = i
                self._raise_send_error()  # a weight send that failed (other than a death)
        finally:
            for fut in pending:
                fut.cancel()
        return self._solved(stop_at)

    # ---- off-policy: collectors feed the learner's replay -------------------------------------

    def _owed(self, num_steps: int) -> int:
        """Updates that ``num_steps`` more env steps are owed at ``updates_per_step`` (none before
        ``learning_starts``); fractions carry over to the next rollout."""
        if self.env_steps + num_steps < self._first_update_at:
            return 0
        self._updates_due += self.scheme.updates_per_step * num_steps
        owed = int(self._updates_due)
        self._updates_due -= owed
        return owed

    def _beta(self) -> float | None:
        """Prioritised replay's ``beta`` now: linear from its start to 1 at ``total_steps``."""
        if self._beta_start is None:
            return None
        return linear_schedule(self._beta_start, 1.0, 1.0, self.env_steps / max(1, self._total_steps))

    def _ingest(self, rollout: Rollout[np.ndarray], owed: int, beta: float | None) -> tuple[dict[str, float], int]:
        """Store a rollout, then take the updates it is owed (in the learner's thread: the replay
        is only ever touched there)."""
        assert self.replay is not None
        algo = self.agent.algorithm
        assert isinstance(algo, OffPolicyAlgorithm)
        self.replay.add_rollout(rollout)
        if beta is not None and isinstance(self.replay, PrioritizedReplay):
            self.replay.beta = beta
        stats: dict[str, float] = {}
        for _ in range(owed):
            batch = self.replay.sample(self.batch_size)
            stats = self.agent.learn(batch)
            self.replay.update_priorities(batch.indices, algo.td_errors)
        return stats, owed

    def _learn_batches(self, batches: ReplayBatch[np.ndarray], owed: int) -> tuple[dict[str, float], np.ndarray]:
        """``owed`` updates on consecutive ``batch_size`` slices of what the replay actor sent;
        the stats of the last and every TD error (for the priorities), in the learner's thread."""
        algo = self.agent.algorithm
        assert isinstance(algo, OffPolicyAlgorithm)
        stats: dict[str, float] = {}
        td_errors = []
        for k in range(owed):
            part = slice(k * self.batch_size, (k + 1) * self.batch_size)
            stats = self.agent.learn(ReplayBatch(*(column[part] for column in batches)))
            td_errors.append(algo.td_errors)
        return stats, np.concatenate(td_errors)

    async def _from_replay_actor(self, owed: int, beta: float | None) -> dict[str, float]:
        """Take ``owed`` updates on batches sampled from the replay actor (one call for all of
        them), then send the TD errors back for the priorities (of a prioritised replay)."""
        if owed == 0:
            return {}
        await self._priorities_sent()  # ordered before the sample anyway; its error must not vanish
        try:
            batches, stamps = await self.replay_actor.sample(self.batch_size, owed, beta)
        except actorrt.ActorDiedError as e:
            raise ReplayLostError(f"the replay actor died: {e}") from None
        stats, td_errors = await self._in_thread(self._learn_batches, batches, owed)
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

    async def _off_policy_step(self, rollout: Rollout[np.ndarray] | Fed, lag: int) -> None:
        """Ingest one rollout (or a collector's report that the replay actor holds it), take the
        updates it is owed, record it, end the warm-up, and broadcast the weights once at least
        ``broadcast_every`` updates were taken since the last broadcast (checked after each
        rollout: a rollout owed many updates gives one broadcast, not one per update)."""
        if self.replay_actor is not None and not isinstance(rollout, Fed):
            raise RuntimeError(
                "a collector sent its rollout to the learner while a replay actor holds the replay "
                "(it was never given the replay actor to feed)"
            )
        owed, beta = self._owed(rollout.num_steps), self._beta()
        if isinstance(rollout, Fed):
            stats, done = await self._from_replay_actor(owed, beta), owed
        else:
            stats, done = await self._in_thread(self._ingest, rollout, owed, beta)
        self.updates += done
        self._record(rollout.episode_returns, rollout.episode_lengths, rollout.num_steps, stats, lag, done)
        if self._warmup and self.env_steps >= self.learning_starts:
            self._warmup = False
            if self._pool is not None:
                for handle in self._pool.handles:  # queued before their next collect
                    self._send(handle.set_uniform_exploration(False))
        if self._pool is not None and self.updates - self._updates_at_broadcast >= self.scheme.broadcast_every:
            self._updates_at_broadcast = self.updates
            self._broadcast()

    async def _train_off_policy(self, total_steps: int, stop_at: float | None) -> bool:
        """DDPG / TD3 / SAC on a replay fed by local, synchronous or asynchronous collectors."""
        algo = self.agent.algorithm
        assert isinstance(algo, OffPolicyAlgorithm)
        if self._local is not None:
            while not self._done(total_steps, stop_at):
                algo.uniform_exploration = self.env_steps < self.learning_starts
                await self._off_policy_step(self._local.collect(), 0)
            algo.uniform_exploration = False
            return self._solved(stop_at)
        assert self._pool is not None
        if self.scheme.collection_mode == "sync":
            while not self._done(total_steps, stop_at):
                for rollout, version in (await self._call_all("collect")).values():
                    await self._off_policy_step(rollout, self.version - version)
        else:
            queue = self._start_pumps()
            try:
                while not self._done(total_steps, stop_at):
                    rollout, version, _ = await self._next_rollout(queue)
                    await self._off_policy_step(rollout, self.version - version)
            except BaseException:
                await self._stop_pumps(queue, settle=False)
                raise
            await self._stop_pumps(queue)
        await self._priorities_sent()
        return self._solved(stop_at)
