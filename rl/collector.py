"""`Collector`: steps a gymnasium vector env with an agent and returns time-major rollouts.

Standalone by design: it needs only an :class:`rl.Agent` (any model/algorithm with ``sample``)
and a picklable :class:`CollectorConfig` (or an env factory), so it can run in-process or as a
remote actor that returns a whole rollout per call and receives weights as numpy dicts.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.vector import AsyncVectorEnv, AutoresetMode, SyncVectorEnv

from rl.agent import Agent
from rl.storage import Rollout

__all__ = ["Collector", "CollectorConfig", "env_spaces", "make_vector_env"]


@dataclass
class CollectorConfig:
    """How to build the environments and how long a rollout is. Picklable."""

    env_id: str = "CartPole-v1"
    """gymnasium id passed to ``gym.make``."""
    num_envs: int = 8
    """Environments stepped together (the ``B`` of ``[T, B]``)."""
    num_steps: int = 32
    """Steps per environment per rollout (the ``T`` of ``[T, B]``)."""
    seed: int = 0
    """Seed of the first reset; env ``i`` gets ``seed + i``."""
    vectorization: str = "sync"
    """``sync`` (one process, best for cheap envs) or ``async`` (one subprocess per env)."""
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    """Extra keyword arguments for ``gym.make``."""

    def __post_init__(self) -> None:
        for name in ("num_envs", "num_steps"):
            value = getattr(self, name)
            if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value < 1:
                raise ValueError(f"CollectorConfig: {name} must be a whole number >= 1, got {value!r}")
        if not isinstance(self.seed, (int, np.integer)) or isinstance(self.seed, bool):
            raise TypeError(f"CollectorConfig: seed must be an int, got {self.seed!r}")
        if self.vectorization not in ("sync", "async"):
            raise ValueError(f"CollectorConfig: vectorization must be 'sync' or 'async', got {self.vectorization!r}")


def make_vector_env(
    config: CollectorConfig, env_fn: Callable[[], gym.Env] | None = None
) -> SyncVectorEnv | AsyncVectorEnv:
    """Build the vector env with same-step autoreset (the final obs is in ``info['final_obs']``)."""
    fn = env_fn or (lambda: gym.make(config.env_id, **config.env_kwargs))
    fns = [fn for _ in range(config.num_envs)]
    if config.vectorization == "sync":
        return SyncVectorEnv(fns, autoreset_mode=AutoresetMode.SAME_STEP)
    if config.vectorization == "async":
        return AsyncVectorEnv(fns, autoreset_mode=AutoresetMode.SAME_STEP)
    raise ValueError(f"unknown vectorization {config.vectorization!r}")


class Collector:
    """Runs ``agent.sample_with_info`` in a vector env for ``num_steps`` steps per :meth:`collect`.

    Episodes continue across calls (the env is not reset between rollouts). Actions of ``Box``
    spaces are clipped to the bounds when stepping but stored unclipped (their log-prob is what
    the behaviour policy produced). Not thread-safe: call from one thread.
    """

    def __init__(
        self,
        config: CollectorConfig,
        agent: Agent,
        env_fn: Callable[[], gym.Env] | None = None,
    ) -> None:
        self.config = config
        self.agent = agent
        self.env = make_vector_env(config, env_fn)
        self.observation_space = self.env.single_observation_space
        self.action_space = self.env.single_action_space
        self._clip: tuple[np.ndarray, np.ndarray] | None = None
        if isinstance(self.action_space, gym.spaces.Box):
            self._clip = (self.action_space.low, self.action_space.high)
        self._obs: np.ndarray | None = None
        self._ep_return = np.zeros(config.num_envs)
        self._ep_length = np.zeros(config.num_envs, dtype=np.int64)
        self.total_steps = 0
        """Environment steps taken so far (all envs)."""

    def set_weights(self, weights: dict[str, np.ndarray]) -> None:
        """Load new acting weights (numpy dict, as from ``Agent.get_weights``)."""
        self.agent.set_weights(weights)

    def _reset(self) -> np.ndarray:
        seeds: list[int | None] = [self.config.seed + i for i in range(self.config.num_envs)]  # one per env
        obs, _ = self.env.reset(seed=seeds)
        self.env.action_space.seed(self.config.seed)
        return obs

    def collect(self) -> Rollout[np.ndarray]:
        """Step every env ``num_steps`` times and return the rollout (see :class:`Rollout`)."""
        num_steps, num_envs = self.config.num_steps, self.config.num_envs
        obs = self._reset() if self._obs is None else self._obs
        obs_buf = np.zeros((num_steps, num_envs, *obs.shape[1:]), dtype=obs.dtype)
        final_obs = np.zeros_like(obs_buf)
        rewards = np.zeros((num_steps, num_envs), dtype=np.float32)
        terminated = np.zeros((num_steps, num_envs), dtype=bool)
        truncated = np.zeros((num_steps, num_envs), dtype=bool)
        log_probs = np.zeros((num_steps, num_envs), dtype=np.float32)
        values = np.zeros((num_steps, num_envs), dtype=np.float32)
        final_values = np.zeros((num_steps, num_envs), dtype=np.float32)
        actions: np.ndarray | None = None
        ep_returns: list[float] = []
        ep_lengths: list[int] = []
        agent, env, clip = self.agent, self.env, self._clip

        for t in range(num_steps):
            obs_buf[t] = obs
            step = agent.sample_with_info(obs)
            if actions is None:
                actions = np.zeros((num_steps, *step.action.shape), dtype=step.action.dtype)
            actions[t] = step.action
            if step.log_prob is not None:
                log_probs[t] = step.log_prob
            if step.value is not None:
                values[t] = step.value
            env_action = step.action if clip is None else np.clip(step.action, *clip)
            obs, reward, term, trunc, info = env.step(env_action)
            rewards[t] = reward
            terminated[t] = term
            truncated[t] = trunc
            self._ep_return += reward
            self._ep_length += 1
            done = term | trunc
            if done.any():
                idx = np.flatnonzero(done)
                final_obs[t, idx] = np.stack(info["final_obs"][idx])
                ep_returns.extend(self._ep_return[idx].tolist())
                ep_lengths.extend(self._ep_length[idx].tolist())
                self._ep_return[idx] = 0.0
                self._ep_length[idx] = 0
                # a time limit that falls on a terminal step reports both: that step ends with no
                # future, so only truncation without termination bootstraps
                cut = trunc & ~term
                if cut.any():
                    tidx = np.flatnonzero(cut)
                    v = agent.value(final_obs[t, tidx])
                    if v is not None:
                        final_values[t, tidx] = v

        self._obs = obs
        self.total_steps += num_steps * num_envs
        boot = agent.value(obs)
        assert actions is not None
        return Rollout(
            obs=obs_buf,
            actions=actions,
            rewards=rewards,
            terminated=terminated,
            truncated=truncated,
            log_probs=log_probs,
            values=values,
            final_obs=final_obs,
            final_values=final_values,
            bootstrap_obs=obs.copy(),
            bootstrap_value=np.zeros(num_envs, np.float32) if boot is None else boot.astype(np.float32),
            episode_returns=np.asarray(ep_returns, dtype=np.float64),
            episode_lengths=np.asarray(ep_lengths, dtype=np.int64),
        )

    def close(self) -> None:
        """Close the environments (and their subprocesses with ``async``)."""
        self.env.close()


def env_spaces(config: CollectorConfig) -> tuple[gym.Space, gym.Space]:
    """``(observation_space, action_space)`` of one env, to size a model before a Collector exists."""
    env = gym.make(config.env_id, **config.env_kwargs)
    try:
        return env.observation_space, env.action_space
    finally:
        env.close()
