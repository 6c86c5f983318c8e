"""PARL's step-based hyper-parameter schedules: ``PiecewiseScheduler`` and
``LinearDecayScheduler`` (``step(step_num=1)`` advances and returns the value)."""

from __future__ import annotations

import itertools
import operator
from collections.abc import Sequence
from typing import SupportsIndex

from rl.bookkeeping import linear_schedule

__all__ = ["LinearDecayScheduler", "PiecewiseScheduler"]


def _steps(step_num: SupportsIndex) -> int:
    """``step_num`` as an int >= 1 (numpy's ints too)."""
    try:
        steps = operator.index(step_num) if not isinstance(step_num, bool) else 0
    except TypeError:
        steps = 0
    if steps < 1:
        raise ValueError(f"step_num must be an int >= 1, got {step_num!r}")
    return steps


class PiecewiseScheduler:
    """``[(step_0, value_0), (step_1, value_1), ...]``, steps increasing: after ``step`` has
    advanced ``cur_step`` steps, the value is ``value_K`` with ``step_K <= cur_step < step_K+1``
    (``value_0`` before ``step_1``, whatever ``step_0`` is, as in PARL)."""

    def __init__(self, scheduler_list: Sequence[tuple[int, float]]) -> None:
        if not scheduler_list:
            raise ValueError("PiecewiseScheduler: scheduler_list is empty; give [(step, value), ...]")
        for (a, _), (b, _) in itertools.pairwise(scheduler_list):
            if not a < b:
                raise ValueError(f"PiecewiseScheduler: steps must increase, got {a} then {b}")
        self.scheduler_list = list(scheduler_list)
        self.cur_index = 0
        self.cur_step = 0
        self.cur_value = self.scheduler_list[0][1]

    def step(self, step_num: SupportsIndex = 1) -> float:
        self.cur_step += _steps(step_num)
        entries = self.scheduler_list
        while self.cur_index + 1 < len(entries) and self.cur_step >= entries[self.cur_index + 1][0]:
            self.cur_index += 1
            self.cur_value = self.scheduler_list[self.cur_index][1]
        return self.cur_value


class LinearDecayScheduler:
    """``start_value * (1 - cur_step / max_steps)``: from ``start_value`` down to 0 at
    ``max_steps``, then 0."""

    def __init__(self, start_value: float, max_steps: int) -> None:
        if not max_steps > 0:
            raise ValueError(f"LinearDecayScheduler: max_steps must be > 0, got {max_steps}")
        self.start_value = start_value
        self.max_steps = max_steps
        self.cur_step = 0

    def step(self, step_num: SupportsIndex = 1) -> float:
        self.cur_step = min(self.cur_step + _steps(step_num), self.max_steps)
        return linear_schedule(self.start_value, 0.0, 1.0, self.cur_step / self.max_steps)
