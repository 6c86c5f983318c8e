"""Sane bounds on the CPU and GPU counts a worker offers.

A worker's counts size tables on the master and its placement work (``--gpus 10000000`` cost
the master 560 MB and up to a second per placement), so they are checked where they enter:
``actorrt start/connect`` and ``WorkerDaemon`` against this machine, and the master's
``RegisterWorker`` against the absolute bounds below, whatever machine the worker claims to be.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

__all__ = ["MAX_CPUS", "MAX_GPUS", "MAX_GPUS_UNDETECTED", "check_counts", "max_cpus", "visible_devices", "visible_gpus"]

MAX_CPUS = 2**16  # per worker, whatever the machine: the master's bound
MAX_GPUS = 1024  # per worker, whatever the machine: the master's bound
MAX_GPUS_UNDETECTED = 64  # when this machine's GPUs cannot be counted (no NVIDIA driver)
CPUS_PER_CORE = 64  # oversubscription is legitimate (slots that mostly wait), up to this


def max_cpus() -> int:
    """The most CPU slots a worker on this machine may offer: max(1024, 64 x cores)."""
    return min(MAX_CPUS, max(1024, CPUS_PER_CORE * (os.cpu_count() or 1)))


def visible_gpus() -> int | None:
    """How many NVIDIA GPUs this machine has, or None when it cannot tell (no driver)."""
    gpus = Path("/proc/driver/nvidia/gpus")
    if gpus.is_dir():
        return sum(1 for _ in gpus.iterdir())
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if out.returncode != 0:
        return None
    return sum(1 for line in out.stdout.splitlines() if line.startswith("GPU "))


def check_counts(cpus: int, gpus: int, cpus_name: str = "cpus", gpus_name: str = "gpus") -> None:
    """Raise ValueError, naming the argument, when this machine cannot honestly offer the counts.

    CPUs: 1 .. max(1024, 64 x cores). GPUs: 0 .. the NVIDIA GPUs the machine has, or 0 .. 64
    when it has no NVIDIA driver to count them with (other kinds of accelerators).
    """
    limit = max_cpus()
    if not 1 <= cpus <= limit:
        raise ValueError(
            f"{cpus_name} {cpus} is out of range: a worker on this machine offers 1..{limit} cpus "
            f"(max(1024, {CPUS_PER_CORE} x {os.cpu_count() or 1} cores))"
        )
    if gpus < 0:
        raise ValueError(f"{gpus_name} must be >= 0, got {gpus}")
    if gpus == 0:
        return
    visible = visible_gpus()
    if visible is None:
        if gpus > MAX_GPUS_UNDETECTED:
            raise ValueError(
                f"{gpus_name} {gpus} is out of range: this machine's GPUs cannot be counted (no NVIDIA "
                f"driver), so a worker offers at most {MAX_GPUS_UNDETECTED}"
            )
    elif gpus > visible:
        raise ValueError(f"{gpus_name} {gpus} is more than the {visible} NVIDIA GPUs this machine has")


def visible_devices(gpu_ids: list[int], node_devices: str | None) -> str:
    """An actor's ``CUDA_VISIBLE_DEVICES`` for the node's GPU slots ``gpu_ids`` (0..N-1): the
    devices themselves, or, where the daemon was started with ``CUDA_VISIBLE_DEVICES`` set,
    the ones it names at those places (``--gpus 2`` with ``CUDA_VISIBLE_DEVICES=2,3``: 2 and 3)."""
    if node_devices is None:
        return ",".join(str(g) for g in gpu_ids)
    named = [d.strip() for d in node_devices.split(",") if d.strip()]
    if any(g >= len(named) for g in gpu_ids):
        raise ValueError(
            f"GPU slots {gpu_ids} of this node, but its CUDA_VISIBLE_DEVICES={node_devices!r} names "
            f"{len(named)} devices: start the worker with --gpus {len(named)} at most"
        )
    return ",".join(named[g] for g in gpu_ids)
