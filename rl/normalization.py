"""Observation and reward normalisation whose statistics travel with the weights.

:class:`NormalizingAgent` does what SB3's ``VecNormalize`` does (observations standardised by
running mean and variance and clipped; rewards divided by the running standard deviation of the
discounted return), but keeps the statistics as buffers of the model (``obs_rms``), so a
broadcast of the learner's weights hands every remote collector the same statistics. Rollouts
keep raw observations and raw rewards (so episode returns stay true returns); the learner
normalises a rollout with the statistics the collectors acted with, then updates them.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

import numpy as np
import torch
from torch import nn

from rl.agent import Agent
from rl.algorithm import Algorithm
from rl.storage import Rollout

__all__ = ["NormalizingAgent", "RunningMeanStd"]


class RunningMeanStd(nn.Module):
    """Running mean and variance of a stream of ``[N, *shape]`` batches (float64 buffers).

    Batches are merged with the parallel-variance formula (Chan et al. 1979), so the result is
    the mean and (population) variance of everything seen, in any batch sizes.
    """

    mean: torch.Tensor
    var: torch.Tensor
    count: torch.Tensor

    def __init__(self, shape: tuple[int, ...] = ()) -> None:
        super().__init__()
        self.register_buffer("mean", torch.zeros(shape, dtype=torch.float64))
        self.register_buffer("var", torch.ones(shape, dtype=torch.float64))
        self.register_buffer("count", torch.tensor(0.0, dtype=torch.float64))

    @torch.no_grad()
    def update(self, x: np.ndarray) -> None:
        """Merge a batch (leading dim: samples)."""
        x = np.asarray(x, dtype=np.float64)
        if x.shape[0] > 0:
            self.merge(x.mean(0), x.var(0), x.shape[0])

    @torch.no_grad()
    def merge(self, b_mean: np.ndarray, b_var: np.ndarray, n: float) -> None:
        """Merge the statistics of ``n`` samples of mean ``b_mean`` and variance ``b_var`` (those
        of a batch, or of another running statistic: :meth:`moments`)."""
        if n <= 0:
            return
        count = float(self.count)
        mean, var = self.mean.numpy(), self.var.numpy()
        total = count + n
        delta = b_mean - mean
        new_mean = mean + delta * n / total
        m2 = var * count + b_var * n + delta**2 * count * n / total
        self.mean.copy_(torch.from_numpy(np.asarray(new_mean)))
        self.var.copy_(torch.from_numpy(np.asarray(m2 / total)))
        self.count.fill_(total)

    def moments(self) -> tuple[np.ndarray, np.ndarray, float]:
        """``(mean, var, count)`` as numpy copies, what :meth:`merge` takes."""
        return self.mean.numpy().copy(), self.var.numpy().copy(), float(self.count)

    def normalize(self, x: np.ndarray, clip: float, epsilon: float = 1e-8) -> np.ndarray:
        """``clip((x - mean) / sqrt(var + eps), -clip, clip)`` as float32."""
        out = (np.asarray(x, np.float64) - self.mean.numpy()) / np.sqrt(self.var.numpy() + epsilon)
        return np.clip(out, -clip, clip).astype(np.float32)


class NormalizingAgent(Agent):
    """An :class:`rl.Agent` that standardises observations and scales rewards (see the module).

    Adds ``obs_rms`` (and ``ret_rms``) to ``algorithm.model``, so they are part of its weights and
    of its checkpoints; build it the same way in the learner and in every collector.
    """

    def __init__(
        self,
        algorithm: Algorithm,
        obs_shape: tuple[int, ...],
        gamma: float,
        normalize_obs: bool = True,
        normalize_reward: bool = True,
        clip_obs: float = 10.0,
        clip_reward: float = 10.0,
    ) -> None:
        super().__init__(algorithm)
        self.normalize_obs = normalize_obs
        self.normalize_reward = normalize_reward
        self.clip_obs = clip_obs
        self.clip_reward = clip_reward
        self.gamma = gamma
        model = algorithm.model
        self.obs_rms = RunningMeanStd(tuple(obs_shape))
        self.ret_rms = RunningMeanStd(())
        model.add_module("obs_rms", self.obs_rms)
        model.add_module("ret_rms", self.ret_rms)
        self._returns: dict[Hashable, np.ndarray] = {}
        """Discounted return so far of each environment column of each stream (collector), for
        the reward statistics; ``_stream`` is the one the next rollout comes from."""
        self._stream: Hashable = 0
        self._obs_shape = tuple(obs_shape)
        self._new_obs, self._new_ret = RunningMeanStd(self._obs_shape), RunningMeanStd(())
        """What ``obs_rms`` and ``ret_rms`` took in since the last :meth:`take_statistics` (not weights)."""

    def preprocess_obs(self, obs: np.ndarray) -> np.ndarray:
        """Standardised observations (what the networks see, when acting and when learning)."""
        if not self.normalize_obs:
            return super().preprocess_obs(obs)
        return self.obs_rms.normalize(obs, self.clip_obs)

    def select_stream(self, key: Hashable) -> None:
        """The next rollouts continue the environments of stream ``key`` (a collector): each has
        its own running returns; the statistics are shared."""
        self._stream = key

    def scale_rewards(self, rollout: Rollout[np.ndarray]) -> np.ndarray:
        """Update the discounted-return statistics with this rollout; rewards ``/ std(return)``."""
        rewards = rollout.rewards
        num_steps, num_envs = rewards.shape
        returns = self._returns.get(self._stream)
        if returns is None or len(returns) != num_envs:
            returns = np.zeros(num_envs)
        seen = np.empty((num_steps, num_envs))
        done = rollout.terminated | rollout.truncated
        for t in range(num_steps):
            returns = returns * self.gamma + rewards[t]
            seen[t] = returns
            returns[done[t]] = 0.0
        self._returns[self._stream] = returns
        self.ret_rms.update(seen.reshape(-1))
        self._new_ret.update(seen.reshape(-1))
        std = np.sqrt(float(self.ret_rms.var) + 1e-8)
        return np.clip(rewards / std, -self.clip_reward, self.clip_reward).astype(np.float32)

    def preprocess_batch(self, batch: Any) -> Any:
        """A rollout with normalised observations (with the statistics the collectors used) and
        scaled rewards; then the observation statistics take in this rollout's observations."""
        if not isinstance(batch, Rollout):
            raise TypeError(
                f"NormalizingAgent learns from rollouts (on-policy algorithms), got a {type(batch).__name__}: "
                "its observations would not be normalised as the ones it acted on were"
            )
        out = batch
        if self.normalize_reward:
            out = out._replace(rewards=self.scale_rewards(batch))
        out = super().preprocess_batch(out)  # observations through preprocess_obs
        if self.normalize_obs:
            self.obs_rms.update(batch.obs.reshape(-1, *batch.obs.shape[2:]))
            self._new_obs.update(batch.obs.reshape(-1, *batch.obs.shape[2:]))
        return out

    def take_statistics(self) -> dict[str, tuple[np.ndarray, np.ndarray, float]]:
        """What the observation and return statistics took in since the last call, as ``(mean,
        var, count)`` each: a gradient worker sends it with its gradients, the learner merges it
        (:meth:`add_statistics`) and its weights carry the sum back to the workers."""
        taken = {"obs_rms": self._new_obs.moments(), "ret_rms": self._new_ret.moments()}
        self._new_obs, self._new_ret = RunningMeanStd(self._obs_shape), RunningMeanStd(())
        return taken

    def add_statistics(self, taken: Any) -> None:
        """Merge what another copy's :meth:`take_statistics` returned into this copy's statistics."""
        self.obs_rms.merge(*taken["obs_rms"])
        self.ret_rms.merge(*taken["ret_rms"])
