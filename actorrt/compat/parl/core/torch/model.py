"""``parl.Model``: a ``torch.nn.Module`` whose weights travel as numpy dicts, with PARL's
``sync_weights_to(target_model, decay)``. It is an :class:`rl.Model` (the same weight exchange),
with PARL's checks and PARL's soft update of parameters only."""

from __future__ import annotations

import torch

import rl
from rl import ops

__all__ = ["Model"]


class Model(rl.Model):
    """PARL's base class of a network: subclass it, call ``super().__init__()`` first, define the
    methods the algorithm calls (``forward``; or ``policy``, ``value``, ``get_actor_params``,
    ...). ``copy.deepcopy(model)`` gives a copy (a target network). ``get_weights`` returns
    every parameter and buffer as numpy arrays (copies); ``set_weights`` loads them."""

    def sync_weights_to(self, target_model: rl.Model, decay: float = 0.0) -> None:
        """``target = decay * target + (1 - decay) * self``, parameter by parameter (buffers are
        left as they are, as in PARL); ``decay=0`` copies. The target must be another model of
        the same class."""
        if target_model is self:
            raise ValueError("sync_weights_to: the target model is this model itself")
        if not isinstance(target_model, Model):
            raise TypeError(f"sync_weights_to: the target must be a parl.Model, got {type(target_model).__name__}")
        if type(target_model).__name__ != type(self).__name__:
            raise TypeError(
                f"sync_weights_to: the target is a {type(target_model).__name__}, this model a "
                f"{type(self).__name__} (weights are synchronised between models of one class)"
            )
        if not 0.0 <= decay <= 1.0:
            raise ValueError(f"sync_weights_to: decay must be in [0, 1], got {decay}")
        targets = dict(target_model.named_parameters())
        sources = list(self.named_parameters())
        missing = [name for name, _ in sources if name not in targets]
        if missing:
            raise KeyError(f"sync_weights_to: the target has no parameters {missing}")
        with torch.no_grad():
            ops.soft_update_([targets[name] for name, _ in sources], [p for _, p in sources], 1.0 - decay)
