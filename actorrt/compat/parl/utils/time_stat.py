"""PARL's ``TimeStat``: ``with stat:`` times a block; ``mean``, ``min``, ``max`` of the last
``window_size`` times, in seconds."""

from __future__ import annotations

import time
from types import TracebackType
from typing import Any

from actorrt.compat.parl.utils.window_stat import WindowStat

__all__ = ["TimeStat"]


class TimeStat:
    def __init__(self, window_size: int = 1) -> None:
        self.time_samples = WindowStat(window_size)
        self._start_time: float | None = None

    def __enter__(self) -> None:
        self._start_time = time.time()

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None, tb: TracebackType | None) -> None:
        assert self._start_time is not None
        self.time_samples.add(time.time() - self._start_time)

    @property
    def mean(self) -> Any:
        return self.time_samples.mean

    @property
    def min(self) -> Any:
        return self.time_samples.min

    @property
    def max(self) -> Any:
        return self.time_samples.max
