"""What the CLI tests share: the ``stop_by_pid`` fixture, which leaves no daemon a test started
running, and the process helpers it needs."""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

import actorrt
from tests.conftest import actorrt_cli


def alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()[0] != "Z"
    except OSError:
        return False


def record_pids(home: Path) -> list[int]:
    return [int(p.stem.split("@")[0]) for p in (home / "processes").glob("*.json")]


def children(parents: set[int]) -> list[int]:
    """Live processes whose parent is one of ``parents``."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            fields = (proc / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[0] != "Z" and int(fields[1]) in parents:
            found.append(int(proc.name))
    return found


def one_line(out: subprocess.CompletedProcess[str]) -> bool:
    return out.returncode == 1 and out.stderr.strip().count("\n") == 0 and "Traceback" not in out.stderr


@pytest.fixture
def stop_by_pid(fresh_home: Path) -> Iterator[list[int]]:
    """After the test: ``actorrt stop``, then SIGKILL whatever recorded or listed PID still runs."""
    extra: list[int] = []
    yield extra
    pids = set(record_pids(fresh_home)) if (fresh_home / "processes").is_dir() else set()
    actorrt_cli("stop", "--timeout", "5")
    for pid in [*pids, *extra]:
        if alive(pid):
            os.kill(pid, signal.SIGKILL)


@actorrt.remote_class
class Printer:
    def spam(self, n: int) -> int:
        for i in range(n):
            print(f"spam line {i:06d} " + "x" * 80)
        return n
