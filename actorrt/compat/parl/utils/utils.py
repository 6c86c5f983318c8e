"""PARL's small helpers (``parl.utils.utils``): ``has_func``, ``to_str``, ``to_byte``,
``check_model_method``, ``isnotebook``, ``MAX_INT32`` and the backend flags (torch, never
Paddle, here)."""

from __future__ import annotations

import importlib.util
import sys
from typing import Any

# Every name here is PARL's; the package re-exports them all (its __all__).
MAX_INT32 = 0x7FFFFFFF
_HAS_FLUID = False
_HAS_PADDLE = False
_HAS_TORCH = importlib.util.find_spec("torch") is not None
_IS_WINDOWS = sys.platform == "win32"
_IS_MAC = sys.platform == "darwin"


def has_func(obj: Any, fun: str) -> bool:
    """Whether ``obj`` has a callable attribute ``fun``."""
    return callable(getattr(obj, fun, None))


def to_str(byte: bytes) -> str:
    return byte.decode()


def to_byte(string: str) -> bytes:
    return string.encode()


def isnotebook() -> bool:
    """Whether the code runs in a Jupyter notebook (an IPython kernel)."""
    ipython = sys.modules.get("IPython")
    get = getattr(ipython, "get_ipython", None)
    shell = get() if get is not None else None
    return type(shell).__name__ == "ZMQInteractiveShell"


def check_model_method(model: Any, method: str, algo: str) -> None:
    """Raise ``AssertionError`` (as PARL) when ``model`` lacks ``method``, which algorithm
    ``algo`` calls; for ``forward``, when the model's class does not define its own."""
    if method == "forward":
        forward = getattr(type(model), "forward", None)
        assert callable(forward), "forward should be a function in model class"
        base = getattr(super(type(model), model), "forward", None)
        assert forward is not getattr(base, "__func__", base), f"{algo}'s model needs to implement forward method. \n"
    else:
        assert callable(getattr(model, method, None)), f"{algo}'s model needs to implement {method} method. \n"
