"""PARL's ``CompatWrapper``: a gymnasium environment used as old gym's.

``reset()`` returns the observation; ``step(a)`` returns ``(obs, reward, done, info)`` with
``done`` when the episode terminated or was truncated (``info["TimeLimit.truncated"]`` says
which, as old gym's ``TimeLimit`` did), or when it reached the wrapped environment's
``_max_episode_steps``; ``seed(s)`` seeds the next ``reset``, as old gym's ``env.seed(s)`` did.
"""

from __future__ import annotations

from typing import Any, TypeVar

from actorrt.compat.parl._gym import Env, Wrapper

__all__ = ["V_GYM_CHANGED", "V_NPRANDOM_CHANGED", "CompatWrapper", "get_wrapper_by_cls", "is_gym_version_ge"]

W = TypeVar("W")

V_GYM_CHANGED = "0.26.0"
V_NPRANDOM_CHANGED = "0.22.0"
_NO_SEED = "without_setting"  # PARL's value of random_seed before seed()


def is_gym_version_ge(compare_version: str) -> bool:
    """Whether the gym in use is at least ``compare_version``: gymnasium is gym 0.26's API, so
    this answers as gym 0.26 would (True for 0.26.0 and older versions)."""

    def parts(version: str) -> list[int]:
        return [int(p) if p.isdigit() else 0 for p in version.split(".")[:3]]

    return parts("0.26.2") >= parts(compare_version)


class CompatWrapper(Wrapper):
    def __init__(self, env: Env[Any, Any]) -> None:
        super().__init__(env)
        limit = getattr(env, "_max_episode_steps", None)  # gymnasium's TimeLimit
        if limit is not None:
            self._max_episode_steps = int(limit)
        elapsed = getattr(env, "_elapsed_steps", None)
        if elapsed is not None:
            self._elapsed_steps: int = elapsed
        self.count_ep_step = 0
        self.random_seed: Any = _NO_SEED

    def seed(self, random_seed: int | None) -> None:
        """Seed the environment at its next ``reset`` (old gym's ``env.seed``)."""
        self.random_seed = random_seed

    def reset(self, **kwargs: Any) -> Any:
        if self.random_seed != _NO_SEED:
            kwargs.setdefault("seed", self.random_seed)
            self.random_seed = _NO_SEED  # once: later episodes go on from the seeded generator
        obs, _info = self.env.reset(**kwargs)
        self.count_ep_step = 0
        return obs

    def step(self, action: Any) -> Any:
        self.count_ep_step += 1
        obs, reward, terminated, truncated, info = self.env.step(action)
        elapsed = getattr(self.env, "_elapsed_steps", None)
        if elapsed is not None:
            self._elapsed_steps = elapsed
        limit = getattr(self, "_max_episode_steps", None)
        at_limit = limit is not None and self.count_ep_step >= limit
        if truncated or at_limit:
            info["TimeLimit.truncated"] = not terminated
        done = bool(terminated or truncated or at_limit)
        if done:
            self.count_ep_step = 0
        return obs, reward, done, info


def get_wrapper_by_cls(env: Any, cls: type[W]) -> W | None:
    """The first wrapper of class ``cls`` going down from ``env`` (``.env`` after ``.env``,
    through gymnasium's wrappers too), or None (PARL's, in ``atari_wrappers`` and
    ``mujoco_wrappers``)."""
    current = env
    while current is not None:
        if isinstance(current, cls):
            return current
        current = getattr(current, "env", None)
    return None
