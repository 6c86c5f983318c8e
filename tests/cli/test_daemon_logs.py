"""The logs of the daemons ``actorrt start|connect`` run in the background: rotated under their
bound, their flags checked, old ones pruned but never a running daemon's."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import grpc
import pytest

import actorrt
from actorrt.v1 import master_pb2, master_pb2_grpc
from tests.cli.conftest import Printer
from tests.conftest import actorrt_cli, free_port, wait_until


async def test_daemon_logs_rotate_under_their_bound(fresh_home: Path, stop_by_pid: list[int]) -> None:
    max_bytes, backups = 64 * 1024, 2
    port = free_port()
    started = await asyncio.to_thread(
        actorrt_cli,
        "start",
        "--port",
        str(port),
        "--cpus",
        "1",
        "--log-max-bytes",
        str(max_bytes),
        "--log-backups",
        str(backups),
    )
    assert started.returncode == 0, started.stderr
    address = f"127.0.0.1:{port}"
    logs = fresh_home / "logs"

    # Refused RPCs (each may log a warning) and 5,000 echoed actor lines of ~100 bytes: ~0.5 MB.
    async with grpc.aio.insecure_channel(address) as ch:
        stub = master_pb2_grpc.MasterStub(ch)
        for _ in range(1000):
            with pytest.raises(grpc.RpcError):
                await stub.GetClusterStatus(master_pb2.GetClusterStatusRequest(), timeout=5)
    async with actorrt.connect(address, token=(fresh_home / "token").read_text().strip(), log_to_driver=False):
        printer = await Printer.remote()
        assert await printer.spam(5000) == 5000
        await actorrt.kill(printer)

    def last_line_logged() -> bool:
        current = sorted(logs.glob("master-*.log"))
        return bool(current) and "spam line 004999" in current[0].read_text(errors="replace")

    assert await asyncio.to_thread(wait_until, last_line_logged, 15)
    files = sorted(logs.glob("master-*.log*"))
    sizes = {p.name: p.stat().st_size for p in files}
    assert len(files) == backups + 1, sizes  # it rotated, and kept no more than it should
    assert all(size <= max_bytes for size in sizes.values()), sizes
    assert sum(sizes.values()) <= (backups + 1) * max_bytes
    status = await asyncio.to_thread(actorrt_cli, "status", "--json", "--address", address)
    assert status.returncode == 0, status.stderr  # and it serves on


def test_log_rotation_flags_are_checked(fresh_home: Path) -> None:
    out = actorrt_cli("start", "--log-max-bytes", "10")
    assert out.returncode == 2 and "--log-max-bytes" in out.stderr and "must be >= 1024" in out.stderr
    out = actorrt_cli("connect", "--address", "127.0.0.1:1", "--log-backups", "0")
    assert out.returncode == 2 and "--log-backups" in out.stderr and "must be > 0" in out.stderr


def test_old_daemon_logs_are_pruned_but_never_a_running_daemons(fresh_home: Path, stop_by_pid: list[int]) -> None:
    """Every background start or connect logs to a new file set (up to 40 MiB each) and nothing
    ever removed them: a daily start/stop job filled the home. A background start keeps the
    newest DAEMON_LOGS_KEPT daemons' logs, and never a running daemon's, however old."""
    first = actorrt_cli("start", "--port", str(free_port()), "--cpus", "0")
    assert first.returncode == 0, first.stderr
    logs = fresh_home / "logs"
    (running,) = logs.glob("master-*.log")
    os.utime(running, (1, 1))  # older than every other
    for i in range(25):
        (logs / f"worker-{1000 + i}.log").write_text("old\n")
        (logs / f"worker-{1000 + i}.log.1").write_text("older\n")
        os.utime(logs / f"worker-{1000 + i}.log", (100 + i, 100 + i))
    second = actorrt_cli("start", "--port", str(free_port()), "--cpus", "0")
    assert second.returncode == 0, second.stderr
    kept = sorted(p.name for p in logs.glob("worker-*.log"))
    assert kept == [f"worker-{1000 + i}.log" for i in range(5, 25)]
    assert len(list(logs.glob("worker-*.log.1"))) == 20
    assert running.exists() and len(list(logs.glob("master-*.log"))) == 2
