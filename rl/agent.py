"""`Agent`: numpy in, numpy out, around an :class:`rl.Algorithm`."""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Hashable
from typing import Any, NamedTuple, cast

import numpy as np
import torch

from rl.algorithm import Algorithm

__all__ = ["Agent", "AgentStep", "save_checkpoint", "to_torch"]


_OBS_FIELDS = ("obs", "next_obs", "final_obs", "bootstrap_obs")
"""The fields of a training batch that hold observations (``Rollout``, ``Transition``, replay)."""


class AgentStep(NamedTuple):
    """Numpy view of :class:`rl.algorithm.PolicyStep` (``None`` fields stay ``None``)."""

    action: np.ndarray
    log_prob: np.ndarray | None
    value: np.ndarray | None


def to_torch(batch: Any) -> Any:
    """Convert a NamedTuple / dict of numpy arrays to the same container of tensors.

    Arrays are shared, not copied (``torch.from_numpy``); non-array fields pass through.
    """

    def conv(x: Any) -> Any:
        if isinstance(x, np.ndarray) and x.dtype != object:
            return torch.from_numpy(np.ascontiguousarray(x))
        return x

    if isinstance(batch, dict):
        return {k: conv(v) for k, v in batch.items()}
    if isinstance(batch, tuple) and hasattr(batch, "_fields"):
        return type(batch)(*(conv(v) for v in batch))
    return conv(batch)


def save_checkpoint(state: Any, path: str | os.PathLike[str]) -> None:
    """``torch.save(state, path)`` through a temporary file in the same folder, renamed over
    ``path`` once written and flushed to disk: an interrupted save (Ctrl-C, kill, a full disk)
    never leaves a truncated file where the last good checkpoint was."""
    path = os.path.abspath(path)
    folder = os.path.dirname(path)
    os.makedirs(folder, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.", suffix=".tmp", dir=folder)
    try:
        with os.fdopen(fd, "wb") as f:
            torch.save(state, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


class Agent:
    """Numpy interface to an algorithm, with preprocessing hooks.

    Override :meth:`preprocess_obs` (e.g. scaling images) and :meth:`preprocess_batch` in a
    subclass; both run on every call. Acting runs under ``torch.inference_mode``.
    """

    def __init__(self, algorithm: Algorithm) -> None:
        self.algorithm = algorithm

    # -- hooks --------------------------------------------------------------------------------
    def preprocess_obs(self, obs: np.ndarray) -> np.ndarray:
        """Hook: transform raw observations before the model sees them. Default: float32."""
        return obs if obs.dtype == np.float32 else obs.astype(np.float32)

    def preprocess_batch(self, batch: Any) -> Any:
        """Hook: transform a training batch (numpy) before :meth:`learn`. Default: the batch with
        :meth:`preprocess_obs` applied to its observation arrays (``obs``, ``next_obs``,
        ``final_obs``, ``bootstrap_obs``), so the networks learn on what they act on (float32
        where the env gives float64)."""
        fields = getattr(batch, "_fields", None)  # a NamedTuple's
        if not (isinstance(batch, tuple) and fields):
            return batch
        changes = {
            name: self.preprocess_obs(value)
            for name in _OBS_FIELDS
            if name in fields and isinstance(value := getattr(batch, name), np.ndarray)
        }
        return cast(Any, batch)._replace(**changes) if changes else batch

    # -- acting -------------------------------------------------------------------------------
    def _obs(self, obs: np.ndarray) -> torch.Tensor:
        return torch.from_numpy(self.preprocess_obs(np.asarray(obs)))

    def sample(self, obs: np.ndarray) -> np.ndarray:
        """Exploratory actions for a batch of observations ``[B, ...]``."""
        return self.sample_with_info(obs).action

    def sample_with_info(self, obs: np.ndarray) -> AgentStep:
        """Exploratory actions plus behaviour log-probs and values (what collectors record)."""
        with torch.inference_mode():
            step = self.algorithm.sample(self._obs(obs))
        return AgentStep(
            step.action.numpy(),
            None if step.log_prob is None else step.log_prob.numpy(),
            None if step.value is None else step.value.numpy(),
        )

    def predict(self, obs: np.ndarray) -> np.ndarray:
        """Greedy actions for a batch of observations."""
        with torch.inference_mode():
            return self.algorithm.predict(self._obs(obs)).numpy()

    def value(self, obs: np.ndarray) -> np.ndarray | None:
        """``V(obs)`` as numpy, or ``None`` when the algorithm has no critic."""
        with torch.inference_mode():
            v = self.algorithm.value(self._obs(obs))
        return None if v is None else v.numpy()

    # -- learning -----------------------------------------------------------------------------
    def learn(self, batch: Any) -> dict[str, float]:
        """Preprocess a numpy batch, convert it to tensors, and run one algorithm update."""
        return self.algorithm.learn(to_torch(self.preprocess_batch(batch)))

    def select_stream(self, key: Hashable) -> None:
        """Hook: the batches learned next come from the stream ``key`` (a learner whose
        collectors' rollouts arrive interleaved says which collector's). An agent that carries
        state from one batch to the next of a stream (a normaliser's running returns) keeps one
        per key. Default: nothing to keep."""

    def take_statistics(self) -> Any:
        """What this copy's running statistics (an observation normaliser's, say) took in since
        the last call, for a learner to merge with :meth:`add_statistics`; ``None`` (the default)
        when it keeps none. Remote gradient workers send it with their gradients."""
        return None

    def add_statistics(self, taken: Any) -> None:
        """Merge what another copy's :meth:`take_statistics` returned. Default: nothing to merge."""

    def get_weights(self) -> dict[str, np.ndarray]:
        """Acting-model weights as numpy arrays."""
        return self.algorithm.get_weights()

    def set_weights(self, weights: dict[str, np.ndarray]) -> None:
        """Load acting-model weights."""
        self.algorithm.set_weights(weights)

    # -- persistence --------------------------------------------------------------------------
    def save(self, path: str | os.PathLike[str]) -> None:
        """Write models and optimizer state to ``path`` (a ``torch.save`` file), whole or not at
        all: a save cut short leaves the checkpoint that was there."""
        save_checkpoint(self.algorithm.state_dict(), path)

    def restore(self, path: str | os.PathLike[str]) -> None:
        """Load what :meth:`save` wrote. Raises ``FileNotFoundError`` if ``path`` is missing."""
        self.algorithm.load_state_dict(torch.load(path, weights_only=True))
