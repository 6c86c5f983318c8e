"""A learner's remote workers: the :class:`WorkerPool` that starts them, calls them within the
scheme's deadline and replaces each that dies, and the :class:`RolloutPumps` that keep
asynchronous collectors busy. Both run on the learner's event loop."""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

import actorrt
from rl.agent import Agent
from rl.collector import CollectorConfig
from rl.learners.workers import Deaths, answer_within
from rl.logger import TrainingLogger
from rl.metrics import LearnerMetrics
from rl.storage import Rollout

__all__ = ["SETTLE_S", "Pumped", "RolloutPumps", "WorkerPool"]

log = logging.getLogger("rl.learner")
SETTLE_S = 60.0
"""How long a learner waits, when a ``train`` call ends, for the calls it had queued on its
workers (and for replacements being set up)."""

Pumped = tuple[Rollout[np.ndarray], int, str]
"""A rollout from a pump: with the version of the weights it was collected with and the actor id
of the collector it came from."""


@dataclass(eq=False)
class WorkerPool:
    """Remote workers of one kind (:class:`rl.learners.workers.RemoteCollector` or
    :class:`rl.learners.workers.GradientWorker`), ``handles[i]`` built from ``configs[i]``.

    A worker that dies, or that does not answer a call within ``timeout_s`` (it is killed as
    hung), is replaced in its slot by a new one that :attr:`set_up` gives what the others hold;
    :class:`rl.learners.workers.WorkerFailedError` ends a crash loop. Calls whose answer is not
    awaited (:meth:`send`, :meth:`broadcast`) raise what they failed with at the next broadcast.
    """

    cls: Any
    configs: list[CollectorConfig]
    make_agent: Callable[[], Agent]
    env_fn: Callable[[], Any] | None
    timeout_s: float | None
    logger: TrainingLogger | None = None
    metrics: LearnerMetrics | None = None
    set_up: Callable[[Any], Awaitable[None]] | None = None
    """Gives a replacement what the others hold (the learner's weights, ...)."""
    handles: list[Any] = field(default_factory=list, init=False)
    generation: int = field(default=0, init=False)
    replaced: int = field(default=0, init=False)
    """Workers replaced since the pool started."""
    needs_set_up: bool = field(default=False, init=False)
    """Whether the workers must be given the learner's state again before they are next used
    (it was restored, or a replacement's set-up was cut short)."""
    deaths: Deaths = field(init=False)
    _respawns: set[asyncio.Future[Any]] = field(default_factory=set, init=False)
    """Replacements being set up: a pump stopped meanwhile does not cut them short."""
    _timings: set[asyncio.Future[None]] = field(default_factory=set, init=False)
    """Broadcast timings in flight: the loop keeps only weak references to tasks."""
    _send_error: BaseException | None = field(default=None, init=False)
    """What a call sent without awaiting it (:meth:`send`) failed with, other than a death."""

    def __post_init__(self) -> None:
        self.deaths = Deaths(self.cls.__name__, len(self.configs))

    async def start(self) -> None:
        """Build every worker; if any cannot start, raise (those built are in :attr:`handles`,
        for :meth:`close` to stop)."""
        built = await asyncio.gather(
            *[self.cls.remote(c, self.make_agent, self.env_fn) for c in self.configs], return_exceptions=True
        )
        self.handles = [h for h in built if not isinstance(h, BaseException)]
        for failed in built:
            if isinstance(failed, BaseException):
                raise failed

    def answer(self, handle: Any, call: Any, what: str, deadline: bool = True) -> Awaitable[Any]:
        """``call`` on ``handle``, failing as a death if it does not answer within ``timeout_s``
        (the worker is killed as hung); without ``deadline``, however long it takes."""
        return answer_within(handle, call, self.timeout_s if deadline else None, what)

    async def call_all(self, method: str) -> dict[int, Any]:
        """Call ``method`` on every worker at once; the results of those that answered, by their
        index. A worker that died is replaced (it answers next round); any other error is raised."""
        results = await asyncio.gather(
            *[self.answer(h, getattr(h, method)(), method) for h in self.handles], return_exceptions=True
        )
        answered = {}
        for i, result in enumerate(results):
            if isinstance(result, BaseException):
                if not isinstance(result, actorrt.ActorDiedError):
                    raise result
                await self.replace(i, result)
            else:
                self.deaths.answered(i)
                answered[i] = result
        return answered

    async def replace(self, i: int, error: BaseException) -> Any:
        """Worker ``i`` died: start another in its place, set it up, and go on. Raises
        :class:`WorkerFailedError` when its replacements keep dying before they deliver anything."""
        while True:
            self.deaths.died(i, error)
            self.generation += 1
            self.replaced += 1
            log.warning("%s %d died (%s); replacing it", self.cls.__name__, i, error)
            if self.logger is not None:
                self.logger.note(f"{self.cls.__name__} {i} died ({error}); replaced")
            # Shielded: a pump stopped at the end of train() would otherwise leave the replacement
            # in the pool half set up (the starting weights, no replay actor to feed).
            respawn = asyncio.ensure_future(self._respawn(i))
            self._respawns.add(respawn)
            respawn.add_done_callback(self._respawns.discard)
            try:
                return await asyncio.shield(respawn)
            except actorrt.ActorDiedError as e:  # the new one died while it was being set up
                error = e

    async def _respawn(self, i: int) -> Any:
        config = replace(self.configs[i], seed=self.configs[i].seed + 997 * self.generation)
        handle = await self.cls.remote(config, self.make_agent, self.env_fn)
        self.handles[i] = handle  # from here on close() stops it
        if self.set_up is not None:
            await self.set_up(handle)
        return handle

    async def settle_respawns(self) -> None:
        """Let replacements being set up finish (a death there is found by the next call), for
        ``SETTLE_S`` at most (one may wait for a free slot); those cut short leave the workers to
        be set up again (:attr:`needs_set_up`) before they are next used."""
        if not self._respawns:
            return
        _, late = await asyncio.wait(list(self._respawns), timeout=SETTLE_S)
        for task in late:
            task.cancel()
        if late:
            await asyncio.gather(*late, return_exceptions=True)
            self.needs_set_up = True
            log.warning(
                "%d replacement workers were still being set up %gs after training stopped", len(late), SETTLE_S
            )

    async def wait_idle(self) -> None:
        """Wait until every worker has run what was queued on it (a call ordered after them returns
        once they ran), ``SETTLE_S`` at most; a dead worker is left for the next call to replace."""
        settled = [asyncio.ensure_future(handle.pid()) for handle in self.handles]
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

    def send(self, call: Any) -> Any:
        """A call to a worker whose answer is not awaited: it is ordered before the worker's
        next call, where a death surfaces; any other error it fails with is raised by the next
        :meth:`raise_send_error`."""

        def read(fut: Any) -> None:
            error = None if fut.cancelled() else fut.exception()
            if error is not None and not isinstance(error, actorrt.ActorDiedError) and self._send_error is None:
                self._send_error = error

        call.add_done_callback(read)
        return call

    def raise_send_error(self) -> None:
        """Raise what a call sent by :meth:`send` failed with (other than a death), once."""
        if self._send_error is not None:
            error, self._send_error = self._send_error, None
            raise error

    def broadcast(self, weights: dict[str, np.ndarray], version: int) -> None:
        """Send ``weights`` to every worker; queued behind their current call."""
        sent = [self.send(handle.set_weights(weights, version)) for handle in self.handles]
        if self.metrics is not None:
            timing = asyncio.ensure_future(self._time_broadcast(sent))
            self._timings.add(timing)
            timing.add_done_callback(self._timings.discard)

    async def _time_broadcast(self, sent: list[Any]) -> None:
        assert self.metrics is not None
        with self.metrics.broadcast():
            await asyncio.gather(*sent, return_exceptions=True)

    async def close(self) -> None:
        """Stop every worker (their slots are free when it returns), and any being set up."""
        respawns = list(self._respawns)
        for task in respawns:
            task.cancel()
        await asyncio.gather(*respawns, return_exceptions=True)
        handles, self.handles = self.handles, []
        await asyncio.gather(*[actorrt.kill(h) for h in handles], return_exceptions=True)


class RolloutPumps:
    """Asynchronous collection: one task per collector of ``pool`` keeps ``rollouts_in_flight``
    collect calls queued on it and puts the rollouts into a queue of ``max_queued`` (collectors
    pause when it is full). A dead collector is replaced.

    Rollouts the collectors deliver after a ``train`` reached its step count are carried to the
    next (:attr:`carried`): a run trained in many short calls loses none.
    """

    def __init__(self, pool: WorkerPool, rollouts_in_flight: int, max_queued: int) -> None:
        self.pool = pool
        self.rollouts_in_flight = rollouts_in_flight
        self.max_queued = max_queued
        self.carried: deque[Pumped] = deque()
        """Rollouts delivered after the last ``train`` reached its step count: learned from first."""
        self._queue: asyncio.Queue[Pumped] = asyncio.Queue(max_queued)
        self._tasks: list[asyncio.Task[None]] = []
        self._draining = False  # the pumps finish the collect calls they queued, and start none

    def start(self) -> None:
        """Start a pump per collector."""
        pool = self.pool
        self._queue = asyncio.Queue(self.max_queued)

        async def pump(i: int) -> None:
            in_flight: deque[Any] = deque()
            while True:
                handle = pool.handles[i]  # replace() puts a new worker in this list
                while len(in_flight) < self.rollouts_in_flight and not self._draining:
                    in_flight.append(handle.collect())
                if not in_flight:  # drained
                    return
                try:
                    item = await pool.answer(handle, in_flight.popleft(), "collect")
                except actorrt.ActorDiedError as e:
                    in_flight.clear()
                    if not self._draining:  # else the next train() replaces it
                        await pool.replace(i, e)
                    continue
                pool.deaths.answered(i)
                rollout, version = item
                pumped = (rollout, version, handle.actor_id)  # a replacement is another stream
                if self._draining:
                    self._carry()  # what it put in before goes first
                    self.carried.append(pumped)
                else:
                    await self._queue.put(pumped)

        self._draining = False
        self._tasks = [asyncio.create_task(pump(i)) for i in range(len(pool.handles))]

    async def next(self) -> Pumped:
        """The next rollout, with its weights' version and the collector it came from (first those
        carried over from the last ``train``); raises what a pump failed with (other than a dead
        collector)."""
        if self.carried:
            return self.carried.popleft()
        getter = asyncio.ensure_future(self._queue.get())
        try:
            done, _ = await asyncio.wait([getter, *self._tasks], return_when=asyncio.FIRST_COMPLETED)
        finally:
            if not getter.done():  # a pump failed, or train() was cancelled: no getter left behind
                getter.cancel()
        if getter not in done:
            for task in done:
                task.result()
        return getter.result()

    async def stop(self, settle: bool = True) -> None:
        """Stop the pumps. With ``settle`` (a run that reached its step count, not one cancelled
        or failing) they first finish the collect calls they had queued (``SETTLE_S`` at most),
        and what those and the queue hold is carried over to the next ``train``; then wait for
        any call still queued on a collector: ``train`` returns with its collectors idle and,
        when they feed a replay actor, nothing more on its way there."""
        try:
            if settle:
                self._draining = True
                deadline = time.monotonic() + SETTLE_S
                pending = set(self._tasks)
                while pending and time.monotonic() < deadline:
                    self._carry()  # a pump waiting to put one in is let through
                    _, pending = await asyncio.wait(pending, timeout=0.05)
                self._carry()
        finally:  # also when train() is cancelled while they finish: no pump outlives it
            outcomes = await self._cancel()
        failed = [r for r in outcomes if isinstance(r, Exception)]
        await self.pool.settle_respawns()
        if settle and failed:  # a pump's own error while it finished its calls
            raise failed[0]
        if settle:
            await self.pool.wait_idle()

    async def _cancel(self) -> list[Any]:
        """Cancel the pumps; what each ended with."""
        self._draining = False
        for task in self._tasks:
            task.cancel()
        outcomes = await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks = []
        return outcomes

    def _carry(self) -> None:
        while not self._queue.empty():
            self.carried.append(self._queue.get_nowait())

    async def close(self) -> None:
        """Stop the pumps and drop what was carried."""
        self.carried.clear()
        await self._cancel()
