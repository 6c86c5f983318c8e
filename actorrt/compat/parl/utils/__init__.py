"""PARL's ``parl.utils``, as PARL's scripts use it: ``logger``, ``summary`` / ``tensorboard``
(TensorBoard scalars), ``ReplayMemory``, ``WindowStat``, ``TimeStat``, the schedulers,
``calc_gae``, ``CSVLogger``, ``machine_info`` and PARL's small helpers (``check_model_method``...).

Built on ``rl`` where it has the piece (``rl.replay``, ``rl.ops``, ``rl.bookkeeping``); those
names are imported when first used, so ``from parl.utils import logger`` needs neither torch
nor gymnasium. What differs from PARL is in docs/parl.md.
"""

from __future__ import annotations

import importlib
from typing import Any

from actorrt.compat.parl.utils import logger
from actorrt.compat.parl.utils.csv_logger import CSVLogger
from actorrt.compat.parl.utils.machine_info import (
    get_free_tcp_port,
    get_gpu_count,
    get_ip_address,
    get_port_from_range,
    is_gpu_available,
    is_port_available,
    is_xpu_available,
)
from actorrt.compat.parl.utils.utils import (
    _HAS_FLUID,
    _HAS_PADDLE,
    _HAS_TORCH,
    _IS_MAC,
    _IS_WINDOWS,
    MAX_INT32,
    check_model_method,
    has_func,
    isnotebook,
    to_byte,
    to_str,
)

__all__ = [
    "MAX_INT32",
    "_HAS_FLUID",
    "_HAS_PADDLE",
    "_HAS_TORCH",
    "_IS_MAC",
    "_IS_WINDOWS",
    "CSVLogger",
    "LinearDecayScheduler",
    "PiecewiseScheduler",
    "ReplayMemory",
    "calc_discount_sum_rewards",
    "calc_gae",
    "check_model_method",
    "get_free_tcp_port",
    "get_gpu_count",
    "get_ip_address",
    "get_port_from_range",
    "has_func",
    "is_gpu_available",
    "is_port_available",
    "is_xpu_available",
    "isnotebook",
    "logger",
    "to_byte",
    "to_str",
]

# Imported when first used: they are built on rl (torch).
_LAZY = {
    "ReplayMemory": "replay_memory",
    "calc_gae": "rl_utils",
    "calc_discount_sum_rewards": "rl_utils",
    "LinearDecayScheduler": "scheduler",
    "PiecewiseScheduler": "scheduler",
}
_SUBMODULES = ("summary", "tensorboard", "window_stat", "time_stat", "scheduler", "rl_utils", "replay_memory")


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(f"{__name__}.{_LAZY[name]}"), name)
    if name in _SUBMODULES:
        return importlib.import_module(f"{__name__}.{name}")
    if name.startswith("__"):
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from actorrt.compat.parl._hooks import unknown_name

    raise AttributeError(unknown_name(f"parl.utils.{name}"))
