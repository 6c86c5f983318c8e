"""What several worker test files share: a process helper."""

from __future__ import annotations

from pathlib import Path


def gone(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] == "Z"
    except OSError:
        return True
