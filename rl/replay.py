"""Replay storages for off-policy learning with continuous (or discrete) actions.

- :class:`UniformReplay`: a numpy ring buffer of one-step transitions, sampled uniformly.
- :class:`PrioritizedReplay`: proportional prioritised replay (Schaul et al. 2016) on a
  :class:`SumTree`, with importance-sampling weights.

Both keep ``terminated`` and ``truncated`` apart. A TD target bootstraps from ``next_obs``
unless the transition *terminated*; a truncated transition (a time limit) is stored with its
true final observation as ``next_obs`` and is bootstrapped like any other step. ``truncated`` is
kept only so that episodes can be told apart (and for statistics). Hindsight relabelling of
goal-conditioned episodes is in :mod:`rl.her`.
"""

from __future__ import annotations

from typing import Any, Generic, NamedTuple

import numpy as np

from rl.storage import ArrayT, Rollout

__all__ = ["PrioritizedReplay", "ReplayBatch", "SumTree", "UniformReplay"]


class ReplayBatch(NamedTuple, Generic[ArrayT]):
    """``N`` sampled transitions (numpy; :func:`rl.agent.to_torch` makes tensors of them).

    ``weights`` are the importance-sampling weights of prioritised replay (ones for uniform
    replay) and ``indices`` the slots sampled, to update their priorities after the TD step.
    """

    obs: ArrayT
    actions: ArrayT
    rewards: ArrayT
    next_obs: ArrayT
    terminated: ArrayT
    truncated: ArrayT
    weights: ArrayT
    indices: ArrayT


def _shape(name: str, shape: Any) -> tuple[int, ...]:
    """A shape given as a tuple of sizes (an int is a common slip for a one-element tuple)."""
    if isinstance(shape, (int, np.integer)) or not all(isinstance(d, (int, np.integer)) and d >= 0 for d in shape):
        raise TypeError(f"{name} must be a tuple of sizes, e.g. (3,), got {shape!r}")
    return tuple(int(d) for d in shape)


class UniformReplay:
    """Fixed-capacity ring buffer of transitions in preallocated numpy arrays; uniform sampling.

    Not thread-safe: add and sample from one thread (the learner's). A pickle of a replay that
    has not wrapped yet holds only its filled rows (an empty replay of a million slots is about
    1 KB, not hundreds of MB, on its way to a replay actor); unpickling allocates the
    rest again.
    """

    _ARRAYS = ("obs", "next_obs", "actions", "rewards", "terminated", "truncated")

    def __init__(
        self,
        capacity: int,
        obs_shape: tuple[int, ...],
        action_shape: tuple[int, ...] = (),
        obs_dtype: np.dtype | type = np.float32,
        action_dtype: np.dtype | type = np.float32,
        seed: int | None = None,
    ) -> None:
        if int(capacity) != capacity or capacity < 1:
            raise ValueError(f"capacity must be a whole number >= 1, got {capacity!r}")
        capacity = int(capacity)
        obs_shape, action_shape = _shape("obs_shape", obs_shape), _shape("action_shape", action_shape)
        self.capacity = capacity
        self.obs = np.zeros((capacity, *obs_shape), dtype=obs_dtype)
        self.next_obs = np.zeros((capacity, *obs_shape), dtype=obs_dtype)
        self.actions = np.zeros((capacity, *action_shape), dtype=action_dtype)
        self.rewards = np.zeros(capacity, dtype=np.float32)
        self.terminated = np.zeros(capacity, dtype=bool)
        self.truncated = np.zeros(capacity, dtype=bool)
        self._pos = 0
        self._size = 0
        self.total_added = 0
        """Transitions ever added (the ring keeps the last ``capacity``)."""
        self.rng = np.random.default_rng(seed)

    def __len__(self) -> int:
        return self._size

    def clear(self) -> None:
        """Forget every transition (the arrays stay allocated; ``total_added`` keeps counting)."""
        self._pos = self._size = 0

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        if self._size < self.capacity:  # not wrapped: rows [0, size) are the filled ones
            state.update({name: getattr(self, name)[: self._size] for name in self._ARRAYS})
            state["_filled_only"] = True
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        filled_only = state.pop("_filled_only", False)
        self.__dict__.update(state)
        if filled_only:
            for name in self._ARRAYS:
                filled = getattr(self, name)
                full = np.zeros((self.capacity, *filled.shape[1:]), dtype=filled.dtype)
                full[: len(filled)] = filled
                setattr(self, name, full)

    def add(
        self,
        obs: np.ndarray,
        actions: np.ndarray,
        rewards: np.ndarray,
        next_obs: np.ndarray,
        terminated: np.ndarray,
        truncated: np.ndarray | None = None,
    ) -> np.ndarray:
        """Append a batch of ``N`` transitions (leading dim ``N``), overwriting the oldest.

        ``next_obs`` must be the true next observation (the final one where an episode ended),
        not the first observation of the next episode. Returns the slots written.
        """
        n = added = len(rewards)
        self._check_rows(n, obs=obs, actions=actions, rewards=rewards, next_obs=next_obs, terminated=terminated)
        if truncated is not None:
            self._check_rows(n, truncated=truncated)
        if n > self.capacity:  # only the last `capacity` would survive; keep the ring simple
            sl = slice(n - self.capacity, n)
            obs, actions, rewards, next_obs, terminated = (
                obs[sl],
                actions[sl],
                rewards[sl],
                next_obs[sl],
                terminated[sl],
            )
            truncated = None if truncated is None else truncated[sl]
            n = self.capacity
        idx = (self._pos + np.arange(n)) % self.capacity
        self.obs[idx] = obs
        self.actions[idx] = actions
        self.rewards[idx] = rewards
        self.next_obs[idx] = next_obs
        self.terminated[idx] = terminated
        self.truncated[idx] = False if truncated is None else truncated
        self._pos = int((self._pos + n) % self.capacity)
        self._size = min(self._size + n, self.capacity)
        self.total_added += added
        return idx

    def _check_rows(self, n: int, **fields: np.ndarray) -> None:
        """Each field is ``N`` rows of what this replay stores (numpy would broadcast a ``[N, 1]``
        into a ``[N, 3]`` silently, or fail without naming the field)."""
        stored = {"obs": self.obs, "actions": self.actions, "rewards": self.rewards, "next_obs": self.next_obs}
        for name, value in fields.items():
            row = stored[name].shape[1:] if name in stored else ()
            shape = np.shape(value)
            if shape != (n, *row):
                hint = " (the replay's action_shape, e.g. (1,) for a one-dimensional Box)" if name == "actions" else ""
                raise ValueError(
                    f"add: {name} has shape {shape}; this replay stores {name} as {(n, *row)} for {n} transitions{hint}"
                )

    def add_rollout(self, rollout: Rollout[np.ndarray]) -> np.ndarray:
        """Append every step of a collector's rollout (``[T, B]`` flattened, final obs restored)."""
        t, b = rollout.rewards.shape

        def flat(x: np.ndarray) -> np.ndarray:
            return x.reshape(t * b, *x.shape[2:])

        return self.add(
            flat(rollout.obs),
            flat(rollout.actions),
            flat(rollout.rewards),
            flat(rollout.next_obs()),
            flat(rollout.terminated),
            flat(rollout.truncated),
        )

    def _gather(self, idx: np.ndarray, weights: np.ndarray) -> ReplayBatch[np.ndarray]:
        return ReplayBatch(
            self.obs[idx],
            self.actions[idx],
            self.rewards[idx],
            self.next_obs[idx],
            self.terminated[idx],
            self.truncated[idx],
            weights.astype(np.float32),
            idx.astype(np.int64),
        )

    def sample(self, batch_size: int) -> ReplayBatch[np.ndarray]:
        """``batch_size`` transitions drawn uniformly with replacement; weights are ones."""
        if self._size == 0:
            raise ValueError("sample from an empty replay")
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        idx = self.rng.integers(0, self._size, size=batch_size)
        return self._gather(idx, np.ones(batch_size, np.float32))

    def update_priorities(self, indices: np.ndarray, td_errors: np.ndarray) -> None:
        """Uniform replay has no priorities: nothing to do (so training loops need not ask)."""


class SumTree:
    """A complete binary tree over ``capacity`` leaves whose inner nodes hold the sums below.

    ``update`` sets leaves (O(log n) each, vectorised over a batch); ``find`` maps prefix sums
    ``u`` in ``[0, total)`` to the leaf ``i`` with ``sum(leaves[:i]) <= u < sum(leaves[:i+1])``.
    Stored in float64 so that sums of many small priorities stay exact enough.
    """

    def __init__(self, capacity: int) -> None:
        self.capacity = int(capacity)
        self._leaves = 2
        while self._leaves < self.capacity:
            self._leaves *= 2
        self.nodes = np.zeros(2 * self._leaves, dtype=np.float64)
        """``nodes[1]`` is the root; leaf ``i`` is ``nodes[leaves + i]``; children of k: 2k, 2k+1."""

    def __getstate__(self) -> dict[str, Any]:
        """The leaves up to the last one set (the inner sums are rebuilt on unpickling)."""
        leaves = self.nodes[self._leaves : self._leaves + self.capacity]
        used = int(np.flatnonzero(leaves)[-1]) + 1 if leaves.any() else 0
        return {"capacity": self.capacity, "leaves": leaves[:used].copy()}

    def __setstate__(self, state: dict[str, Any]) -> None:
        rebuilt = SumTree(state["capacity"])
        rebuilt.update(np.arange(len(state["leaves"])), state["leaves"])
        self.__dict__.update(rebuilt.__dict__)

    @property
    def total(self) -> float:
        """Sum of every leaf."""
        return float(self.nodes[1])

    def __getitem__(self, idx: np.ndarray) -> np.ndarray:
        return self.nodes[self._leaves + np.asarray(idx)]

    def update(self, idx: np.ndarray, values: np.ndarray) -> None:
        """Set leaves ``idx`` to ``values`` (later duplicates win) and recompute their ancestors."""
        idx = np.asarray(idx, dtype=np.int64)
        values = np.broadcast_to(np.asarray(values, dtype=np.float64), idx.shape)
        if np.any(values < 0) or not np.all(np.isfinite(values)):
            raise ValueError("priorities must be finite and >= 0")
        if idx.size and (idx.min() < 0 or idx.max() >= self.capacity):
            # a negative or padding index would land on an inner sum or a leaf past the last
            bad = idx[(idx < 0) | (idx >= self.capacity)]
            raise IndexError(f"leaf indices must be in [0, {self.capacity}), got {bad[:5].tolist()}")
        if idx.size == 0:
            return
        self.nodes[self._leaves + idx] = values
        parents = np.unique((self._leaves + idx) // 2)  # every leaf is at the same depth
        while True:
            self.nodes[parents] = self.nodes[2 * parents] + self.nodes[2 * parents + 1]
            if parents[0] == 1:
                break
            parents = np.unique(parents // 2)

    def find(self, prefix: np.ndarray) -> np.ndarray:
        """Leaf index for each prefix sum (descending the tree for the whole batch at once)."""
        u = np.asarray(prefix, dtype=np.float64).copy()
        k = np.ones(u.shape, dtype=np.int64)
        while k[0] < self._leaves:
            left = 2 * k
            left_sum = self.nodes[left]
            go_right = u >= left_sum
            u = np.where(go_right, u - left_sum, u)
            k = np.where(go_right, left + 1, left)
        return np.minimum(k - self._leaves, self.capacity - 1)


class PrioritizedReplay(UniformReplay):
    """Proportional prioritised replay (Schaul et al. 2016, §3.3 and §3.4).

        P(i) = p_i^alpha / sum_k p_k^alpha,    p_i = |delta_i| + eps
        w_i  = (N * P(i))^-beta / max_j w_j

    New transitions get the largest priority seen so far, so each is replayed at least once
    soon. ``beta`` is annealed towards 1 by the caller (set :attr:`beta`). Sampling is stratified:
    the total is cut into ``batch_size`` equal segments and one prefix sum is drawn in each.
    """

    def __init__(
        self,
        capacity: int,
        obs_shape: tuple[int, ...],
        action_shape: tuple[int, ...] = (),
        obs_dtype: np.dtype | type = np.float32,
        action_dtype: np.dtype | type = np.float32,
        seed: int | None = None,
        alpha: float = 0.6,
        beta: float = 0.4,
        eps: float = 1e-6,
    ) -> None:
        if alpha < 0:
            raise ValueError(f"alpha must be >= 0 (0: uniform sampling), got {alpha}")
        if not 0 <= beta <= 1:
            raise ValueError(f"beta must be in [0, 1] (0: no importance correction, 1: full), got {beta}")
        if not eps > 0:
            raise ValueError(
                f"eps must be > 0 (it keeps every priority above zero, so every transition can be drawn), got {eps}"
            )
        super().__init__(capacity, obs_shape, action_shape, obs_dtype, action_dtype, seed)
        self.alpha = alpha
        self.beta = beta
        """Importance-sampling exponent (0: no correction, 1: full correction)."""
        self.eps = eps
        self.tree = SumTree(self.capacity)
        self._max_priority = 1.0

    def clear(self) -> None:
        super().clear()
        self.tree = SumTree(self.capacity)
        self._max_priority = 1.0

    def add(
        self,
        obs: np.ndarray,
        actions: np.ndarray,
        rewards: np.ndarray,
        next_obs: np.ndarray,
        terminated: np.ndarray,
        truncated: np.ndarray | None = None,
    ) -> np.ndarray:
        """As :meth:`UniformReplay.add`; the new slots get the maximal priority."""
        idx = super().add(obs, actions, rewards, next_obs, terminated, truncated)
        self.tree.update(idx, self._max_priority**self.alpha)
        return idx

    def sample(self, batch_size: int) -> ReplayBatch[np.ndarray]:
        """``batch_size`` transitions with probability ``P(i)``, and their weights ``w_i``."""
        if self._size == 0:
            raise ValueError("sample from an empty replay")
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        total = self.tree.total
        bounds = np.linspace(0.0, total, batch_size + 1)
        prefix = self.rng.uniform(bounds[:-1], bounds[1:])
        idx = self.tree.find(np.minimum(prefix, np.nextafter(total, 0.0)))
        idx = np.minimum(idx, self._size - 1)
        probs = self.tree[idx] / total
        weights = (self._size * probs) ** (-self.beta)
        return self._gather(idx, weights / weights.max())

    def update_priorities(self, indices: np.ndarray, td_errors: np.ndarray) -> None:
        """``p_i = |delta_i| + eps`` for the transitions just learned from.

        ``indices`` are a batch's :attr:`ReplayBatch.indices` from this replay, one TD error each.
        """
        indices = np.asarray(indices)
        errors = np.asarray(td_errors, dtype=np.float64)
        if indices.ndim != 1 or errors.shape != indices.shape:
            raise ValueError(
                f"update_priorities: indices {indices.shape} and td_errors {errors.shape} must be "
                "one-dimensional and of the same length (one TD error per sampled transition)"
            )
        if indices.size == 0:
            return
        if not np.issubdtype(indices.dtype, np.integer) or indices.min() < 0 or indices.max() >= self._size:
            raise IndexError(
                f"update_priorities: indices must be slots this replay filled, in [0, {self._size}); "
                f"got {indices[:5].tolist()}{' ...' if indices.size > 5 else ''} (a batch from another replay, "
                "or hindsight-relabelled goals, which have no slot?)"
            )
        priorities = np.abs(errors) + self.eps
        self._max_priority = max(self._max_priority, float(priorities.max()))
        self.tree.update(indices, priorities**self.alpha)
