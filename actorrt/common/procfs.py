"""Facts about processes that every layer may need, read from /proc (Linux)."""

from __future__ import annotations

import os

__all__ = ["pid_namespace"]


def pid_namespace() -> str:
    """This process's pid namespace (``pid:[4026531836]``): a pid names the same process only
    within one. "" where /proc cannot tell."""
    try:
        return os.readlink("/proc/self/ns/pid")
    except OSError:
        return ""
