"""``parl.Algorithm``: owns ``self.model`` (a ``parl.Model``), its losses and optimisers. The
algorithms of ``parl.algorithms`` subclass it, each wrapping the ``rl`` algorithm it names."""

from __future__ import annotations

from typing import Any

import numpy as np

from actorrt.compat.parl.core.torch.model import Model

__all__ = ["Algorithm", "Interface"]


class Interface:
    """What an algorithm and an agent define: ``learn``, ``predict``, ``sample`` (the subclass's)."""

    def learn(self, *args: Any, **kwargs: Any) -> Any:
        """The update (an algorithm: losses and optimiser steps; an agent: numpy in, the update, numpy out)."""
        raise NotImplementedError(f"{type(self).__name__} defines no learn")

    def predict(self, *args: Any, **kwargs: Any) -> Any:
        """The evaluation output (a greedy action, Q-values, probabilities)."""
        raise NotImplementedError(f"{type(self).__name__} defines no predict")

    def sample(self, *args: Any, **kwargs: Any) -> Any:
        """An exploratory action."""
        raise NotImplementedError(f"{type(self).__name__} defines no sample")


class Algorithm(Interface):
    """PARL's base class of an algorithm. ``get_weights``/``set_weights`` exchange the weights
    of ``self.model`` (only: target networks stay behind, as in PARL); ``learn``, ``predict`` and
    ``sample`` are the subclass's."""

    model: Model

    def __init__(self, model: Model | None = None) -> None:
        if not isinstance(model, Model):
            raise TypeError(f"parl.Algorithm needs a parl.Model, got {type(model).__name__}")
        self.model = model

    def get_weights(self) -> dict[str, np.ndarray]:
        """The weights of ``self.model``, as numpy arrays keyed by name."""
        return self.model.get_weights()

    def set_weights(self, params: dict[str, np.ndarray]) -> None:
        """Load weights from :meth:`get_weights` into ``self.model``."""
        self.model.set_weights(params)
