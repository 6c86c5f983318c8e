"""PARL's ``WindowStat``: the mean, min and max of the last ``window_size`` values added."""

from __future__ import annotations

from collections import deque
from typing import Any

import numpy as np

__all__ = ["WindowStat"]


class WindowStat:
    """``add(x)``; ``mean``, ``min``, ``max`` of the last ``window_size`` values (None before
    the first). Values may be numbers or arrays of one shape (numpy reduces over them all)."""

    def __init__(self, window_size: int) -> None:
        if window_size < 1:
            raise ValueError(f"WindowStat: window_size must be >= 1, got {window_size}")
        self.items: deque[Any] = deque(maxlen=window_size)
        self.count = 0
        """Values ever added."""

    def add(self, obj: Any) -> None:
        self.items.append(obj)
        self.count += 1

    @property
    def mean(self) -> Any:
        return np.mean(list(self.items)) if self.items else None

    @property
    def min(self) -> Any:
        return np.min(list(self.items)) if self.items else None

    @property
    def max(self) -> Any:
        return np.max(list(self.items)) if self.items else None
