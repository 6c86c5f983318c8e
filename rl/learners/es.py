"""Evolution strategies on actorrt: remote workers evaluate a generation's candidates.

One generation is one call per worker. For :class:`rl.ES` the learner sends ``theta`` (``d``
floats) and that worker's share of the noise offsets; the worker rebuilds each perturbation from
its own copy of the shared :class:`rl.NoiseTable` and runs one episode per ``theta + sigma eps``
and per ``theta - sigma eps`` (a mirrored pair shares its environment seed). For
:class:`rl.CMAES` (whose candidates no seed can name) it sends the share's candidate vectors
themselves. Either way the worker also runs a few episodes of ``theta`` (the mean) itself, all in
lockstep (one batched forward per time step for the whole share), and answers with returns only.
A worker that dies is replaced and its share evaluated again.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np
import torch

import actorrt
from rl.agent import Agent
from rl.algorithms.cmaes import CMAES
from rl.algorithms.es import ES, NoiseTable
from rl.bookkeeping import ReturnWindow
from rl.learners.progress import LearnerResult
from rl.learners.workers import Deaths, answer_within
from rl.logger import TrainingLogger
from rl.networks import MLPPolicy

__all__ = ["ESLearner", "ESWorker", "evaluate_population"]

log = logging.getLogger("rl.es")


@torch.inference_mode()
def evaluate_population(
    envs: list[gym.Env], model: MLPPolicy, params: np.ndarray, seeds: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """One episode per row of ``params`` (``[K, d]``) in ``envs[k]`` reset with ``seeds[k]``.

    All ``K`` episodes advance together; finished ones drop out of the batch. Returns
    ``(episode returns [K], episode lengths [K])``. ``terminated`` and ``truncated`` both end an
    episode here: ES scores whole episodes, it bootstraps nothing.
    """
    k = len(params)
    if k == 0:  # a worker whose share is empty (more workers than work)
        return np.zeros(0), np.zeros(0, np.int64)
    flat = torch.from_numpy(np.ascontiguousarray(params, dtype=np.float32))
    obs = np.stack([envs[i].reset(seed=int(seeds[i]))[0] for i in range(k)]).astype(np.float32)
    returns = np.zeros(k)
    lengths = np.zeros(k, np.int64)
    alive = np.ones(k, bool)
    while alive.any():
        idx = np.flatnonzero(alive)
        actions = model.batched_forward(flat[idx], torch.from_numpy(obs[idx])).numpy()
        for a, i in zip(actions, idx, strict=True):
            o, r, terminated, truncated, _ = envs[i].step(a)
            obs[i] = o
            returns[i] += float(r)
            lengths[i] += 1
            if terminated or truncated:
                alive[i] = False
    return returns, lengths


@actorrt.remote_class
class ESWorker:
    """Evaluates perturbations of ``theta`` named by noise offsets (see the module docstring)."""

    def __init__(
        self,
        env_id: str,
        make_policy: Callable[[], MLPPolicy],
        noise_size: int,
        noise_seed: int,
        seed: int,
        env_fn: Callable[[], gym.Env] | None = None,
    ) -> None:
        torch.set_num_threads(1)
        self.model = make_policy()
        self.noise = NoiseTable(noise_size, noise_seed)
        self.make_env = env_fn or (lambda: gym.make(env_id))
        self.envs: list[gym.Env] = []
        self.rng = np.random.default_rng(seed)

    def evaluate(
        self, theta: np.ndarray, offsets: np.ndarray, sigma: float, theta_episodes: int
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, int]:
        """Returns of ``theta + sigma eps_i``, of ``theta - sigma eps_i``, of ``theta`` itself, the
        lengths of ``theta``'s episodes, and the env steps taken."""
        d = len(theta)
        eps = self.noise.stack(offsets, d)
        m = len(offsets)
        params = np.concatenate([theta + sigma * eps, theta - sigma * eps, np.repeat(theta[None], theta_episodes, 0)])
        pair_seeds = self.rng.integers(0, 2**31 - 1, size=m)
        seeds = np.concatenate([pair_seeds, pair_seeds, self.rng.integers(0, 2**31 - 1, size=theta_episodes)])
        while len(self.envs) < len(params):
            self.envs.append(self.make_env())
        returns, lengths = evaluate_population(self.envs, self.model, params, seeds)
        return returns[:m], returns[m : 2 * m], returns[2 * m :], lengths[2 * m :], int(lengths.sum())

    def evaluate_candidates(
        self, theta: np.ndarray, candidates: np.ndarray, theta_episodes: int
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
        """Returns of each candidate vector (one episode each), of ``theta`` itself, the lengths
        of ``theta``'s episodes, and the env steps taken."""
        k = len(candidates)
        params = np.concatenate([candidates, np.repeat(theta[None], theta_episodes, 0)])
        seeds = self.rng.integers(0, 2**31 - 1, size=len(params))
        while len(self.envs) < len(params):
            self.envs.append(self.make_env())
        returns, lengths = evaluate_population(self.envs, self.model, params, seeds)
        return returns[:k], returns[k:], lengths[k:], int(lengths.sum())

    def pid(self) -> int:
        import os

        return os.getpid()

    def close(self) -> None:
        for env in self.envs:
            env.close()


class ESLearner:
    """``async with ESLearner(make_agent, env_id, num_workers=2) as learner: await learner.train(...)``.

    ``make_agent`` (picklable, module level) builds an :class:`rl.Agent` around :class:`rl.ES` or
    :class:`rl.CMAES`;
    the workers build the policy alone from ``agent.algorithm.model``'s factory, ``make_policy``.
    Each generation every worker also runs ``theta_episodes / num_workers`` episodes of ``theta``
    itself: "solved" is judged on those (the mean of the last ``window``), not on perturbations.
    A worker that takes over ``worker_timeout_s`` to evaluate its share is killed as hung and
    replaced (None: no deadline).
    """

    def __init__(
        self,
        make_agent: Callable[[], Agent],
        make_policy: Callable[[], MLPPolicy],
        env_id: str,
        num_workers: int = 2,
        theta_episodes: int = 4,
        window: int = 20,
        seed: int = 0,
        logger: TrainingLogger | None = None,
        env_fn: Callable[[], gym.Env] | None = None,
        worker_timeout_s: float | None = 300.0,
    ) -> None:
        if num_workers < 1:
            raise ValueError("ESLearner needs num_workers >= 1")
        if worker_timeout_s is not None and not worker_timeout_s > 0:
            raise ValueError(f"worker_timeout_s must be > 0 seconds (or None: no deadline), not {worker_timeout_s}")
        self.worker_timeout_s = worker_timeout_s
        self.agent = make_agent()
        if not isinstance(self.agent.algorithm, (ES, CMAES)):
            raise TypeError(
                f"ESLearner needs an agent around rl.ES or rl.CMAES, not {type(self.agent.algorithm).__name__}"
            )
        self.es: ES | CMAES = self.agent.algorithm
        workers_size = make_policy().num_parameters
        if workers_size != self.es.dim:  # a longer theta would be read as its prefix, silently
            raise ValueError(
                f"make_policy builds a policy of {workers_size} parameters, but the agent's "
                f"{type(self.es).__name__} searches {self.es.dim}: they must build the same network"
            )
        self.make_policy = make_policy
        self.env_id = env_id
        self.env_fn = env_fn
        self.num_workers = num_workers
        self.theta_episodes = theta_episodes
        self.window = window
        self.seed = seed
        self.logger = logger
        self.handles: list[Any] = []
        self._deaths = Deaths("ESWorker", num_workers)
        self.env_steps = 0
        self.replaced = 0
        self._spawned = 0
        self._returns = ReturnWindow(window)
        """``theta``'s own evaluation episodes: "solved" is judged on these."""
        self.history: list[dict[str, float]] = []
        """Per generation: wall time, env steps, mean return of theta, of the population."""

    async def _spawn(self) -> Any:
        self._spawned += 1
        # CMA-ES sends whole candidates: its workers need no noise table (an empty one).
        size, noise_seed = (self.es.noise.size, self.es.noise.seed) if isinstance(self.es, ES) else (0, 0)
        return await ESWorker.remote(
            self.env_id, self.make_policy, size, noise_seed, self.seed + 10_000 * self._spawned, self.env_fn
        )

    async def start(self) -> ESLearner:
        """Start the workers; if any of them cannot start, stop those that did and raise."""
        if self.handles:
            raise RuntimeError("this ESLearner was started already")
        built = await asyncio.gather(*[self._spawn() for _ in range(self.num_workers)], return_exceptions=True)
        self.handles = [h for h in built if not isinstance(h, BaseException)]
        for failed in built:
            if isinstance(failed, BaseException):
                await self.close()
                raise failed
        return self

    async def close(self) -> None:
        await asyncio.gather(*[actorrt.kill(h) for h in self.handles], return_exceptions=True)
        self.handles = []

    async def __aenter__(self) -> ESLearner:
        return await self.start()

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    async def _evaluate_share(self, i: int, method: str, *args: Any) -> tuple:
        """Worker ``i`` evaluates its share (``method(*args)``); if it dies, a new worker takes its
        place and the share (:class:`WorkerFailedError` when its replacements keep dying)."""
        while True:
            handle = self.handles[i]
            try:
                result = await answer_within(handle, getattr(handle, method)(*args), self.worker_timeout_s, method)
            except actorrt.ActorDiedError as e:
                self._deaths.died(i, e)
                self.replaced += 1
                log.warning("ESWorker %d died (%s); replacing it", i, e)
                if self.logger is not None:
                    self.logger.note(f"ESWorker {i} died ({e}); replaced")
                self.handles[i] = await self._spawn()
            else:
                self._deaths.answered(i)
                return result

    async def _evaluate(self, shares: list[Any]) -> list[tuple]:
        """Every share at once; if one fails, the others are cancelled (no replacement is started
        for a worker that ``close`` kills after) and its error is raised."""
        tasks = [asyncio.ensure_future(share) for share in shares]
        try:
            return list(await asyncio.gather(*tasks))
        except BaseException:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            raise

    @property
    def mean_return(self) -> float:
        """Mean return of ``theta`` over the last ``window`` evaluation episodes."""
        return self._returns.mean

    async def train(
        self, total_steps: int, solved_return: float | None = None, stop_when_solved: bool = True
    ) -> LearnerResult:
        """Generations until ``total_steps`` env steps or, with ``stop_when_solved``, until solved."""
        if not self.handles:
            raise RuntimeError(
                "start the ESLearner first: `async with ESLearner(...) as learner:` or `await learner.start()`"
            )
        start = time.perf_counter()
        start_steps = self.env_steps
        ever_solved = False
        w = len(self.handles)
        while self.env_steps < total_steps:
            theta = self.es.theta()
            episodes = [len(e) for e in np.array_split(np.arange(self.theta_episodes), w)]
            if isinstance(self.es, ES):
                offsets = self.es.ask()
                shares = np.array_split(offsets, w)
                results = await self._evaluate(
                    [
                        self._evaluate_share(i, "evaluate", theta, shares[i], self.es.sigma, episodes[i])
                        for i in range(w)
                    ]
                )
                pos = np.concatenate([r[0] for r in results])
                neg = np.concatenate([r[1] for r in results])
                stats = self.es.tell(offsets, pos, neg)
                results = [r[2:] for r in results]
            else:
                candidates = self.es.ask()
                parts = np.array_split(candidates, w)
                results = await self._evaluate(
                    [self._evaluate_share(i, "evaluate_candidates", theta, parts[i], episodes[i]) for i in range(w)]
                )
                stats = self.es.tell(candidates, np.concatenate([r[0] for r in results]))
                results = [r[1:] for r in results]
            theta_returns = np.concatenate([r[0] for r in results])
            theta_lengths = np.concatenate([r[1] for r in results])
            steps = sum(r[2] for r in results)
            self.env_steps += steps
            self._returns.add(theta_returns)
            self.history.append(
                {
                    "wall_s": time.perf_counter() - start,
                    "env_steps": float(self.env_steps),
                    "theta_return": float(theta_returns.mean()) if len(theta_returns) else float("nan"),
                    "population_return": stats["return_mean"],
                }
            )
            if self.logger is not None:
                self.logger.log_episodes(self.env_steps, theta_returns, theta_lengths)
                fps = (self.env_steps - start_steps) / max(1e-9, time.perf_counter() - start)
                self.logger.log_update(self.env_steps, {**stats, "frames_per_s": fps}, postfix={"fps": f"{fps:,.0f}"})
            ever_solved = ever_solved or self._returns.solved(solved_return)
            if stop_when_solved and ever_solved:
                break
        wall = time.perf_counter() - start
        return LearnerResult(
            solved=ever_solved,
            env_steps=self.env_steps,
            wall_s=wall,
            mean_return=self.mean_return,
            episodes=self._returns.episodes,
            updates=self.es.generation,
            frames_per_s=(self.env_steps - start_steps) / max(wall, 1e-9),
            mean_weight_lag=0.0,
            replaced_workers=self.replaced,
        )
