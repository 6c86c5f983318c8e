"""PARL's ``ReplayMemory``, on ``rl.UniformReplay``: one-step transitions of flat observations,
sampled uniformly with numpy's global random state (``np.random.seed`` makes it repeat, as in
PARL); ``save``/``load`` read and write PARL's ``.npz`` layout."""

from __future__ import annotations

from typing import Any

import numpy as np

from actorrt.compat.parl.utils import logger
from rl.replay import UniformReplay

__all__ = ["ReplayMemory"]

Batch = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]


class _Field:
    """One of PARL's arrays (``rpm.obs``, ``rpm.action``...): the replay's array underneath,
    read and replaced (``load_from_d4rl``) through PARL's name."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __get__(self, memory: Any, owner: type | None = None) -> np.ndarray:
        array: np.ndarray = getattr(memory._replay, self.name)
        return array

    def __set__(self, memory: Any, value: np.ndarray) -> None:
        setattr(memory._replay, self.name, value)


class ReplayMemory:
    """``ReplayMemory(max_size, obs_dim, act_dim)``: observations ``[obs_dim]`` float32; actions
    int32 scalars when ``act_dim == 0`` (discrete), else ``[act_dim]`` float32; rewards float32;
    terminals bool. ``append`` one transition, overwriting the oldest once full;
    ``sample_batch(n)`` -> ``(obs, action, reward, next_obs, terminal)``."""

    def __init__(self, max_size: int, obs_dim: int, act_dim: int) -> None:
        self.max_size = int(max_size)
        self.obs_dim = obs_dim
        self.act_dim = act_dim
        discrete = act_dim == 0
        self._replay = UniformReplay(
            self.max_size,
            (int(obs_dim),),
            () if discrete else (int(act_dim),),
            action_dtype=np.int32 if discrete else np.float32,
        )

    # PARL's arrays, by its names
    obs = _Field("obs")
    action = _Field("actions")
    reward = _Field("rewards")
    next_obs = _Field("next_obs")
    terminal = _Field("terminated")

    @property
    def _curr_size(self) -> int:
        return len(self._replay)

    @property
    def _curr_pos(self) -> int:
        return self._replay._pos

    def append(self, obs: Any, act: Any, reward: float, next_obs: Any, terminal: bool) -> None:
        """Add one transition at the end, overwriting the oldest once full."""
        self._replay.add(
            np.asarray(obs, np.float32).reshape(1, -1),
            np.asarray(act, self.action.dtype).reshape(1, *self.action.shape[1:]),
            np.asarray([reward], np.float32),
            np.asarray(next_obs, np.float32).reshape(1, -1),
            np.asarray([terminal], bool),
        )

    def make_index(self, batch_size: int) -> np.ndarray:
        """``batch_size`` indexes drawn uniformly (with replacement) from those filled."""
        if len(self._replay) == 0:
            raise ValueError("ReplayMemory: sample from an empty memory")
        return np.random.randint(len(self._replay), size=batch_size)

    def sample_batch_by_index(self, batch_idx: Any) -> Batch:
        return (
            self.obs[batch_idx],
            self.action[batch_idx],
            self.reward[batch_idx],
            self.next_obs[batch_idx],
            self.terminal[batch_idx],
        )

    def sample_batch(self, batch_size: int) -> Batch:
        return self.sample_batch_by_index(self.make_index(batch_size))

    def size(self) -> int:
        return len(self._replay)

    def __len__(self) -> int:
        return len(self._replay)

    def save(self, pathname: str) -> None:
        """Save to ``pathname`` (numpy's ``.npz``, PARL's keys: a PARL memory loads it)."""
        other = np.array([len(self._replay), self._replay._pos], dtype=np.int32)
        np.savez(
            pathname,
            obs=self.obs,
            action=self.action,
            reward=self.reward,
            terminal=self.terminal,
            next_obs=self.next_obs,
            other=other,
        )

    def load(self, pathname: str) -> None:
        """Load what ``save`` (here or in PARL) wrote; a bigger memory is cut to this one's size."""
        data = np.load(pathname)
        size, pos = (int(x) for x in data["other"])
        if size > self.max_size:
            logger.warning("loading from a bigger size rpm!")
        size = min(size, self.max_size)
        for name in ("obs", "action", "reward", "terminal", "next_obs"):
            getattr(self, name)[:size] = data[name][:size]
        self._set_counts(size, min(pos, self.max_size - 1))
        logger.info(f"[load rpm]memory loade from {pathname}")

    def load_from_d4rl(self, dataset: dict[str, np.ndarray]) -> None:
        """Take a D4RL ``qlearning_dataset`` (``observations``, ``actions``, ``rewards``,
        ``next_observations``, ``terminals``) as the memory's content."""
        logger.info("Dataset Info: ")
        for key, value in dataset.items():
            logger.info(f"key: {key},\tshape: {value.shape},\tdtype: {value.dtype}")
        for key in ("observations", "next_observations", "actions", "rewards", "terminals"):
            if key not in dataset:
                raise KeyError(f"load_from_d4rl: the dataset has no {key!r}")
        size = int(dataset["terminals"].shape[0])
        if size > self.max_size:
            raise ValueError(f"load_from_d4rl: {size} transitions do not fit max_size={self.max_size}")
        self.obs = dataset["observations"]
        self.next_obs = dataset["next_observations"]
        self.action = dataset["actions"]
        self.reward = dataset["rewards"]
        self.terminal = dataset["terminals"]
        self._set_counts(size, size % self.max_size)
        logger.info(f"Number of terminals on: {self.terminal.sum()}")

    def _set_counts(self, size: int, pos: int) -> None:
        self._replay._size = size
        self._replay._pos = pos
