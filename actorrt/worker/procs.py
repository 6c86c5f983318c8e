"""The operating-system side of a worker daemon's actor hosts, for Linux: the process table
and an actor's process tree from ``/proc``, signals, and the per-daemon folder of host working
directories (with an owner record, so the next daemon removes the folder of one that died).

Plain synchronous functions, called from the daemon's event loop.
"""

from __future__ import annotations

import os
import shutil
import signal
import tempfile
import time
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    import asyncio

from actorrt.common.procfs import pid_namespace, start_time

__all__ = [
    "CLOCK_TICKS",
    "HostProcess",
    "ProcInfo",
    "kill_group",
    "kill_pid",
    "make_workdirs",
    "memory_bytes",
    "memory_used_bytes",
    "node_cpu_ticks",
    "process_table",
    "process_tree",
    "proportional_bytes",
    "reap_orphans",
    "remove_dead_workdirs",
    "remove_dir",
    "signal_proc",
    "tree_proportional_bytes",
]

_PAGE = os.sysconf("SC_PAGE_SIZE")
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")  # per second, in /proc's CPU times


@dataclass(frozen=True)
class ProcInfo:
    ppid: int
    session: int
    rss_bytes: int
    zombie: bool = False
    cpu_ticks: int = 0  # user + system CPU time so far, in CLOCK_TICKS


def process_table() -> dict[int, ProcInfo]:
    """Every live process of this machine, from one pass over ``/proc`` (Linux)."""
    table = {}
    try:
        names = os.listdir("/proc")
    except OSError:
        return {}
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
            table[int(name)] = ProcInfo(
                int(fields[1]),
                int(fields[3]),
                int(fields[21]) * _PAGE,
                fields[0] == b"Z",
                int(fields[11]) + int(fields[12]),
            )
        except (OSError, IndexError, ValueError):
            continue  # it just ended
    return table


def reap_orphans(table: dict[int, ProcInfo], waited: Collection[int]) -> list[int]:
    """Reap the processes of ``table`` that ended as our children, except ``waited`` (those
    something of ours waits for); their pids. For a daemon that is PID 1 (a container's entry
    point): processes whose parent ended are re-parented to it, and nothing else would reap them."""
    me = os.getpid()
    reaped = []
    for pid, proc in table.items():
        if proc.zombie and proc.ppid == me and pid not in waited:
            try:
                if os.waitpid(pid, os.WNOHANG)[0] == pid:
                    reaped.append(pid)
            except ChildProcessError:
                continue
    return reaped


def process_tree(root: int, table: dict[int, ProcInfo]) -> list[int]:
    """``root`` and every process it started: its descendants and the members of its session
    (an actor host leads its own, ``start_new_session``), so a child that re-parented to init
    when its parent exited still counts."""
    children: dict[int, list[int]] = {}
    for pid, proc in table.items():
        children.setdefault(proc.ppid, []).append(pid)
    tree = {root} | {pid for pid, proc in table.items() if proc.session == root}
    todo = list(tree)
    while todo:
        for child in children.get(todo.pop(), ()):
            if child not in tree:
                tree.add(child)
                todo.append(child)
    return sorted(tree & table.keys())


def proportional_bytes(pid: int) -> int | None:
    """The proportional set size of a process (its resident pages, each shared one divided by
    the number of processes sharing it), from ``/proc/<pid>/smaps_rollup``: what a tree of
    forked processes really holds adds up over them, where their RSS counts each shared
    copy-on-write page once per process. None when it cannot be read (the process ended, or a
    kernel before 4.14). Costs the kernel a walk of the process's mappings: read it only when
    the RSS says it matters."""
    try:
        with open(f"/proc/{pid}/smaps_rollup", "rb") as f:
            for line in f:
                if line.startswith(b"Pss:"):
                    return int(line.split()[1]) * 1024
    except (OSError, IndexError, ValueError):
        pass
    return None


def tree_proportional_bytes(tree: list[int], table: dict[int, ProcInfo]) -> int:
    """The proportional set size of the processes ``tree`` (each one's RSS from ``table`` where
    it cannot be read)."""
    return sum(proportional_bytes(pid) or table[pid].rss_bytes for pid in tree)


def memory_bytes() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (OSError, ValueError):
        return 0


def memory_used_bytes() -> int:
    """The node's memory in use, ``MemTotal - MemAvailable`` of ``/proc/meminfo`` (what ``free``
    calls used, page cache that can be dropped not counted); 0 where it cannot be read."""
    fields: dict[bytes, int] = {}
    try:
        with open("/proc/meminfo", "rb") as f:
            for line in f:
                name, _, rest = line.partition(b":")
                if name in (b"MemTotal", b"MemAvailable"):
                    fields[name] = int(rest.split()[0]) * 1024
    except (OSError, IndexError, ValueError):
        return 0
    return max(0, fields.get(b"MemTotal", 0) - fields.get(b"MemAvailable", fields.get(b"MemTotal", 0)))


def node_cpu_ticks() -> tuple[int, int]:
    """(busy, total) CPU time of the node's cores so far, in ``CLOCK_TICKS``, from the ``cpu``
    line of ``/proc/stat`` (busy: all but idle and iowait); (0, 0) where it cannot be read."""
    try:
        with open("/proc/stat", "rb") as f:
            first = f.readline().split()
        ticks = [int(v) for v in first[1:9]]  # user nice system idle iowait irq softirq steal
    except (OSError, ValueError):
        return 0, 0
    if first[:1] != [b"cpu"] or len(ticks) < 5:
        return 0, 0
    total = sum(ticks)
    return total - ticks[3] - ticks[4], total


class HostProcess(Protocol):
    """An actor host's process as the daemon sees it: an ``asyncio.subprocess.Process``, or a
    ``_forked.ForkedHost``."""

    @property
    def pid(self) -> int: ...

    @property
    def returncode(self) -> int | None: ...

    @property
    def stdout(self) -> asyncio.StreamReader | None: ...

    @property
    def stderr(self) -> asyncio.StreamReader | None: ...

    def send_signal(self, sig: int) -> None: ...

    async def wait(self) -> int: ...


def signal_proc(proc: HostProcess, sig: int) -> None:
    """Signal a child process unless it was already reaped (its pid may be another's now)."""
    if proc.returncode is None:
        try:
            proc.send_signal(sig)
        except ProcessLookupError:
            pass


def kill_pid(pid: int, sig: int = signal.SIGKILL) -> None:
    try:
        os.kill(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


_WORKDIRS_PREFIX = "actorrt-worker-"
_OWNER_FILE = "owner"


def make_workdirs() -> str:
    """This daemon's folder in the temp dir, ``actorrt-worker-<pid>-*``, holding one working
    directory per actor host (shipped files land there) and an ``owner`` file naming this process, so
    a later daemon can remove it should this one die without cleaning up (SIGKILL)."""
    path = tempfile.mkdtemp(prefix=f"{_WORKDIRS_PREFIX}{os.getpid()}-")
    Path(path, _OWNER_FILE).write_text(f"{os.getpid()} {start_time(os.getpid())} {pid_namespace()}\n")
    return path


def remove_dead_workdirs(grace_s: float = 60.0) -> list[str]:
    """Remove the folders of worker daemons of this machine that are gone; returns them. A folder
    whose owner file is missing or unreadable is removed once older than ``grace_s`` (it may be
    one that is being made right now). One whose owner lives in another pid namespace (a
    container sharing this temp dir) is left: its pid means nothing here."""
    removed = []
    ours = pid_namespace()
    for path in Path(tempfile.gettempdir()).glob(_WORKDIRS_PREFIX + "*"):
        try:
            pid, started, *namespace = (path / _OWNER_FILE).read_text().split()
            if namespace and namespace[0] != ours:
                continue
            alive = start_time(int(pid)) == started
        except (OSError, ValueError):
            try:
                alive = time.time() - path.stat().st_mtime < grace_s
            except OSError:
                continue
        if not alive:
            shutil.rmtree(path, ignore_errors=True)
            if not path.exists():
                removed.append(str(path))
    return removed


def remove_dir(path: str) -> None:
    if path:
        shutil.rmtree(path, ignore_errors=True)
