"""Environments that fail on purpose, for the learners' failure tests: built by ``env_fn`` in
the workers' own processes."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import gymnasium as gym


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
