"""What several worker test files share: an actor class and a process helper."""

from __future__ import annotations

import os
from pathlib import Path

import actorrt


@actorrt.remote_class
class Echo:
    def echo(self, x: int) -> int:
        return x

    def pid(self) -> int:
        return os.getpid()


def gone(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] == "Z"
    except OSError:
        return True
