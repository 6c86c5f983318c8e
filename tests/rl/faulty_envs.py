"""Environments that fail on purpose, for the learners' failure tests: built by ``env_fn`` in
the workers' own processes."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import Any

import gymnasium as gym

import rl
from rl.collector import env_spaces


class _DiesOnStep(gym.Wrapper):
    def step(self, action: Any) -> Any:
        os._exit(3)  # the whole worker process, as a segfaulting simulator would


def dying_cartpole() -> gym.Env:
    """CartPole whose first step kills the process that steps it."""
    return _DiesOnStep(gym.make("CartPole-v1"))


class _RaisesOnStep(gym.Wrapper):
    def step(self, action: Any) -> Any:
        raise RuntimeError("this env's step is broken")


@dataclass(frozen=True)
class OneProcessOnly:
    """An ``env_fn``: the first process to build an env claims ``marker`` (a file that must not
    exist yet); in every other process building one raises, or, with ``broken_step``, the first
    env built in the claiming process raises on its first step (and the others work)."""

    marker: str
    broken_step: bool = False

    def __call__(self) -> gym.Env:
        try:
            fd = os.open(self.marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            with open(self.marker) as f:
                owner = int(f.read() or 0)
            if owner != os.getpid() and not self.broken_step:
                raise RuntimeError(f"process {os.getpid()} may not build an env here") from None
            return gym.make("CartPole-v1")
        with os.fdopen(fd, "w") as f:
            f.write(str(os.getpid()))
        env = gym.make("CartPole-v1")
        return _RaisesOnStep(env) if self.broken_step else env


class _SlowToSetWeights(rl.Agent):
    def __init__(self, algorithm: Any, setting: str, seconds: float) -> None:
        super().__init__(algorithm)
        self.setting, self.seconds = setting, seconds

    def set_weights(self, weights: Any) -> None:
        with open(self.setting, "w") as f:
            f.write(str(os.getpid()))
        time.sleep(self.seconds)
        super().set_weights(weights)


@dataclass(frozen=True)
class SlowReplacement:
    """A ``make_agent`` for SAC on Pendulum: an agent built once ``marker`` exists (a worker
    started after the test made it) takes ``seconds`` to set its weights, and first writes
    ``marker + ".setting"``: a window in which a replacement is half set up."""

    marker: str
    seconds: float = 4.0

    def __call__(self) -> rl.Agent:
        obs, act = env_spaces(rl.CollectorConfig("Pendulum-v1"))
        algorithm = rl.SAC(rl.SquashedGaussianActor(obs, act, (32, 32)), rl.TwinQCritic(obs, act, (32, 32)))
        if os.path.exists(self.marker):
            return _SlowToSetWeights(algorithm, self.marker + ".setting", self.seconds)
        return rl.Agent(algorithm)


class _FailsToSetWeights(rl.Agent):
    def __init__(self, algorithm: Any, after: int) -> None:
        super().__init__(algorithm)
        self.after, self.calls = after, 0

    def set_weights(self, weights: Any) -> None:
        self.calls += 1
        if self.calls > self.after:
            raise RuntimeError(f"set_weights broke on call {self.calls}")
        super().set_weights(weights)


@dataclass(frozen=True)
class FailingSetWeights:
    """A ``make_agent`` for A2C on CartPole whose ``set_weights`` raises after ``after`` calls."""

    after: int

    def __call__(self) -> rl.Agent:
        obs, act = env_spaces(rl.CollectorConfig("CartPole-v1"))
        return _FailsToSetWeights(rl.A2C(rl.ActorCritic(obs, act)), self.after)
