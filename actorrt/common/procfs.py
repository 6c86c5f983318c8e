"""Facts about processes that every layer may need, read from /proc (Linux)."""

from __future__ import annotations

import os
import socket
from pathlib import Path

__all__ = ["machine", "pid_namespace", "start_time"]


def pid_namespace() -> str:
    """This process's pid namespace (``pid:[4026531836]``): a pid names the same process only
    within one. "" where /proc cannot tell."""
    try:
        return os.readlink("/proc/self/ns/pid")
    except OSError:
        return ""


def start_time(pid: int) -> str:
    """When ``pid`` started (clock ticks since boot), or "" if no such process: a pid plus its
    start time names one process even after the pid is reused."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[19].decode()
    except (OSError, IndexError):
        return ""


def machine() -> str:
    """This boot of this machine, and this PID namespace: a shared ``ACTORRT_HOME`` (an NFS
    home) holds the files of processes on several machines, which a PID names only on its own."""
    try:
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        boot = socket.gethostname()
    try:
        namespace = os.stat("/proc/self/ns/pid").st_ino
    except OSError:
        namespace = 0
    return f"{boot}/{namespace}"
