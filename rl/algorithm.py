"""`Algorithm`: models, losses and optimizer of one RL method. Never touches environments."""

from __future__ import annotations

import copy
from typing import Any, ClassVar, NamedTuple

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
    saved_attributes: ClassVar[tuple[str, ...]] = ()
    """Plain attributes that training moves on and a resumed run needs as they were: counters
    (an int or float) and random generators (``torch.Generator``, ``numpy.random.Generator``).
    :meth:`state_dict` saves them beside the models and optimizers."""

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
        """Everything needed to resume training: every Model and optimizer attribute, the
        :attr:`saved_attributes`, each optimizer's kind and the algorithm's class name (so that
        another algorithm refuses it)."""
        state: dict[str, Any] = {"_class": type(self).__name__}
        optimizers: dict[str, str] = {}
        for name, value in vars(self).items():
            if isinstance(value, (torch.nn.Module, torch.optim.Optimizer)):
                state[name] = value.state_dict()
            if isinstance(value, torch.optim.Optimizer):
                optimizers[name] = type(value).__name__
        state["_optimizers"] = optimizers
        state["_attributes"] = {name: _attribute_state(getattr(self, name)) for name in self.saved_attributes}
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what :meth:`state_dict` returned (by this algorithm's class). A state that
        does not fit (another algorithm, a missing or unknown entry, another optimizer, other
        shapes or action bounds) raises and leaves this algorithm as it was."""
        saved = state.get("_class", type(self).__name__)
        if saved != type(self).__name__:
            raise ValueError(f"this state is a {saved}'s; it cannot be loaded into a {type(self).__name__}")
        before = copy.deepcopy(self.state_dict())
        entries = [name for name in before if not name.startswith("_")]
        unknown = [name for name in state if not name.startswith("_") and name not in entries]
        if unknown:
            raise ValueError(f"this state holds {unknown}, which this {type(self).__name__} has not")
        missing = [name for name in entries if name not in state]
        if missing:
            raise ValueError(f"this state lacks {missing}, which this {type(self).__name__} needs")
        for name, kind in state.get("_optimizers", {}).items():
            if kind != before["_optimizers"].get(name):
                raise ValueError(
                    f"this state's {name} is a {kind}'s; this {type(self).__name__}'s is a "
                    f"{before['_optimizers'].get(name)} (build it with the same optimizer)"
                )
        try:
            self._load_entries(state, entries)
        except BaseException:
            self._load_entries(before, entries)  # all or nothing: a strict load copies what fits first
            raise

    def _load_entries(self, state: dict[str, Any], entries: list[str]) -> None:
        for name in entries:
            getattr(self, name).load_state_dict(state[name])
        for name, value in state.get("_attributes", {}).items():
            if name in self.saved_attributes:
                setattr(self, name, _attribute_value(getattr(self, name), value))


def _attribute_state(value: Any) -> Any:
    """What :meth:`Algorithm.state_dict` keeps of a saved attribute (loadable with ``weights_only``)."""
    if isinstance(value, torch.Generator):
        return {"torch.Generator": value.get_state()}
    if isinstance(value, np.random.Generator):
        return {"numpy.random.Generator": value.bit_generator.state}
    if isinstance(value, (bool, int, float)):
        return value
    raise TypeError(f"cannot save an attribute of type {type(value).__name__} (a counter or a random generator)")


def _attribute_value(current: Any, saved: Any) -> Any:
    """The attribute :func:`_attribute_state` kept, set into (or made like) ``current``."""
    if isinstance(current, torch.Generator):
        current.set_state(saved["torch.Generator"])
        return current
    if isinstance(current, np.random.Generator):
        current.bit_generator.state = saved["numpy.random.Generator"]
        return current
    return type(current)(saved)
