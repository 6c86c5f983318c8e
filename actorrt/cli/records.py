"""The records of the daemons ``actorrt start|connect`` left running: one JSON file per process
under the home folder's ``processes/``, naming its pid, start time and machine, so that
``actorrt stop`` signals only a process that is still the one recorded (never a recycled pid, never
another machine's on a shared home). CLI thread.
"""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path
from typing import Any

from actorrt.common import home, procfs
from actorrt.common.procfs import machine


def records_dir() -> Path:
    return home.state_dir() / "processes"


def record_path(pid: int) -> Path:
    """``PID@HOST.json``: two machines' daemons with the same PID do not share a record."""
    return records_dir() / f"{pid}@{socket.gethostname()}.json"


def start_time(pid: int) -> int | None:
    """When process ``pid`` started, in clock ticks since boot (``procfs.start_time``), as records
    hold it; None if there is no such process.

    With the PID it names one process for good: a recycled PID has another start time.
    """
    found = procfs.start_time(pid)
    return int(found) if found else None


def write_record(**fields: Any) -> Path:
    home.state_dir("processes", create=True)
    path = record_path(os.getpid())
    tmp = path.with_suffix(".tmp")
    record = {"pid": os.getpid(), "start_time": start_time(os.getpid()), "machine": machine(), **fields}
    tmp.write_text(json.dumps(record))
    tmp.replace(path)
    return path


def read_records(every_machine: bool = False) -> tuple[list[dict[str, Any]], int]:
    """The records of this machine's processes (one written before records named their machine
    counts as this machine's; ``every_machine``: all), and how many other machines' there are."""
    records, others, here = [], 0, machine()
    for path in sorted(records_dir().glob("*.json")):
        try:
            record = {**json.loads(path.read_text()), "_path": str(path)}
        except (OSError, ValueError):
            continue
        if every_machine or record.get("machine", here) == here:
            records.append(record)
        else:
            others += 1
    return records, others


def alive(record: dict[str, Any]) -> bool:
    """Whether the process a record names still runs: same PID *and* same start time.

    A record without a start time (written by an older actorrt) cannot tell its process from a
    recycled PID, so it never counts as alive: ``stop`` signals nothing on its word.
    """
    pid = int(record["pid"])
    if record.get("start_time") is None or start_time(pid) != record["start_time"]:
        return False
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
    return b"actorrt" in cmdline  # empty for a zombie
