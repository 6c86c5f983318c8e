"""``actorrt start``: on IPv6 loopback, refusing absurd resource counts before anything starts,
keeping a running cluster's token when it fails, and leaving no daemon behind on Ctrl-C."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

import actorrt
from actorrt.common import home
from tests.cli.conftest import Printer, alive, children, one_line, record_pids
from tests.conftest import actorrt_cli, free_port, wait_until


async def test_a_cluster_on_ipv6_loopback_serves(fresh_home: Path, stop_by_pid: list[int]) -> None:
    """`actorrt start --host ::1` failed ("the address is in use or not available"): addresses
    were joined as HOST:PORT, which gRPC reads as one IPv6 literal without a port. IPv6 hosts are
    written in brackets, the master's address and the actors' endpoints alike."""
    port = free_port()
    started = actorrt_cli("start", "--host", "::1", "--port", str(port), "--cpus", "1")
    assert started.returncode == 0, started.stderr
    assert f"[::1]:{port}" in started.stdout
    async with actorrt.connect(f"[::1]:{port}", log_to_driver=False, timeout=20) as c:
        status = await c.status()
        echo = await Printer.remote()
        assert await echo.spam(2) == 2
        [row] = (await c.status()).actors
        assert row["endpoint"].startswith("[::1]:") and len(status.nodes) == 1


def test_absurd_resource_counts_are_refused_before_anything_starts(fresh_home: Path, stop_by_pid: list[int]) -> None:
    port = free_port()
    t0 = time.monotonic()
    out = actorrt_cli("start", "--port", str(port), "--gpus", "10000000")
    assert one_line(out) and "--gpus 10000000" in out.stderr, out.stderr
    out = actorrt_cli("connect", "--address", f"127.0.0.1:{port}", "--cpus", str(10**7), "--token", "t")
    assert one_line(out) and "--cpus 10000000" in out.stderr, out.stderr
    assert time.monotonic() - t0 < 20  # fails fast: nothing was started and waited for
    assert not (fresh_home / "processes").exists() or not record_pids(fresh_home)
    with socket.socket() as s:  # nothing listens on the port
        assert s.connect_ex(("127.0.0.1", port)) != 0

    from actorrt.worker.daemon import WorkerDaemon

    with pytest.raises(ValueError, match=r"gpus 10000000 is out of range|gpus 10000000 is more than"):
        WorkerDaemon("127.0.0.1:1", cpus=1, gpus=10**7)
    with pytest.raises(ValueError, match="cpus 10000000 is out of range"):
        WorkerDaemon("127.0.0.1:1", cpus=10**7)


def test_a_start_that_fails_keeps_the_running_clusters_token(fresh_home: Path, stop_by_pid: list[int]) -> None:
    """A second `actorrt start` whose metrics port was taken wrote its new token over the running
    cluster's before it failed: every later `status`, `logs` or `connect` on this machine failed
    authentication against the cluster that still ran."""
    port, metrics_port = free_port(), free_port()
    started = actorrt_cli("start", "--port", str(port), "--cpus", "1", "--metrics-port", str(metrics_port))
    assert started.returncode == 0, started.stderr
    token = home.token_path().read_text()
    failed = actorrt_cli("start", "--port", str(free_port()), "--cpus", "0", "--metrics-port", str(metrics_port))
    assert failed.returncode == 1 and "metrics" in failed.stderr, failed.stderr
    assert home.token_path().read_text() == token
    status = actorrt_cli("status", "--json")
    assert status.returncode == 0, status.stderr
    assert json.loads(status.stdout)["slots"]["total"] == 1


def test_ctrl_c_while_start_waits_leaves_no_daemon(fresh_home: Path, tmp_path: Path, stop_by_pid: list[int]) -> None:
    """The daemon `actorrt start` runs in the background is in a session of its own, so the
    terminal's Ctrl-C never reached it: the command exited 130 and the master came up anyway,
    holding the port (the next start said "address in use")."""
    (tmp_path / "slow_preload.py").write_text("import time\ntime.sleep(30)\n")
    env = dict(os.environ, PYTHONPATH=f"{tmp_path}:{os.environ.get('PYTHONPATH', '')}")
    port = free_port()
    cli = subprocess.Popen(
        [sys.executable, "-m", "actorrt", "start", "--port", str(port), "--cpus", "1", "--preload", "slow_preload"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    stop_by_pid.append(cli.pid)
    assert wait_until(lambda: bool(children({cli.pid})), timeout=20)
    daemons = children({cli.pid})
    stop_by_pid.extend(daemons)
    time.sleep(1.0)
    cli.send_signal(signal.SIGINT)
    _, err = cli.communicate(timeout=30)
    logs = "".join(p.read_text(errors="replace")[-1500:] for p in (fresh_home / "logs").glob("*.log"))
    assert cli.returncode == 130, (err, logs)
    assert wait_until(lambda: not any(alive(pid) for pid in daemons), timeout=15), (daemons, err, logs)
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as servers do: TIME_WAIT is no owner
        s.bind(("127.0.0.1", port))  # no listener left on it
        s.listen()
