"""The remote halves of a learner: actors that collect rollouts or compute gradients, and the
replay actor that off-policy collectors can feed instead of the learner.

Collectors and gradient workers own a gymnasium vector env and a CPU copy of the model, built in
their own process from a picklable ``make_agent`` factory, and answer with whole rollouts
(hundreds of env steps per call): one RPC per env step would cap training near the transport's
message rate. Weights travel as numpy dicts, tagged with a version so the learner can measure
their lag.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import numpy as np
import torch

import actorrt
from rl.agent import Agent, to_torch
from rl.collector import Collector, CollectorConfig
from rl.replay import PrioritizedReplay, ReplayBatch, UniformReplay
from rl.storage import Rollout

__all__ = [
    "MAX_REPLACEMENTS_IN_A_ROW",
    "Deaths",
    "Fed",
    "GradientResult",
    "GradientWorker",
    "RemoteCollector",
    "ReplayActor",
    "ReplayLostError",
    "WorkerFailedError",
    "answer_within",
    "apply_gradients",
]

Weights = dict[str, np.ndarray]


class ReplayLostError(RuntimeError):
    """The replay actor died: the transitions it held are gone, so the run cannot go on as it was."""


class WorkerFailedError(RuntimeError):
    """A worker's replacements kept dying before delivering anything (a crash loop: an env that
    kills its process, a memory limit every replacement exceeds): replacing it again would not end."""


MAX_REPLACEMENTS_IN_A_ROW = 3
"""Replacements of one worker that may each die before delivering a result; the next death raises."""


class Deaths:
    """Per worker slot, the deaths since it last delivered a result."""

    def __init__(self, what: str, n: int) -> None:
        self.what = what
        self.counts = [0] * n

    def died(self, i: int, error: BaseException) -> None:
        """Count a death of worker ``i``; raise :class:`WorkerFailedError` when it is one too many."""
        self.counts[i] += 1
        if self.counts[i] > MAX_REPLACEMENTS_IN_A_ROW:
            raise WorkerFailedError(
                f"{self.what} {i} died {self.counts[i]} times in a row without delivering a result; "
                f"not replacing it again (last: {error})"
            )

    def answered(self, i: int) -> None:
        self.counts[i] = 0


async def answer_within(handle: Any, call: Any, timeout_s: float | None, what: str) -> Any:
    """The answer to ``call`` (made on ``handle``), within ``timeout_s`` seconds (None: no
    deadline). A worker that does not answer in time is hung (alive, but stuck, as in an
    environment's ``step`` that never returns): it is killed, and the call fails with
    ``ActorDiedError`` as if it had died, so the learner replaces it."""
    if timeout_s is None:
        return await call
    deadline = asyncio.timeout(timeout_s)
    try:
        async with deadline:
            return await call
    except TimeoutError:
        if not deadline.expired():  # the worker's own error
            raise
    cause = f"no answer to {what} within {timeout_s:g}s (worker_timeout_s): killed as hung"
    with contextlib.suppress(actorrt.ActorRTError):
        await actorrt.kill(handle)
    raise actorrt.ActorDiedError(handle.actor_id, cause)


class Fed(NamedTuple):
    """What a collector that fed the replay actor reports instead of its rollout."""

    num_steps: int
    episode_returns: np.ndarray
    episode_lengths: np.ndarray


@actorrt.remote_class
class ReplayActor:
    """An off-policy replay in its own process, as in Ape-X (Horgan et al. 2018): collectors add
    their rollouts to it directly, the learner samples batches from it and sends back the TD
    errors that set their priorities. Collected rollouts never pass through the learner (only
    the batches it samples do), and the replay's memory is not in the learner's process. Calls
    run one at a time, in order.
    """

    def __init__(self, replay: UniformReplay) -> None:
        self.replay = replay
        self.written = np.zeros(replay.capacity, np.int64)
        """Per slot, ``total_added`` after its last write: TD errors computed on a sampled row
        set its priority only if the slot was not overwritten since (collectors keep adding
        while the learner learns)."""

    def add_rollout(self, rollout: Rollout[np.ndarray]) -> int:
        """Store every step of a rollout; the number of transitions held."""
        slots = self.replay.add_rollout(rollout)
        self.written[slots] = self.replay.total_added
        return len(self.replay)

    def sample(
        self, batch_size: int, batches: int, beta: float | None = None
    ) -> tuple[ReplayBatch[np.ndarray], np.ndarray]:
        """``batches`` batches, each drawn as the replay draws one (prioritised ones with their
        own weights, at importance-sampling exponent ``beta`` when given), end to end:
        ``batches * batch_size`` rows; and each row's write stamp, for :meth:`update_priorities`."""
        if batch_size < 1 or batches < 1:
            raise ValueError(f"batch_size and batches must be >= 1, got {batch_size} and {batches}")
        if beta is not None and isinstance(self.replay, PrioritizedReplay):
            self.replay.beta = beta
        parts = [self.replay.sample(batch_size) for _ in range(batches)]
        batch = ReplayBatch(*(np.concatenate(column) for column in zip(*parts, strict=True)))
        return batch, self.written[batch.indices]

    def update_priorities(self, indices: np.ndarray, td_errors: np.ndarray, stamps: np.ndarray) -> None:
        """Priorities from the TD errors of rows :meth:`sample` gave (with their ``stamps``); a
        slot overwritten since keeps the priority its new transition entered with."""
        fresh = self.written[indices] == stamps
        if fresh.any():
            self.replay.update_priorities(indices[fresh], td_errors[fresh])

    def size(self) -> int:
        """Transitions held."""
        return len(self.replay)


@actorrt.remote_class
class RemoteCollector:
    """A :class:`rl.Collector` in its own process."""

    def __init__(
        self, config: CollectorConfig, make_agent: Callable[[], Agent], env_fn: Callable[[], Any] | None = None
    ) -> None:
        torch.set_num_threads(1)
        torch.manual_seed(config.seed)  # exploration noise and warm-up actions, as reproducible as the envs
        self.collector = Collector(config, make_agent(), env_fn)
        self.version = -1
        self.replay: Any = None
        """A :class:`ReplayActor`'s handle once :meth:`feed` is called."""

    def set_weights(self, weights: Weights, version: int) -> None:
        self.collector.set_weights(weights)
        self.version = version

    def feed(self, replay: Any) -> None:
        """From now on store each rollout in this :class:`ReplayActor` (a handle) and report
        only what the learner counts (:class:`Fed`)."""
        self.replay = replay

    def collect(self) -> tuple[Rollout[np.ndarray] | Fed, int]:
        """One rollout (or, when feeding a replay actor, its :class:`Fed` report once the replay
        holds it), and the version of the weights that acted in it."""
        rollout = self.collector.collect()
        if self.replay is None:
            return rollout, self.version
        try:
            self.replay.add_rollout(rollout).result()
        except actorrt.ActorDiedError as e:  # not this collector's death: the learner must not replace it
            raise ReplayLostError(f"the replay actor died: {e}") from None
        return Fed(rollout.num_steps, rollout.episode_returns, rollout.episode_lengths), self.version

    def set_uniform_exploration(self, uniform: bool) -> None:
        """Off-policy warm-up: act uniformly at random in the action bounds (DDPG, TD3, SAC)."""
        algorithm = self.collector.agent.algorithm
        if not hasattr(algorithm, "uniform_exploration"):
            raise TypeError(f"{type(algorithm).__name__} has no uniform exploration")
        algorithm.uniform_exploration = uniform

    def pid(self) -> int:
        return os.getpid()

    def env_steps(self) -> int:
        """Env steps this collector has collected (delivered or not)."""
        return self.collector.total_steps

    def close(self) -> None:
        self.collector.close()


class _CaptureStep:
    """Stands in for an optimizer: ``step()`` keeps the (clipped) gradients instead of applying them."""

    def __init__(self, optimizer: torch.optim.Optimizer) -> None:
        self.optimizer = optimizer
        self.params = [p for group in optimizer.param_groups for p in group["params"]]
        self.grads: list[np.ndarray] | None = None

    def zero_grad(self, set_to_none: bool = True) -> None:
        self.optimizer.zero_grad(set_to_none=set_to_none)

    def step(self) -> None:
        self.grads = [
            np.zeros(tuple(p.shape), np.float32) if p.grad is None else p.grad.detach().numpy().copy()
            for p in self.params
        ]


def apply_gradients(optimizer: torch.optim.Optimizer, grads: list[np.ndarray]) -> None:
    """One optimizer step with the given gradients (in ``param_groups`` order)."""
    params = [p for group in optimizer.param_groups for p in group["params"]]
    if len(params) != len(grads):
        raise ValueError(f"{len(grads)} gradients for {len(params)} parameters")
    for p, g in zip(params, grads, strict=True):
        p.grad = torch.from_numpy(np.asarray(g, dtype=np.float32)).reshape(p.shape)
    optimizer.step()


class GradientResult(NamedTuple):
    """What a gradient worker answers for one rollout of its own."""

    grads: list[np.ndarray]
    stats: dict[str, float]
    """The algorithm's learning statistics."""
    episode_returns: np.ndarray
    episode_lengths: np.ndarray
    env_steps: int
    version: int
    """The version of the weights the gradients were computed with."""
    statistics: Any
    """What the agent's running statistics took in (:meth:`rl.Agent.take_statistics`; a
    normaliser's), for the learner to merge: ``None`` for an agent without any."""


@actorrt.remote_class
class GradientWorker:
    """Collects its own rollouts and computes the algorithm's gradients on them (A3C / DPPO style).

    With a central update the learner applies the gradients and sends weights back; with a
    decentralised update every worker applies the same averaged gradients to its own model and
    optimizer, so their weights stay equal without any weight broadcast.
    """

    def __init__(
        self, config: CollectorConfig, make_agent: Callable[[], Agent], env_fn: Callable[[], Any] | None = None
    ) -> None:
        torch.set_num_threads(1)
        torch.manual_seed(config.seed)
        self.agent = make_agent()
        self.collector = Collector(config, self.agent, env_fn)
        self.capture = _CaptureStep(self.agent.algorithm.optimizer)
        self.version = -1

    def set_weights(self, weights: Weights, version: int) -> None:
        self.agent.set_weights(weights)
        self.version = version

    def get_weights(self) -> Weights:
        return self.agent.get_weights()

    def set_state(self, state: dict[str, Any], version: int) -> None:
        """The learner's models and optimizers: a replacement in a decentralised update must
        hold the optimizer state the others built up, or the same gradients move it elsewhere."""
        self.agent.algorithm.load_state_dict(state)
        self.version = version

    def compute_gradients(self) -> GradientResult:
        rollout = self.collector.collect()
        algorithm = self.agent.algorithm
        # _CaptureStep is no torch Optimizer, but the algorithms only call step() (and zero_grad) on it.
        optimizer, algorithm.optimizer = algorithm.optimizer, self.capture  # type: ignore[assignment]
        try:
            stats = algorithm.learn(to_torch(self.agent.preprocess_batch(rollout)))
        finally:
            algorithm.optimizer = optimizer
        assert self.capture.grads is not None, "the algorithm took no optimizer step"
        return GradientResult(
            self.capture.grads,
            stats,
            rollout.episode_returns,
            rollout.episode_lengths,
            rollout.num_steps,
            self.version,
            self.agent.take_statistics(),
        )

    def apply_gradients(self, grads: list[np.ndarray], version: int, others: Sequence[Any] = ()) -> None:
        """Decentralised update: the same averaged gradients on every worker, and the running
        statistics the other workers took in this round (this one's own are in it already)."""
        apply_gradients(self.agent.algorithm.optimizer, grads)
        for taken in others:
            self.agent.add_statistics(taken)
        self.version = version

    def pid(self) -> int:
        return os.getpid()

    def close(self) -> None:
        self.collector.close()


def concat_rollouts(rollouts: list[Rollout[np.ndarray]]) -> Rollout[np.ndarray]:
    """Rollouts of the same length side by side: ``[T, B1+B2+...]`` (episodes concatenated)."""
    if len(rollouts) == 1:
        return rollouts[0]
    per_step = {"bootstrap_obs", "bootstrap_value", "episode_returns", "episode_lengths"}
    fields: dict[str, Any] = {}
    for name in Rollout._fields:
        parts = [getattr(r, name) for r in rollouts]
        fields[name] = np.concatenate(parts, axis=0 if name in per_step else 1)
    return Rollout(**fields)
