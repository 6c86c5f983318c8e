"""Rollouts (time-major containers of arrays) and transitions; the replay buffers that store
them are in ``rl/replay.py``.

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

__all__ = ["ArrayT", "Rollout", "Transition", "bootstrapped_rewards", "episode_discounts"]

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
        truncated ``[T, B]`` bool: a time limit ended the episode at step ``t``. As gymnasium
            reports it, a step can be both; such a step counts as terminated (no bootstrap).
        log_probs ``[T, B]``: behaviour ``log mu(a_t|x_t)`` (zeros when the policy has none).
        values ``[T, B]``: behaviour ``V(x_t)`` (zeros without a critic).
        final_obs ``[T, B, *obs]``: the last observation of an episode that ended at step ``t``
            (zeros where the episode did not end; the env has already been reset in ``obs[t+1]``).
        final_values ``[T, B]``: behaviour ``V(final_obs)`` where truncated and not terminated,
        else 0.
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
    rewards: torch.Tensor,
    terminated: torch.Tensor,
    truncated: torch.Tensor,
    final_values: torch.Tensor,
    gamma: float,
) -> torch.Tensor:
    """``r_t + gamma * V(final_obs_t)`` at steps truncated and not terminated, ``r_t`` elsewhere.

    With :func:`episode_discounts` cutting the trace at ``t``, this makes a time limit look like
    a transition into a state worth ``V(final_obs)``: the time limit is not a failure. A step
    that is both (gymnasium's ``TimeLimit`` reports ``truncated`` on its last step whatever the
    env said) terminated: it has no future to bootstrap from.
    """
    cut = truncated & ~terminated
    return rewards + gamma * cut.to(rewards.dtype) * final_values


class Transition(NamedTuple, Generic[ArrayT]):
    """A batch of one-step transitions (numpy; tensors in ``Algorithm.learn``): what
    ``DQN.learn`` reads of a :class:`rl.ReplayBatch`."""

    obs: ArrayT
    actions: ArrayT
    rewards: ArrayT
    next_obs: ArrayT
    terminated: ArrayT
