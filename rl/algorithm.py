"""`Algorithm`: models, losses and optimizer of one RL method. Never touches environments."""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np
import torch

from rl.fused import fused_clip_grad_norm_, plain_clip_grad_norm_, resolve_fused
from rl.model import Model

__all__ = ["Algorithm", "PolicyStep", "check_gamma", "check_unit_interval"]


def check_unit_interval(name: str, value: float) -> float:
    """A setting that must lie in [0, 1], checked when an algorithm is built."""
    if not 0.0 <= value <= 1.0:
        raise ValueError(f"{name} must be in [0, 1], got {value}")
    return float(value)


def check_gamma(gamma: float) -> float:
    """The discount, checked when an algorithm is built."""
    return check_unit_interval("gamma (the discount)", gamma)


class PolicyStep(NamedTuple):
    """What acting produces for a batch of observations ``[B, ...]``.

    ``log_prob`` (behaviour log-probability of ``action``) and ``value`` (``V(obs)``) are ``None``
    for methods that have none (DQN).
    """

    action: torch.Tensor
    log_prob: torch.Tensor | None
    value: torch.Tensor | None


class Algorithm:
    """Base class: owns ``self.model`` (and any target models), the losses and the optimizer.

    Subclasses implement :meth:`sample`, :meth:`predict` and :meth:`learn`. All methods take and
    return torch tensors on the caller's thread; :class:`rl.Agent` does the numpy conversion.
    """

    model: Model
    optimizer: torch.optim.Optimizer

    def __init__(self, model: Model, fused: bool | None = None) -> None:
        self.model = model
        self.fused = resolve_fused(fused)
        """Whether the updates take the fast paths of :mod:`rl.fused` (``None``: :func:`rl.fused.enabled`)."""

    # -- acting -------------------------------------------------------------------------------
    def sample(self, obs: torch.Tensor) -> PolicyStep:
        """Exploratory action for a batch of observations (with log-prob and value when known)."""
        raise NotImplementedError

    def predict(self, obs: torch.Tensor) -> torch.Tensor:
        """Greedy (evaluation) action for a batch of observations."""
        raise NotImplementedError

    def value(self, obs: torch.Tensor) -> torch.Tensor | None:
        """State value ``V(obs)`` used to bootstrap truncated episodes, or ``None`` if no critic."""
        return None

    # -- learning -----------------------------------------------------------------------------
    def learn(self, batch: Any) -> dict[str, float]:
        """One update from ``batch`` (tensors); returns scalar statistics for logging."""
        raise NotImplementedError

    def _step(self, loss: torch.Tensor, max_grad_norm: float | None) -> torch.Tensor:
        """Backward, clip, optimizer step; return the gradient norm before clipping (a tensor).

        The same maths as ``zero_grad``, ``clip_grad_norm_`` and ``step``, with fewer torch calls:
        the parameter list is built once, and (with :attr:`fused`) the norm is one
        ``_foreach_norm`` over it (:func:`rl.fused.fused_clip_grad_norm_`; else
        :func:`rl.fused.plain_clip_grad_norm_`). Only ``self.optimizer.step()`` is called on the
        optimizer (so a stand-in that captures the gradients, as the distributed learners use, works).
        """
        params = self.__dict__.get("_params")
        if params is None:
            params = self._params = list(self.model.parameters())
        for p in params:
            p.grad = None
        loss.backward()
        grads = [p.grad for p in params if p.grad is not None]
        clip = fused_clip_grad_norm_ if self.fused else plain_clip_grad_norm_
        norm = clip(grads, max_grad_norm)
        self.optimizer.step()
        return norm

    # -- weights and state --------------------------------------------------------------------
    def get_weights(self) -> dict[str, np.ndarray]:
        """Weights of the acting model, as numpy arrays (what remote collectors need)."""
        return self.model.get_weights()

    def set_weights(self, weights: dict[str, np.ndarray]) -> None:
        """Load weights of the acting model (e.g. into a collector's CPU copy)."""
        self.model.set_weights(weights)

    def state_dict(self) -> dict[str, Any]:
        """Everything needed to resume training: every Model and optimizer attribute, and the
        algorithm's class name (so that another algorithm refuses it)."""
        state: dict[str, Any] = {"_class": type(self).__name__}
        for name, value in vars(self).items():
            if isinstance(value, (torch.nn.Module, torch.optim.Optimizer)):
                state[name] = value.state_dict()
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what :meth:`state_dict` returned (by this algorithm's class)."""
        saved = state.get("_class", type(self).__name__)
        if saved != type(self).__name__:
            raise ValueError(f"this state is a {saved}'s; it cannot be loaded into a {type(self).__name__}")
        unknown = [name for name in state if name != "_class" and not hasattr(self, name)]
        if unknown:
            raise ValueError(f"this state holds {unknown}, which this {type(self).__name__} has not")
        for name, value in state.items():
            if name != "_class":
                getattr(self, name).load_state_dict(value)
