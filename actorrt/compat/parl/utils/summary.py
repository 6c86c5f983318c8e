"""PARL's ``parl.utils.summary``: TensorBoard here (PARL's prefers VisualDL when it is
installed); the same functions as ``parl.utils.tensorboard``."""

from __future__ import annotations

from actorrt.compat.parl.utils.tensorboard import add_histogram, add_scalar, close, flush

__all__ = ["add_histogram", "add_scalar", "close", "flush"]
