"""PARL's ``ActionMappingWrapper``: a policy's actions in [-1, 1] mapped linearly onto the
environment's box ``[low, high]`` (per dimension), then clipped to it."""

from __future__ import annotations

from typing import Any

import numpy as np

from actorrt.compat.parl._gym import Env, Wrapper

__all__ = ["ActionMappingWrapper"]

_SLACK = 1e-3  # PARL accepts actions this far outside [-1, 1]


class ActionMappingWrapper(Wrapper):
    def __init__(self, env: Env[Any, Any]) -> None:
        super().__init__(env)
        space = env.action_space
        if not (hasattr(space, "low") and hasattr(space, "high")):
            raise TypeError(f"ActionMappingWrapper: the action space must be a Box, got {space}")
        self.low_bound = np.asarray(space.low)
        self.high_bound = np.asarray(space.high)
        if not np.all(self.high_bound > self.low_bound):
            raise ValueError(f"ActionMappingWrapper: the box must have high > low, got {space}")
        limit = getattr(env, "_max_episode_steps", None)
        if limit is not None:
            self._max_episode_steps = int(limit)

    def step(self, model_output_act: Any) -> Any:
        act = np.asarray(model_output_act)
        if not np.all((act <= 1.0 + _SLACK) & (act >= -1.0 - _SLACK)):
            raise ValueError(f"ActionMappingWrapper: the action should be in range [-1.0, 1.0], got {act}")
        mapped = self.low_bound + (act + 1.0) * (self.high_bound - self.low_bound) / 2.0
        return self.env.step(np.clip(mapped, self.low_bound, self.high_bound))
