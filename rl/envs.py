"""Small environments written for tests and examples.

:class:`PointReach`: a goal-conditioned point-reaching task with a sparse reward, in the
interface of gymnasium-robotics' goal environments (dict observations ``observation`` /
``achieved_goal`` / ``desired_goal`` and a vectorised ``compute_reward``), so that hindsight
relabelling (:mod:`rl.her`) can recompute rewards for goals the agent did not aim at.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

__all__ = ["PointReach"]


class PointReach(gym.Env[dict[str, np.ndarray], np.ndarray]):
    """Move a point in ``[-1, 1]^dim`` to a random goal within ``max_steps`` steps.

    - action ``a`` in ``[-1, 1]^dim``: the point moves by ``step_size * a`` (then clipped to the box);
    - reward ``0`` when the point is within ``distance_threshold`` of the goal, else ``-1``;
    - the episode is never *terminated* (reaching the goal does not end it, as in the Fetch
      tasks); it is *truncated* after ``max_steps`` steps. ``info["is_success"]`` says whether
      the point is at the goal.

    Start and goal are drawn uniformly and independently, so a random policy rarely sees a
    reward of 0: the task is hard without hindsight relabelling and easy with it.
    """

    # ``metadata`` is gym.Env's own default, ``{"render_modes": []}``: nothing to render.

    def __init__(
        self, dim: int = 2, max_steps: int = 50, step_size: float = 0.1, distance_threshold: float = 0.05
    ) -> None:
        self.dim = dim
        self.max_steps = max_steps
        self.step_size = step_size
        self.distance_threshold = distance_threshold
        box = gym.spaces.Box(-1.0, 1.0, (dim,), np.float32)
        # gymnasium types a Dict space as Space[dict[str, Space]]; its elements are dicts of arrays.
        self.observation_space = gym.spaces.Dict(  # type: ignore[assignment]
            {"observation": box, "achieved_goal": box, "desired_goal": box}
        )
        self.action_space = gym.spaces.Box(-1.0, 1.0, (dim,), np.float32)
        self._pos = np.zeros(dim, np.float32)
        self._goal = np.zeros(dim, np.float32)
        self._t = 0

    def _obs(self) -> dict[str, np.ndarray]:
        return {"observation": self._pos.copy(), "achieved_goal": self._pos.copy(), "desired_goal": self._goal.copy()}

    def compute_reward(self, achieved_goal: np.ndarray, desired_goal: np.ndarray, info: Any = None) -> np.ndarray:
        """``0`` within ``distance_threshold`` of the goal, ``-1`` otherwise; any leading dims."""
        distance = np.linalg.norm(np.asarray(achieved_goal) - np.asarray(desired_goal), axis=-1)
        return -(distance > self.distance_threshold).astype(np.float32)

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        super().reset(seed=seed)
        self._pos = self.np_random.uniform(-1, 1, self.dim).astype(np.float32)
        self._goal = self.np_random.uniform(-1, 1, self.dim).astype(np.float32)
        self._t = 0
        return self._obs(), {"is_success": self._success()}

    def _success(self) -> bool:
        return bool(np.linalg.norm(self._pos - self._goal) <= self.distance_threshold)

    def step(self, action: np.ndarray) -> tuple[dict[str, np.ndarray], float, bool, bool, dict[str, Any]]:
        a = np.clip(np.asarray(action, np.float32), -1.0, 1.0)
        self._pos = np.clip(self._pos + self.step_size * a, -1.0, 1.0).astype(np.float32)
        self._t += 1
        reward = float(self.compute_reward(self._pos, self._goal))
        return self._obs(), reward, False, self._t >= self.max_steps, {"is_success": self._success()}
