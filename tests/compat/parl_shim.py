"""Run a PARL script on actorrt.compat.parl, for the tests, until the runner
(``python -m actorrt.compat.parl SCRIPT.py``) is merged: ``python parl_shim.py SCRIPT.py ARGS``.

It maps ``parl`` (and ``parl.*``) onto ``actorrt.compat.parl``, and puts small stand-ins for what
the runner's side brings (``gym`` as gymnasium with old gym's attribute-forwarding ``Wrapper``,
``parl.utils``'s ``logger``, ``summary`` and ``ReplayMemory``, ``parl.env``'s ``CompatWrapper`` and
``ActionMappingWrapper``) where the compat layer does not have them yet. Test-only: nothing of
it is what a user runs.

``python parl_shim.py --parl-source DIR SCRIPT.py ARGS`` runs the script on PARL's own package
from ``DIR`` instead (with ``PARL_BACKEND=torch``), only ``gym`` mapped: the other side of
``bench/parl_torch_side_by_side.py``.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import logging
import os
import runpy
import sys
import types
from pathlib import Path
from typing import Any

import gymnasium
import numpy as np

import actorrt.compat.parl as compat_parl


class _Alias(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """``parl.X`` is ``actorrt.compat.parl.X``: the same module object under both names."""

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> importlib.machinery.ModuleSpec | None:
        if name != "parl" and not name.startswith("parl."):
            return None
        real = "actorrt.compat.parl" + name[len("parl") :]
        if importlib.util.find_spec(real) is None:
            return None
        return importlib.machinery.ModuleSpec(name, self, origin=real)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        return importlib.import_module(str(spec.origin))

    def exec_module(self, module: types.ModuleType) -> None:
        pass


# -- stand-ins for the runner's side ---------------------------------------------------------


class _Logger:
    def __init__(self) -> None:
        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
        self._log = logging.getLogger("parl")

    def info(self, msg: object) -> None:
        self._log.info(msg)

    def warning(self, msg: object) -> None:
        self._log.warning(msg)

    def set_dir(self, path: str) -> None:
        pass


class _Summary:
    @staticmethod
    def add_scalar(tag: str, value: float, step: int) -> None:
        pass


class ReplayMemory:
    def __init__(self, max_size: int, obs_dim: int, act_dim: int) -> None:
        self.max_size = int(max_size)
        self.obs = np.zeros((self.max_size, obs_dim), "float32")
        self.action = np.zeros((self.max_size, act_dim), "float32")
        self.reward = np.zeros((self.max_size,), "float32")
        self.terminal = np.zeros((self.max_size,), "bool")
        self.next_obs = np.zeros((self.max_size, obs_dim), "float32")
        self._curr_size = 0
        self._curr_pos = 0

    def make_index(self, batch_size: int) -> np.ndarray:
        return np.random.randint(self._curr_size, size=batch_size)

    def sample_batch_by_index(self, idx: np.ndarray) -> tuple[np.ndarray, ...]:
        return self.obs[idx], self.action[idx], self.reward[idx], self.next_obs[idx], self.terminal[idx]

    def sample_batch(self, batch_size: int) -> tuple[np.ndarray, ...]:
        return self.sample_batch_by_index(self.make_index(batch_size))

    def append(self, obs: Any, act: Any, reward: float, next_obs: Any, terminal: Any) -> None:
        if self._curr_size < self.max_size:
            self._curr_size += 1
        self.obs[self._curr_pos] = obs
        self.action[self._curr_pos] = act
        self.reward[self._curr_pos] = reward
        self.next_obs[self._curr_pos] = next_obs
        self.terminal[self._curr_pos] = terminal
        self._curr_pos = (self._curr_pos + 1) % self.max_size

    def size(self) -> int:
        return self._curr_size


class _Wrapper:
    """A wrapper that forwards what it does not define to the environment inside."""

    def __init__(self, env: Any) -> None:
        self.env = env

    def __getattr__(self, name: str) -> Any:
        return getattr(self.env, name)


class CompatWrapper(_Wrapper):
    """gym < 0.26's API over gymnasium: ``reset() -> obs``, ``step() -> (obs, reward, done, info)``."""

    def __init__(self, env: Any) -> None:
        super().__init__(env)
        self._max_episode_steps = env.spec.max_episode_steps if env.spec else None
        self._seed: int | None = None

    def seed(self, seed: int) -> None:
        self._seed = seed

    def reset(self) -> Any:
        obs, _ = self.env.reset(seed=self._seed)
        self._seed = None
        return obs

    def step(self, action: Any) -> Any:
        obs, reward, terminated, truncated, info = self.env.step(action)
        return obs, reward, terminated or truncated, info


class ActionMappingWrapper(_Wrapper):
    """Actions in [-1, 1] mapped onto the environment's bounds."""

    def step(self, action: Any) -> Any:
        low, high = self.env.action_space.low, self.env.action_space.high
        return self.env.step(np.clip(low + (np.asarray(action) + 1.0) * 0.5 * (high - low), low, high))


class _GymWrapper(gymnasium.Wrapper[Any, Any, Any, Any]):
    """Old gym's ``Wrapper``: what it does not have is the wrapped environment's (``seed``,
    ``_max_episode_steps``), as PARL's own wrappers expect."""

    def __getattr__(self, name: str) -> Any:
        if name == "env" or name.startswith("__"):
            raise AttributeError(name)
        return getattr(self.env, name)


def _install_gym() -> None:
    if "gym" in sys.modules or importlib.util.find_spec("gym") is not None:
        return
    gym = types.ModuleType("gym")
    gym.__dict__.update({k: v for k, v in vars(gymnasium).items() if not k.startswith("__")})
    gym.__dict__.update(Wrapper=_GymWrapper, __version__=gymnasium.__version__)
    sys.modules["gym"] = gym
    sys.modules["gym.spaces"] = gymnasium.spaces


def install() -> None:
    """The alias, then the stand-ins the compat layer does not have yet."""
    sys.meta_path.insert(0, _Alias())
    if importlib.util.find_spec("actorrt.compat.parl.utils") is None:
        utils = types.ModuleType("parl.utils")
        utils.__dict__.update(logger=_Logger(), summary=_Summary(), ReplayMemory=ReplayMemory)
        sys.modules["parl.utils"] = utils
        vars(compat_parl)["utils"] = utils
    env_module = importlib.import_module("parl.env")
    for name, value in (("CompatWrapper", CompatWrapper), ("ActionMappingWrapper", ActionMappingWrapper)):
        env_module.__dict__.setdefault(name, value)
    _install_gym()


if __name__ == "__main__":
    args = sys.argv[1:]
    if args[0] == "--parl-source":
        os.environ["PARL_BACKEND"] = "torch"
        sys.path.insert(0, args[1])
        _install_gym()
        args = args[2:]
    else:
        install()
    sys.argv = args
    sys.path.insert(0, str(Path(args[0]).resolve().parent))
    runpy.run_path(args[0], run_name="__main__")
