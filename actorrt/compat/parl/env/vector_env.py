"""PARL's ``VectorEnv``: old-API environments (``CompatWrapper``'d) stepped as one; each is reset
as soon as it is done, and its first observation then stands in for the last."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = ["VectorEnv"]


class VectorEnv:
    def __init__(self, envs: Sequence[Any]) -> None:
        self.envs = list(envs)
        self.envs_num = len(self.envs)

    def reset(self) -> list[Any]:
        """The first observation of each environment."""
        return [env.reset() for env in self.envs]

    def step(self, actions: Sequence[Any]) -> tuple[list[Any], list[Any], list[bool], list[Any]]:
        """``actions[i]`` to environment ``i``: lists of observations, rewards, dones, infos."""
        if len(actions) != self.envs_num:
            raise ValueError(f"VectorEnv.step: {len(actions)} actions for {self.envs_num} environments")
        obs_batch, reward_batch, done_batch, info_batch = [], [], [], []
        for env, action in zip(self.envs, actions, strict=True):
            obs, reward, done, info = env.step(action)
            if done:
                obs = env.reset()
            obs_batch.append(obs)
            reward_batch.append(reward)
            done_batch.append(done)
            info_batch.append(info)
        return obs_batch, reward_batch, done_batch, info_batch
