"""``gym`` for PARL's scripts, on gymnasium: what ``import gym`` gives under the runner where gym
is not installed (gym 0.26, the last gym, does not run on numpy 2).

gymnasium is gym 0.26's API (``reset`` returns ``(obs, info)``, ``step`` five values), which is
what PARL 2.x scripts expect of ``gym.make``: they wrap it in ``parl.env.CompatWrapper`` for the
old API. What differs from gym 0.26, and is given here as gym gave it:

- ``gym.Wrapper`` forwards a public name it does not have to the environment it wraps, so
  ``wrap_deepmind(env).seed(0)`` reaches ``CompatWrapper.seed`` through the wrappers above it;
  every gymnasium wrapper counts as a ``gym.Wrapper`` (``isinstance``), so a walk down ``.env``
  goes through them all. ``Observation``/``Reward``/``ActionWrapper`` take either API from the
  environment below them and give the same back;
- ``gym.make`` finds Atari ids (``PongNoFrameskip-v4``) through ale-py, and a MuJoCo id that
  gymnasium no longer runs (``-v1``, removed; ``-v2``/``-v3``, which need mujoco-py) is made as
  its newest version, said once (``-v4`` runs as it is: the environment PARL's benchmarks used).

Everything else is gymnasium's: ``gym.spaces``, ``gym.Env``, ``gym.wrappers``... (the runner maps
``gym.X`` onto ``gymnasium.X``).
"""

from __future__ import annotations

import threading
from typing import Any

import gymnasium
from gymnasium import Env, Space, spaces
from gymnasium.envs.registration import EnvSpec, parse_env_id

from actorrt.compat.parl._hooks import notice

__all__ = ["ActionWrapper", "Env", "ObservationWrapper", "RewardWrapper", "Space", "Wrapper", "make", "spaces"]

__version__ = gymnasium.__version__
__path__: list[str] = []  # a package to the import system: its submodules are gymnasium's (the runner's finder)

_MUJOCO = "gymnasium.envs.mujoco"
_ale_lock = threading.Lock()
_ale_registered = False


def __getattr__(name: str) -> Any:
    """Any other gym name is gymnasium's."""
    return getattr(gymnasium, name)


def make(id: str | EnvSpec, **kwargs: Any) -> Env[Any, Any]:
    """``gymnasium.make``, with the ids of gym's time (Atari through ale-py, MuJoCo's older
    versions resolved to the newest)."""
    if isinstance(id, str):
        id = resolve(id)
    return gymnasium.make(id, **kwargs)


def resolve(env_id: str) -> str:
    """The gymnasium id that makes what gym made for ``env_id``."""
    registry = gymnasium.envs.registry
    if env_id not in registry:
        _register_atari()
    namespace, name, version = parse_env_id(env_id)
    spec = registry.get(env_id)
    if spec is not None and not (_is_mujoco(spec) and version is not None and version < 4):
        return env_id
    versions = {
        s.version: s
        for s in registry.values()
        if s.namespace == namespace and s.name == name and s.version is not None and _is_mujoco(s)
    }
    if not versions or (version is not None and version >= max(versions)):
        return env_id  # not a MuJoCo id, or nothing newer: gymnasium says what is wrong with it
    newest = versions[max(versions)].id
    why = "needs mujoco-py" if spec is not None else "is gone from gymnasium"
    notice(f"make:{env_id}", f"gym.make({env_id!r}): {env_id} {why}; making {newest}, its newest version")
    return newest


def _is_mujoco(spec: EnvSpec) -> bool:
    """A MuJoCo environment of gymnasium's, or one of the mujoco-py ones it no longer runs."""
    entry = spec.entry_point
    if callable(entry):
        return getattr(entry, "__name__", "") == "_raise_mujoco_py_error"
    return isinstance(entry, str) and entry.startswith(_MUJOCO)


def _register_atari() -> None:
    """Register ale-py's Atari ids with gymnasium (gym found them by itself), once."""
    global _ale_registered
    with _ale_lock:
        if _ale_registered:
            return
        _ale_registered = True
        try:
            import ale_py
        except ImportError:
            return
        gymnasium.register_envs(ale_py)


class _AnyWrapper(type):
    """``isinstance(w, gym.Wrapper)`` for every gymnasium wrapper, as every wrapper was gym's."""

    def __instancecheck__(cls, instance: Any) -> bool:
        if cls is Wrapper:
            return isinstance(instance, gymnasium.Wrapper)
        return super().__instancecheck__(instance)

    def __subclasscheck__(cls, subclass: type) -> bool:
        if cls is Wrapper:
            return issubclass(subclass, gymnasium.Wrapper)
        return super().__subclasscheck__(subclass)


class Wrapper(gymnasium.Wrapper[Any, Any, Any, Any], metaclass=_AnyWrapper):
    """gym's ``Wrapper``: a name the wrapper does not have is looked up on the environment it
    wraps (public names only, as in gym), and ``reset`` passes its keywords on as they are.
    ``step`` and ``reset`` give what the environment below gives: gymnasium's API, or old gym's
    above a ``parl.env.CompatWrapper``."""

    env: Any  # a gymnasium environment, or a wrapper in old gym's API

    def step(self, action: Any) -> Any:
        return self.env.step(action)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_") or "env" not in self.__dict__:
            raise AttributeError(f"{type(self).__name__} has no attribute {name!r}")
        return getattr(self.__dict__["env"], name)

    def reset(self, **kwargs: Any) -> Any:
        return self.env.reset(**kwargs)


def _is_reset_pair(out: Any) -> bool:
    """``reset`` gave gymnasium's ``(obs, info)`` rather than gym's ``obs``."""
    return isinstance(out, tuple) and len(out) == 2 and isinstance(out[1], dict)


class ObservationWrapper(Wrapper):
    """``observation(obs)`` applied to what ``reset`` and ``step`` return, in either API."""

    def reset(self, **kwargs: Any) -> Any:
        out = self.env.reset(**kwargs)
        if _is_reset_pair(out):
            return self.observation(out[0]), out[1]
        return self.observation(out)

    def step(self, action: Any) -> Any:
        obs, *rest = self.env.step(action)
        return (self.observation(obs), *rest)

    def observation(self, observation: Any) -> Any:
        raise NotImplementedError


class RewardWrapper(Wrapper):
    """``reward(r)`` applied to what ``step`` returns, in either API."""

    def step(self, action: Any) -> Any:
        obs, reward, *rest = self.env.step(action)
        return (obs, self.reward(reward), *rest)

    def reward(self, reward: Any) -> Any:
        raise NotImplementedError


class ActionWrapper(Wrapper):
    """``action(a)`` applied before ``step``."""

    def step(self, action: Any) -> Any:
        return self.env.step(self.action(action))

    def action(self, action: Any) -> Any:
        raise NotImplementedError
