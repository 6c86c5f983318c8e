"""Rollouts (time-major containers of arrays) and an experience replay buffer.

Collectors and buffers fill :class:`Rollout` and :class:`Transition` with numpy arrays;
:func:`rl.agent.to_torch` turns them into the same containers of tensors, which is what
``Algorithm.learn`` receives. The array type is their parameter: ``Rollout[np.ndarray]``,
``Rollout[torch.Tensor]``.

A :class:`Rollout` keeps ``terminated`` (the MDP ended: no future reward) and ``truncated`` (a
time limit cut the episode: the future still has value) apart, and carries what is needed to
bootstrap truncated episodes: the true final observation and its value under the behaviour
policy's critic.
"""

from __future__ import annotations

from typing import Generic, NamedTuple, TypeVar

import numpy as np
import torch

__all__ = ["ArrayT", "ReplayBuffer", "Rollout", "Transition", "bootstrapped_rewards", "episode_discounts"]

ArrayT = TypeVar("ArrayT", bound=np.ndarray | torch.Tensor)
"""The array type of a batch container: ``np.ndarray`` (collected, stored, sent) or
``torch.Tensor`` (what :meth:`rl.Algorithm.learn` gets, after :func:`rl.agent.to_torch`)."""


class Rollout(NamedTuple, Generic[ArrayT]):
    """``T`` steps of ``B`` environments, time-major. Numpy when collected (picklable, cheap to
    send), tensors when learned from.

    Fields (shapes):
        obs ``[T, B, *obs]``: observation the action was taken in.
        actions ``[T, B, *act]``.
        rewards ``[T, B]``.
        terminated ``[T, B]`` bool: the episode ended in a terminal state at step ``t``.
        truncated ``[T, B]`` bool: a time limit ended the episode at step ``t`` (not terminal).
        log_probs ``[T, B]``: behaviour ``log mu(a_t|x_t)`` (zeros when the policy has none).
        values ``[T, B]``: behaviour ``V(x_t)`` (zeros without a critic).
        final_obs ``[T, B, *obs]``: the last observation of an episode that ended at step ``t``
            (zeros where the episode did not end; the env has already been reset in ``obs[t+1]``).
        final_values ``[T, B]``: behaviour ``V(final_obs)`` where truncated, else 0.
        bootstrap_obs ``[B, *obs]``: observation after the last step.
        bootstrap_value ``[B]``: behaviour ``V(bootstrap_obs)`` (0 without a critic).
        episode_returns ``[N]``, episode_lengths ``[N]``: episodes that finished in this rollout.
    """

    obs: ArrayT
    actions: ArrayT
    rewards: ArrayT
    terminated: ArrayT
    truncated: ArrayT
    log_probs: ArrayT
    values: ArrayT
    final_obs: ArrayT
    final_values: ArrayT
    bootstrap_obs: ArrayT
    bootstrap_value: ArrayT
    episode_returns: ArrayT
    episode_lengths: ArrayT

    @property
    def num_steps(self) -> int:
        """``T * B``: environment steps in this rollout."""
        return int(self.rewards.shape[0] * self.rewards.shape[1])

    def next_obs(self) -> np.ndarray:
        """``x_{t+1}`` for every step: ``final_obs`` where the episode ended, else the next ``obs``
        (of a numpy rollout)."""
        nxt = np.concatenate([self.obs[1:], self.bootstrap_obs[None]], axis=0)
        done = np.logical_or(self.terminated, self.truncated)
        mask = done.reshape(done.shape + (1,) * (nxt.ndim - 2))
        return np.where(mask, self.final_obs, nxt)


def episode_discounts(terminated: torch.Tensor, truncated: torch.Tensor, gamma: float) -> torch.Tensor:
    """``gamma * (1 - done_t)``: zero at both terminations and truncations (the trace stops)."""
    return gamma * (~(terminated | truncated)).to(torch.float32)


def bootstrapped_rewards(
    rewards: torch.Tensor, truncated: torch.Tensor, final_values: torch.Tensor, gamma: float
) -> torch.Tensor:
    """``r_t + gamma * V(final_obs_t)`` at truncated steps, ``r_t`` elsewhere.

    With :func:`episode_discounts` cutting the trace at ``t``, this makes a time limit look like
    a transition into a state worth ``V(final_obs)``: the time limit is not a failure.
    """
    return rewards + gamma * truncated.to(rewards.dtype) * final_values


class Transition(NamedTuple, Generic[ArrayT]):
    """A batch of one-step transitions sampled from a :class:`ReplayBuffer` (numpy; tensors
    in ``Algorithm.learn``)."""

    obs: ArrayT
    actions: ArrayT
    rewards: ArrayT
    next_obs: ArrayT
    terminated: ArrayT


class ReplayBuffer:
    """Fixed-capacity circular buffer of transitions, stored in preallocated numpy arrays.

    Only ``terminated`` is stored: a truncated transition is stored with its true final
    observation as ``next_obs`` and ``terminated=False``, so the TD target bootstraps from it.
    """

    def __init__(
        self,
        capacity: int,
        obs_shape: tuple[int, ...],
        action_shape: tuple[int, ...] = (),
        obs_dtype: np.dtype | type = np.float32,
        action_dtype: np.dtype | type = np.int64,
        seed: int | None = None,
    ) -> None:
        self.capacity = int(capacity)
        self.obs = np.zeros((capacity, *obs_shape), dtype=obs_dtype)
        self.next_obs = np.zeros((capacity, *obs_shape), dtype=obs_dtype)
        self.actions = np.zeros((capacity, *action_shape), dtype=action_dtype)
        self.rewards = np.zeros(capacity, dtype=np.float32)
        self.terminated = np.zeros(capacity, dtype=bool)
        self._pos = 0
        self._size = 0
        self._rng = np.random.default_rng(seed)

    def __len__(self) -> int:
        return self._size

    def add(
        self,
        obs: np.ndarray,
        actions: np.ndarray,
        rewards: np.ndarray,
        next_obs: np.ndarray,
        terminated: np.ndarray,
    ) -> None:
        """Append a batch of ``N`` transitions (leading dim ``N``), overwriting the oldest."""
        n = len(rewards)
        idx = (self._pos + np.arange(n)) % self.capacity
        self.obs[idx] = obs
        self.actions[idx] = actions
        self.rewards[idx] = rewards
        self.next_obs[idx] = next_obs
        self.terminated[idx] = terminated
        self._pos = int((self._pos + n) % self.capacity)
        self._size = min(self._size + n, self.capacity)

    def add_rollout(self, rollout: Rollout[np.ndarray]) -> None:
        """Append every step of a rollout, flattening ``[T, B]``."""
        t, b = rollout.rewards.shape

        def flat(x: np.ndarray) -> np.ndarray:
            return x.reshape(t * b, *x.shape[2:])

        self.add(
            flat(rollout.obs),
            flat(rollout.actions),
            flat(rollout.rewards),
            flat(rollout.next_obs()),
            flat(rollout.terminated),
        )

    def sample(self, batch_size: int) -> Transition[np.ndarray]:
        """Uniformly sample ``batch_size`` transitions (with replacement)."""
        if self._size == 0:
            raise ValueError("sample from an empty ReplayBuffer")
        idx = self._rng.integers(0, self._size, size=batch_size)
        return Transition(self.obs[idx], self.actions[idx], self.rewards[idx], self.next_obs[idx], self.terminated[idx])
