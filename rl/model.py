"""`Model`: a ``torch.nn.Module`` whose weights travel as numpy dicts.

Weights are exchanged as ``dict[str, np.ndarray]`` so that they can cross process boundaries
(pickled, sent over actorrt) without dragging torch tensors or devices along.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

__all__ = ["Model"]


class Model(nn.Module):
    """Base class of every network in ``rl``.

    Subclasses define ``__init__`` and whatever forward methods their algorithm needs; this class
    only adds weight exchange. Runs on the caller's thread; nothing here is thread-safe.
    """

    def get_weights(self) -> dict[str, np.ndarray]:
        """Return a copy of every parameter and buffer as a CPU numpy array, keyed by name."""
        return {name: t.detach().cpu().numpy().copy() for name, t in self.state_dict().items()}

    def set_weights(self, weights: dict[str, np.ndarray]) -> None:
        """Load weights produced by :meth:`get_weights` (of a model with the same architecture).

        Raises ``KeyError``/``RuntimeError`` when names or shapes do not match.
        """
        state = self.state_dict()
        missing = set(state) - set(weights)
        unexpected = set(weights) - set(state)
        if missing or unexpected:
            ours = sum(int(t.numel()) for t in state.values())
            theirs = sum(int(np.size(w)) for w in weights.values())
            if ours != theirs:
                hint = f"; they are the weights of another model ({theirs} numbers, this one has {ours})"
            elif any("first_weight" in n for n in missing | unexpected):  # rl.fused.FusedMLPPair on one side only
                hint = (
                    "; one side was built fused and the other plain: set RL_FUSED the same on every process "
                    "(or pass fused= explicitly)"
                )
            else:
                hint = ""
            raise KeyError(f"set_weights: missing {sorted(missing)}, unexpected {sorted(unexpected)}{hint}")
        with torch.no_grad():
            for name, t in state.items():
                t.copy_(torch.as_tensor(weights[name]))

    @torch.no_grad()
    def sync_weights_to(self, target: Model, decay: float = 0.0) -> None:
        """Soft update: ``target = decay * target + (1 - decay) * self``.

        ``decay=0`` copies the weights (a hard target-network update). Non-float buffers (counts)
        are copied as they are.
        """
        if not 0.0 <= decay <= 1.0:
            raise ValueError(f"decay must be in [0, 1], got {decay}")
        src = self.state_dict()
        for name, t in target.state_dict().items():
            s = src[name]
            if decay == 0.0 or not t.is_floating_point():
                t.copy_(s)
            else:
                t.mul_(decay).add_(s, alpha=1.0 - decay)
