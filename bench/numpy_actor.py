"""The actor of ``actor_calls.py``'s ``create_numpy`` bench: a class whose module imports numpy,
as the module of almost every real actor class does (a model, an environment, a replay buffer).

It is a local module (next to the bench, not installed), so it travels by value like a user's
own code; its ``import numpy`` runs in the actor host when the class arrives there.
"""

from __future__ import annotations

import numpy as np


class NumpyEcho:
    """Holds a small array; ``ping`` answers as ``Echo.ping`` does."""

    def __init__(self) -> None:
        self.buffer = np.zeros(16)

    def ping(self) -> None:
        return None
