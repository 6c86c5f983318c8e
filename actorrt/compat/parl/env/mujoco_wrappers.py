"""PARL's ``wrap_rms``: a MuJoCo environment with running-mean-std normalisation, old gym's API.

    CompatWrapper -> TimeLimitMaskEnv -> MonitorEnv -> VecNormalizeEnv

``TimeLimitMaskEnv`` marks the step that hit the time limit (``info["bad_transition"]``);
``MonitorEnv`` puts each episode's raw reward and length in ``info["episode"]`` of its last
step; ``VecNormalizeEnv`` standardises observations by their running mean and variance (clipped
to +-10) and divides rewards by the running standard deviation of the discounted return (clipped
to +-10). The statistics are ``rl.normalization.RunningMeanStd`` (PARL's count prior of 1e-4:
mean 0, variance 1 before the first observation); a test environment takes the training one's
observation statistics (``ob_rms``) and does not update them.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from actorrt.compat.parl._gym import Env, Wrapper
from actorrt.compat.parl.env.compat_wrappers import CompatWrapper, get_wrapper_by_cls
from rl.normalization import RunningMeanStd

__all__ = ["get_ob_rms", "get_wrapper_by_cls", "wrap_rms"]

_PRIOR_COUNT = 1e-4  # PARL's: a statistic starts as mean 0, variance 1 seen this many times


def _statistics(shape: tuple[int, ...]) -> RunningMeanStd:
    rms = RunningMeanStd(shape)
    rms.merge(np.zeros(shape), np.ones(shape), _PRIOR_COUNT)
    return rms


class TimeLimitMaskEnv(Wrapper):
    """``info["bad_transition"] = True`` on the step where the episode hit its time limit (a
    value target should bootstrap there)."""

    def step(self, action: Any) -> Any:
        obs, reward, done, info = self.env.step(action)
        limit = getattr(self.env, "_max_episode_steps", None)
        if done and limit is not None and limit == getattr(self.env, "_elapsed_steps", None):
            info["bad_transition"] = True
        return obs, reward, done, info


class MonitorEnv(Wrapper):
    """``info["episode"] = {"r": reward, "l": length, "t": seconds}`` on an episode's last step
    (raw rewards, before normalisation)."""

    def __init__(self, env: Env[Any, Any]) -> None:
        super().__init__(env)
        self.tstart = time.time()
        self.rewards: list[float] = []

    def step(self, action: Any) -> Any:
        obs, reward, done, info = self.env.step(action)
        self.rewards.append(reward)
        if done:
            info["episode"] = {
                "r": round(float(sum(self.rewards)), 6),
                "l": len(self.rewards),
                "t": round(time.time() - self.tstart, 6),
            }
            self.rewards = []
        return obs, reward, done, info

    def reset(self, **kwargs: Any) -> Any:
        self.rewards = []
        return self.env.reset(**kwargs)


class VecNormalizeEnv(Wrapper):
    """Observations standardised and rewards scaled by running statistics (module docstring)."""

    def __init__(
        self,
        env: Env[Any, Any],
        ob: bool = True,
        ret: bool = True,
        clipob: float = 10.0,
        cliprew: float = 10.0,
        gamma: float = 0.99,
        epsilon: float = 1e-8,
    ) -> None:
        super().__init__(env)
        shape = env.observation_space.shape or ()
        self.ob_rms: RunningMeanStd | None = _statistics((shape[0],)) if ob else None
        self.ret_rms: RunningMeanStd | None = _statistics(()) if ret else None
        self.clipob = clipob
        self.cliprew = cliprew
        self.gamma = gamma
        self.epsilon = epsilon
        self.ret = np.zeros(1)
        self.training = True

    def step(self, action: Any) -> Any:
        obs, reward, done, info = self.env.step(action)
        self.ret = self.ret * self.gamma + reward
        obs = self._obfilt(obs)
        if self.ret_rms is not None:
            self.ret_rms.update(self.ret)
            reward = np.clip(reward / np.sqrt(float(self.ret_rms.var) + self.epsilon), -self.cliprew, self.cliprew)
        if done:
            self.ret = np.zeros(1)
        return obs, reward, done, info

    def reset(self, **kwargs: Any) -> Any:
        self.ret = np.zeros(1)
        return self._obfilt(self.env.reset(**kwargs))

    def _obfilt(self, obs: Any, update: bool = True) -> Any:
        if self.ob_rms is None:
            return obs
        batch = np.asarray(obs)
        single = batch.ndim == 1
        if single:
            batch = batch[None]
        if self.training and update:
            self.ob_rms.update(batch)
        out = self.ob_rms.normalize(batch, self.clipob, self.epsilon)
        return out[0] if single else out

    def get_ob_rms(self) -> RunningMeanStd | None:
        return self.ob_rms

    def set_ob_rms(self, ob_rms: RunningMeanStd | None) -> None:
        self.ob_rms = ob_rms

    def train(self) -> None:
        self.training = True

    def eval(self) -> None:
        self.training = False


def get_ob_rms(env: Any) -> RunningMeanStd | None:
    """The observation statistics of ``env``'s ``VecNormalizeEnv`` (None without one)."""
    normalizer = get_wrapper_by_cls(env, VecNormalizeEnv)
    return normalizer.get_ob_rms() if normalizer is not None else None


def wrap_rms(
    env: Env[Any, Any], gamma: float | None, test: bool = False, ob_rms: RunningMeanStd | None = None
) -> Wrapper:
    """``env`` normalised for training (``gamma``: the return's discount), or for testing with
    the training environment's ``ob_rms`` (``test=True``; rewards left raw)."""
    wrapped: Wrapper = MonitorEnv(TimeLimitMaskEnv(CompatWrapper(env)))
    if test:
        normalizer = VecNormalizeEnv(wrapped, ret=False)
        normalizer.eval()
        normalizer.set_ob_rms(ob_rms)
        return normalizer
    return VecNormalizeEnv(wrapped, gamma=0.99 if gamma is None else gamma)
