"""``parl.Agent``: numpy in and out around a ``parl.Algorithm`` (the script's subclass does the
conversions), with PARL's ``save``/``restore`` of a model's ``state_dict``."""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import torch

import rl
from actorrt.compat.parl.core.torch.algorithm import Algorithm, Interface
from rl.agent import save_checkpoint

__all__ = ["Agent"]


class Agent(Interface):
    """PARL's base class of an agent: ``self.alg`` is its algorithm; ``learn``, ``predict`` and
    ``sample`` are the subclass's. Creating one sets torch's threads to ``RL_TORCH_THREADS``
    (default 1), as importing PARL's did (``torch.set_num_threads(1)``)."""

    def __init__(self, algorithm: Algorithm) -> None:
        if not isinstance(algorithm, Algorithm):
            raise TypeError(f"parl.Agent needs a parl.Algorithm, got {type(algorithm).__name__}")
        rl.use_torch_threads()
        self.alg = algorithm
        self.training = True

    def get_weights(self) -> dict[str, np.ndarray]:
        """The weights of the algorithm's model."""
        return self.alg.get_weights()

    def set_weights(self, weights: dict[str, np.ndarray]) -> None:
        """Load weights from :meth:`get_weights`."""
        self.alg.set_weights(weights)

    def save(self, save_path: str, model: torch.nn.Module | None = None) -> None:
        """Write ``model``'s ``state_dict`` (default: the algorithm's model) to ``save_path``,
        creating its folder; the file is replaced whole or not at all."""
        module = self.alg.model if model is None else model
        save_checkpoint(module.state_dict(), save_path)

    def restore(self, save_path: str, model: torch.nn.Module | None = None, map_location: Any = None) -> None:
        """Load a ``state_dict`` written by :meth:`save` into ``model`` (default: the algorithm's)."""
        module = self.alg.model if model is None else model
        if not os.path.exists(save_path):
            raise FileNotFoundError(f"restore: no saved model at {save_path}")
        module.load_state_dict(torch.load(save_path, map_location=map_location))

    def train(self) -> None:
        """Training mode (the default): the model's too (dropout, batch norm)."""
        self.alg.model.train()
        self.training = True

    def eval(self) -> None:
        """Evaluation mode: the model's too."""
        self.alg.model.eval()
        self.training = False
