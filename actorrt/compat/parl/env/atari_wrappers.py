"""PARL's ``wrap_deepmind``: the DeepMind Atari preprocessing, as wrappers in old gym's API, in
PARL's order, so that its ``MonitorEnv`` counts whole games in emulator frames:

    CompatWrapper -> MonitorEnv -> NoopResetEnv(30) -> MaxAndSkipEnv(4) (NoFrameskip ids only)
    -> EpisodicLifeEnv -> FireResetEnv (games with FIRE) -> WarpFrame(dim: gray, INTER_AREA)
    -> ClipRewardEnv (sign) -> FrameStack(4, NHWC or NCHW) -> TestEnv (test=True)

``get_wrapper_by_cls(env, MonitorEnv)`` finds the monitor; its ``next_episode_results()`` gives
``(reward, length)`` of each game finished since the last call. Needs ale-py and OpenCV (the
``atari`` extra).
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Iterator
from typing import Any

import cv2
import numpy as np
from gymnasium import spaces

from actorrt.compat.parl._gym import Env, Wrapper
from actorrt.compat.parl.env.compat_wrappers import CompatWrapper, get_wrapper_by_cls

__all__ = ["MonitorEnv", "get_wrapper_by_cls", "wrap_deepmind"]


def _game(env: Env[Any, Any]) -> Any:
    """The ALE environment under the wrappers (its ``ale``, ``get_action_meanings``)."""
    return env.unwrapped


class MonitorEnv(Wrapper):
    """Records each whole game's reward and length (emulator steps, no-ops included): added to
    its results at the ``reset`` that ends it, and in ``info["episode"]`` of its last step."""

    def __init__(self, env: Env[Any, Any]) -> None:
        super().__init__(env)
        self._current_reward: float | None = None
        self._num_steps = 0
        self._total_steps: int | None = None
        self._episode_rewards: list[float] = []
        self._episode_lengths: list[int] = []
        self._num_episodes = 0
        self._num_returned = 0
        self.tstart = time.time()

    def reset(self, **kwargs: Any) -> Any:
        obs = self.env.reset(**kwargs)
        if self._total_steps is None:
            self._total_steps = sum(self._episode_lengths)
        if self._current_reward is not None:
            self._episode_rewards.append(self._current_reward)
            self._episode_lengths.append(self._num_steps)
            self._num_episodes += 1
        self._current_reward = 0.0
        self._num_steps = 0
        return obs

    def step(self, action: Any) -> Any:
        obs, reward, done, info = self.env.step(action)
        if self._current_reward is None or self._total_steps is None:
            raise RuntimeError("MonitorEnv: step before reset")
        self._current_reward += reward
        self._num_steps += 1
        self._total_steps += 1
        if done:
            info["episode"] = {
                "r": self._current_reward,
                "l": self._num_steps,
                "t": round(time.time() - self.tstart, 6),
            }
        return obs, reward, done, info

    def get_episode_rewards(self) -> list[float]:
        return self._episode_rewards

    def get_episode_lengths(self) -> list[int]:
        return self._episode_lengths

    def get_total_steps(self) -> int | None:
        return self._total_steps

    def next_episode_results(self) -> Iterator[tuple[float, int]]:
        """``(reward, length)`` of each game finished since the last call."""
        for i in range(self._num_returned, len(self._episode_rewards)):
            yield self._episode_rewards[i], self._episode_lengths[i]
        self._num_returned = len(self._episode_rewards)


class NoopResetEnv(Wrapper):
    """At reset, 1 to ``noop_max`` no-op steps (drawn from the game's generator)."""

    def __init__(self, env: Env[Any, Any], noop_max: int = 30) -> None:
        super().__init__(env)
        self.noop_max = noop_max
        self.override_num_noops: int | None = None
        self.noop_action = 0
        if _game(env).get_action_meanings()[0] != "NOOP":
            raise ValueError("NoopResetEnv: the game's action 0 must be NOOP")

    def reset(self, **kwargs: Any) -> Any:
        self.env.reset(**kwargs)
        noops = self.override_num_noops or int(self.unwrapped.np_random.integers(1, self.noop_max + 1))
        obs = None
        for _ in range(noops):
            obs, _, done, _ = self.env.step(self.noop_action)
            if done:
                obs = self.env.reset(**kwargs)
        return obs


class FireResetEnv(Wrapper):
    """At reset, FIRE (and action 2), for games that wait for it."""

    def reset(self, **kwargs: Any) -> Any:
        self.env.reset(**kwargs)
        obs = None
        for action in (1, 2):
            obs, _, done, _ = self.env.step(action)
            if done:
                self.env.reset(**kwargs)
        return obs


class EpisodicLifeEnv(Wrapper):
    """A lost life ends the episode for the agent; the game is reset only when it is over."""

    def __init__(self, env: Env[Any, Any]) -> None:
        super().__init__(env)
        self.lives = 0
        self.was_real_done = True

    def _lives(self) -> int:
        return int(_game(self.env).ale.lives())

    def step(self, action: Any) -> Any:
        obs, reward, done, info = self.env.step(action)
        self.was_real_done = done
        lives = self._lives()
        if 0 < lives < self.lives:  # lives stay 0 for a few frames in some games: end once
            done = True
        self.lives = lives
        return obs, reward, done, info

    def reset(self, **kwargs: Any) -> Any:
        if self.was_real_done:
            obs = self.env.reset(**kwargs)
        else:
            obs, _, _, _ = self.env.step(0)  # past the lost life
        self.lives = self._lives()
        return obs


class MaxAndSkipEnv(Wrapper):
    """Each action repeated ``skip`` times: the rewards summed, the observation the pixel-wise
    max of the last two frames."""

    def __init__(self, env: Env[Any, Any], skip: int = 4) -> None:
        super().__init__(env)
        shape = env.observation_space.shape or ()
        self._obs_buffer = np.zeros((2, *shape), dtype=np.uint8)
        self._skip = skip

    def step(self, action: Any) -> Any:
        total_reward = 0.0
        done = False
        info: dict[str, Any] = {}
        for i in range(self._skip):
            obs, reward, done, info = self.env.step(action)
            if i >= self._skip - 2:
                self._obs_buffer[i - (self._skip - 2)] = obs
            total_reward += reward
            if done:
                break
        return self._obs_buffer.max(axis=0), total_reward, done, info


class WarpFrame(Wrapper):
    """Frames to ``dim x dim`` grayscale (OpenCV: RGB to gray, then area resampling)."""

    def __init__(self, env: Env[Any, Any], dim: int) -> None:
        super().__init__(env)
        self.width = self.height = dim
        self.observation_space = spaces.Box(low=0, high=255, shape=(dim, dim), dtype=np.uint8)

    def observation(self, frame: np.ndarray) -> np.ndarray:
        gray = cv2.cvtColor(frame, cv2.COLOR_RGB2GRAY)
        return np.asarray(cv2.resize(gray, (self.width, self.height), interpolation=cv2.INTER_AREA))

    def reset(self, **kwargs: Any) -> Any:
        return self.observation(self.env.reset(**kwargs))

    def step(self, action: Any) -> Any:
        obs, reward, done, info = self.env.step(action)
        return self.observation(obs), reward, done, info


class ClipRewardEnv(Wrapper):
    """Rewards binned to -1, 0, +1 by their sign."""

    def step(self, action: Any) -> Any:
        obs, reward, done, info = self.env.step(action)
        return obs, self.reward(reward), done, info

    def reward(self, reward: float) -> float:
        return float(np.sign(reward))


class FrameStack(Wrapper):
    """The last ``k`` frames stacked: ``[H, W, k]`` (``NHWC``) or ``[k, H, W]`` (``NCHW``)."""

    def __init__(self, env: Env[Any, Any], k: int, obs_format: str = "NHWC") -> None:
        super().__init__(env)
        if obs_format not in ("NHWC", "NCHW"):
            raise ValueError(f"FrameStack: obs_format must be 'NHWC' or 'NCHW', got {obs_format!r}")
        self.k = k
        self.obs_format = obs_format
        self.frames: deque[np.ndarray] = deque(maxlen=k)
        h, w = (env.observation_space.shape or (0, 0))[:2]
        shape = (h, w, k) if obs_format == "NHWC" else (k, h, w)
        self.observation_space = spaces.Box(low=0, high=255, shape=shape, dtype=np.uint8)

    def reset(self, **kwargs: Any) -> Any:
        obs = self.env.reset(**kwargs)
        for _ in range(self.k):
            self.frames.append(obs)
        return self._get_ob()

    def step(self, action: Any) -> Any:
        obs, reward, done, info = self.env.step(action)
        self.frames.append(obs)
        return self._get_ob(), reward, done, info

    def _get_ob(self) -> np.ndarray:
        return np.stack(self.frames, axis=2 if self.obs_format == "NHWC" else 0)


class TestEnv(Wrapper):
    """For evaluation: ``get_real_done()`` turns True at the reset after every
    ``test_episodes`` whole games, and ``get_eval_rewards()`` then gives their rewards."""

    def __init__(self, env: Env[Any, Any], test_episodes: int = 3) -> None:
        super().__init__(env)
        monitor = get_wrapper_by_cls(env, MonitorEnv)
        if monitor is None:
            raise ValueError("TestEnv: no MonitorEnv below it")
        self._monitor = monitor
        self._test_episodes = test_episodes
        self._was_real_done = False
        self._eval_rewards: list[float] | None = None
        self._end_episode = len(monitor.get_episode_rewards()) + test_episodes

    def reset(self, **kwargs: Any) -> Any:
        obs = self.env.reset(**kwargs)
        if len(self._monitor.get_episode_rewards()) >= self._end_episode:
            self._was_real_done = True
            self._eval_rewards = self._monitor.get_episode_rewards()[-self._test_episodes :]
            self._end_episode += self._test_episodes
        else:
            self._was_real_done = False
            self._eval_rewards = None
        return obs

    def get_eval_rewards(self) -> list[float] | None:
        return self._eval_rewards

    def get_real_done(self) -> bool:
        return self._was_real_done


def wrap_deepmind(
    env: Env[Any, Any],
    dim: int = 84,
    framestack: bool = True,
    obs_format: str = "NHWC",
    test: bool = False,
    test_episodes: int = 3,
) -> Wrapper:
    """The DeepMind Atari preprocessing of a gymnasium Atari environment (``gym.make(
    "PongNoFrameskip-v4")``), old gym's API (module docstring for the order)."""
    wrapped: Wrapper = CompatWrapper(env)
    wrapped = MonitorEnv(wrapped)
    wrapped = NoopResetEnv(wrapped, noop_max=30)
    spec = env.spec
    if spec is not None and "NoFrameskip" in spec.id:
        wrapped = MaxAndSkipEnv(wrapped, skip=4)
    wrapped = EpisodicLifeEnv(wrapped)
    if "FIRE" in _game(env).get_action_meanings():
        wrapped = FireResetEnv(wrapped)
    wrapped = WarpFrame(wrapped, dim)
    wrapped = ClipRewardEnv(wrapped)
    if framestack:
        wrapped = FrameStack(wrapped, 4, obs_format)
    if test:
        wrapped = TestEnv(wrapped, test_episodes)
    return wrapped
