"""The real CLI, run as subprocesses: start, connect, status, stop and its error lines."""

from __future__ import annotations

import json
import os
import socket
import stat
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from tests.conftest import actorrt_cli, free_port, wait_until


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def _pids(home: Path) -> list[int]:
    return [int(p.stem.split("@")[0]) for p in (home / "processes").glob("*.json")]


@pytest.fixture
def started(fresh_home: Path):
    port = free_port()
    out = actorrt_cli("start", "--port", str(port), "--cpus", "1")
    assert out.returncode == 0, out.stderr
    pids = _pids(fresh_home)
    yield f"127.0.0.1:{port}", out
    actorrt_cli("stop")
    for pid in pids:  # stopped by PID, whatever the test did
        if _alive(pid):
            os.kill(pid, 9)


def test_start_status_connect_stop(started, fresh_home: Path) -> None:
    address, out = started
    assert f"master at {address}" in out.stdout and "actorrt connect --address" in out.stdout
    token_file = fresh_home / "token"
    assert stat.S_IMODE(token_file.stat().st_mode) == 0o600

    table = actorrt_cli("status")  # address from the last start, token from the file
    assert table.returncode == 0, table.stderr
    assert f"cluster {address}" in table.stdout and "slots 0/1 used" in table.stdout

    joined = actorrt_cli("connect", "--address", address, "--cpus", "1")
    assert joined.returncode == 0, joined.stderr
    assert "joined" in joined.stdout

    status = json.loads(actorrt_cli("status", "--json", "--address", address).stdout)
    assert status["slots"] == {"total": 2, "used": 0, "free": 2}
    assert len(status["nodes"]) == 2 and all(n["slots_ready"] == 1 for n in status["nodes"])

    pids = _pids(fresh_home)
    assert len(pids) == 2
    stopped = actorrt_cli("stop")
    assert stopped.returncode == 0 and stopped.stdout.count("stopped") == 2
    assert wait_until(lambda: not any(_alive(p) for p in pids), 10)
    assert not _pids(fresh_home)
    assert "nothing to stop" in actorrt_cli("stop").stdout


def test_a_script_runs_against_a_started_cluster(started, fresh_home: Path) -> None:
    address, _ = started
    root = Path(__file__).resolve().parents[2]
    run = subprocess.run(
        [sys.executable, str(root / "examples" / "hello_world.py"), "--address", address],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 0, run.stderr
    assert "Hello, world!" in run.stdout


def test_busy_port_is_one_clear_line(fresh_home: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        out = actorrt_cli("start", "--port", str(port), "--cpus", "1")
    assert out.returncode == 1
    assert out.stderr.strip().count("\n") == 0 and "address is in use" in out.stderr
    assert "Traceback" not in out.stderr and not _pids(fresh_home)


def test_unreachable_address_is_one_clear_line(fresh_home: Path) -> None:
    port = free_port()
    out = actorrt_cli("status", "--address", f"127.0.0.1:{port}")
    assert out.returncode == 1 and "no actorrt master answers" in out.stderr
    assert out.stderr.strip().count("\n") == 0
    out = actorrt_cli("connect", "--address", f"127.0.0.1:{port}", "--token", "t", "--timeout", "2")
    assert out.returncode == 1 and "Traceback" not in out.stderr
    assert out.stderr.strip().count("\n") == 0 and str(port) in out.stderr


def test_connect_without_a_token_says_where_to_get_one(fresh_home: Path) -> None:
    out = actorrt_cli("connect", "--address", "127.0.0.1:1")
    assert out.returncode == 1 and "no token" in out.stderr and "ACTORRT_TOKEN" in out.stderr


def test_wrong_token_is_refused(started, fresh_home: Path) -> None:
    address, _ = started
    out = actorrt_cli("status", "--address", address, "--token", "wrong")
    assert out.returncode == 1 and "wrong token" in out.stderr


@pytest.mark.parametrize(
    "args, message",
    [
        (["start", "--cpus", "-1"], "must be >= 0"),
        (["start", "--port", "70000"], "must be 0..65535"),
        (["connect", "--address", "nohost"], "--address: HOST:PORT with a port in 1..65535"),
        (["connect"], "--address"),
        (["frobnicate"], "invalid choice"),
        (["start", "--gpu", "0,1"], "xparl's --gpu listed device ids; actorrt takes a count, --gpus N"),
        (["connect", "--address", "127.0.0.1:1", "--gpu", "2"], "xparl's --gpu listed device ids"),
    ],
)
def test_bad_flags_are_one_clear_line(args: list[str], message: str, fresh_home: Path) -> None:
    out = actorrt_cli(*args)
    assert out.returncode == 2 and message in out.stderr
    assert out.stderr.strip().count("\n") == 0 and "Traceback" not in out.stderr


def test_monitor_port_is_xparls_name_for_the_status_page(fresh_home: Path) -> None:
    port, page = free_port(), free_port()
    out = actorrt_cli("start", "--port", str(port), "--cpus", "1", "--monitor_port", str(page))
    pids = _pids(fresh_home)
    try:
        assert out.returncode == 0, out.stderr
        with urllib.request.urlopen(f"http://127.0.0.1:{page}/api/status", timeout=10) as reply:
            assert reply.status == 200 and "nodes" in json.loads(reply.read())
    finally:
        actorrt_cli("stop")
        for pid in pids:
            if _alive(pid):
                os.kill(pid, 9)


def test_more_gpus_than_cuda_visible_devices_names_are_refused(fresh_home: Path) -> None:
    """Actors get the devices CUDA_VISIBLE_DEVICES names, by place: --gpus cannot exceed them."""
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="4,6")
    out = actorrt_cli("start", "--port", str(free_port()), "--gpus", "3", env=env)
    assert out.returncode == 1 and "CUDA_VISIBLE_DEVICES='4,6' names 2 devices" in out.stderr
    assert "--gpus 2 at most" in out.stderr and not _pids(fresh_home)


def test_cpu_num_is_xparls_name_for_cpus(fresh_home: Path) -> None:
    port = free_port()
    out = actorrt_cli("start", "--port", str(port), "--cpu_num", "2")
    pids = _pids(fresh_home)
    try:
        assert out.returncode == 0, out.stderr
        address = f"127.0.0.1:{port}"
        joined = actorrt_cli("connect", "--address", address, "--cpu_num", "1")
        assert joined.returncode == 0, joined.stderr
        pids = _pids(fresh_home)
        status = json.loads(actorrt_cli("status", "--json", "--address", address).stdout)
        assert sorted(n["cpus"] for n in status["nodes"]) == [1, 2]
        bad = actorrt_cli("connect", "--address", address, "--cpu_num", "0")
        assert bad.returncode == 2 and "--cpus/--cpu_num: must be >= 1" in bad.stderr
    finally:
        actorrt_cli("stop")
        for pid in pids:  # stopped by PID, whatever the test did
            if _alive(pid):
                os.kill(pid, 9)
