"""PARL's ``parl.utils.tensorboard`` (and ``summary``): ``add_scalar``, ``add_histogram``,
``flush`` and ``close`` on one TensorBoard writer per process, made at the first call in the
logger's directory (``logger.set_dir``; without one, ``train_log/<script name>``, emptied, as
PARL does), and flushed after every call. torch's ``SummaryWriter`` writes the files."""

from __future__ import annotations

import threading
from typing import Any

from actorrt.compat.parl.utils import logger
from actorrt.compat.parl.utils.machine_info import get_ip_address

__all__ = ["add_histogram", "add_scalar", "close", "flush"]

_lock = threading.Lock()
_writer: Any = None


def _get_writer() -> Any:
    global _writer
    if _writer is None:
        logdir = logger.get_dir()
        if logdir is None:
            logdir = logger.auto_set_dir(action="d")
            logger.warning(
                f"[tensorboard] logdir is None, will save tensorboard files to {logdir}\n"
                f"View the data using: tensorboard --logdir={logdir} --host={get_ip_address()}"
            )
        from torch.utils.tensorboard import SummaryWriter

        _writer = SummaryWriter(log_dir=logdir)
    return _writer


def add_scalar(tag: str, scalar_value: Any, global_step: int | None = None, *args: Any, **kwargs: Any) -> None:
    """Record ``scalar_value`` (a number, numpy's included) for ``tag`` at ``global_step``."""
    with _lock:
        writer = _get_writer()
        writer.add_scalar(tag, scalar_value, global_step, *args, **kwargs)
        writer.flush()


def add_histogram(tag: str, values: Any, global_step: int | None = None, *args: Any, **kwargs: Any) -> None:
    with _lock:
        writer = _get_writer()
        writer.add_histogram(tag, values, global_step, *args, **kwargs)
        writer.flush()


def flush() -> None:
    with _lock:
        _get_writer().flush()


def close() -> None:
    """Close the writer (a later call opens another, in the logger's directory then)."""
    global _writer
    with _lock:
        if _writer is not None:
            _writer.close()
            _writer = None
