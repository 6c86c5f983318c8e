"""The actor host -> worker daemon statistics pipe: what travels on it and how.

Each actor host gets the write end of a pipe from its daemon at spawn (its fd in
``ACTORRT_METRICS_FD``); it writes one JSON line per report: a ``CallStats`` snapshot (counts,
bytes, latency buckets over ``LATENCY_BUCKETS``), or a note such as ``{"shm_peer": pid}``. That
pipe is not the stdout stream that carries the user's prints. Writers: the host's loop; the
reader is the daemon's ``worker.metrics.read_host_stats``. Plain functions, no state.
"""

from __future__ import annotations

import json
import os
from typing import Any

__all__ = ["LATENCY_BUCKETS", "METRICS_FD_ENV", "metrics_fd_from_env", "report_line", "stats_pipe"]

METRICS_FD_ENV = "ACTORRT_METRICS_FD"
# Seconds. Actor calls run from microseconds (a counter) to minutes (a training step).
LATENCY_BUCKETS: tuple[float, ...] = (
    0.0001,
    0.00025,
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    30.0,
    60.0,
)


def report_line(fd: int, fields: dict[str, Any]) -> None:
    """Write one JSON line to the daemon's pipe (a few hundred bytes: one atomic write)."""
    try:
        os.write(fd, (json.dumps(fields, separators=(",", ":")) + "\n").encode())
    except OSError:
        pass


def metrics_fd_from_env() -> int | None:
    """The pipe the daemon passed for call statistics, made non-inheritable; None if there is none."""
    value = os.environ.pop(METRICS_FD_ENV, "")
    if not value.isdigit():
        return None
    fd = int(value)
    try:
        os.set_inheritable(fd, False)
    except OSError:
        return None
    return fd


def stats_pipe() -> tuple[int, int]:
    """(read end for the daemon, write end to pass to one host with ``pass_fds``).

    Both ends are non-inheritable: ``pass_fds`` hands the write end to its own host only. An
    inheritable one would leak into hosts spawned meanwhile (uvloop does not close other fds),
    and the read end would then never see EOF.
    """
    return os.pipe()
