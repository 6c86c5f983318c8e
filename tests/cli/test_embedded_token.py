"""An embedded cluster (``connect()`` with no address) is reachable from this user's other
processes on the machine by its address alone, as a cluster ``actorrt start`` started is: its
token is recorded under its address in a file only this user can read, removed when the cluster
ends, and never trusted once its process is gone. Real processes: the scripts that run the
embedded clusters, and the CLI and scripts that connect to them."""

from __future__ import annotations

import json
import os
import signal
import socket
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cli.conftest import one_line
from tests.conftest import actorrt_cli, wait_until

ROOT = Path(__file__).resolve().parents[2]

EMBEDDED = """
import sys, actorrt

@actorrt.remote_class
class Counter:
    def __init__(self):
        self.n = 0
    def add(self, k):
        self.n += k
        return self.n

with actorrt.connect(num_cpus=1, log_to_driver=False) as c:
    counter = Counter.options(name="shared").remote().result()
    print(c.address, c.token, flush=True)
    sys.stdin.readline()  # until the test says so (or kills us)
print("closed", flush=True)
"""
"""A script with an embedded cluster of one slot and an actor named "shared"; prints its
address and token, and closes the cluster at the first line on its stdin."""

CALLER = """
import sys, actorrt

with actorrt.connect(sys.argv[1]) as c:  # no token: found by the address
    shared = actorrt.get_actor("shared").result()
    print("value", shared.add(5).result(), flush=True)
"""


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("ACTORRT_TOKEN", "ACTORRT_ADDRESS")}
    return {**env, "PYTHONPATH": str(ROOT), **extra}


class _Scripts:
    """Scripts that run embedded clusters, killed by PID at the end of the test."""

    def __init__(self) -> None:
        self.procs: list[subprocess.Popen[str]] = []

    def start(self) -> tuple[subprocess.Popen[str], str, str]:
        """A new embedded-cluster script; returns it, its cluster's address and token."""
        proc = subprocess.Popen(
            [sys.executable, "-c", EMBEDDED],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=_env(),
            cwd="/",
        )
        self.procs.append(proc)
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line, proc.stderr.read() if proc.stderr else ""
        address, token = line.split()
        return proc, address, token

    def close(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()
            proc.communicate()


@pytest.fixture
def scripts(fresh_home: Path) -> Iterator[_Scripts]:
    s = _Scripts()
    try:
        yield s
    finally:
        s.close()


def _record(home: Path, address: str) -> Path:
    return home / "clusters" / f"{address.rpartition(':')[2]}@{socket.gethostname()}.json"


def test_the_users_other_processes_reach_an_embedded_cluster_by_its_address(
    fresh_home: Path, scripts: _Scripts
) -> None:
    """A child process that connected to an embedded cluster's address, or `actorrt status
    --address ADDR`, was refused ("missing token"): a script could not hand its cluster to a
    subprocess, a notebook or a second terminal without passing the token by hand."""
    proc, address, token = scripts.start()
    status = actorrt_cli("status", "--json", "--address", address, env=_env())
    assert status.returncode == 0, status.stderr
    assert [a["name"] for a in json.loads(status.stdout)["actors"]] == ["shared"]
    record = _record(fresh_home, address)  # readable by this user alone
    assert stat.S_IMODE(record.stat().st_mode) == 0o600
    assert stat.S_IMODE(record.parent.stat().st_mode) == 0o700
    assert json.loads(record.read_text())["token"] == token

    # ACTORRT_TOKEN names another cluster's token: the embedded cluster's own is the one its
    # address takes (it made it itself, whatever the variable says).
    caller = subprocess.run(
        [sys.executable, "-c", CALLER, address],
        capture_output=True,
        text=True,
        timeout=60,
        env=_env(ACTORRT_TOKEN="another-clusters-token"),
        cwd="/",
    )
    assert caller.returncode == 0, caller.stderr
    assert "value 5" in caller.stdout

    out, _ = proc.communicate("close\n", timeout=60)
    assert proc.returncode == 0 and "closed" in out
    assert not record.exists()  # removed as the cluster closed
    gone = actorrt_cli("status", "--address", address, "--timeout", "2", env=_env())
    assert one_line(gone), gone.stderr


def test_a_killed_scripts_token_file_is_never_trusted_and_does_not_pile_up(fresh_home: Path, scripts: _Scripts) -> None:
    """A script SIGKILLed cannot remove its file. The next reader of its address finds its
    process gone and removes the file instead of trusting it (here the port serves a cluster
    `actorrt start` started since, whose token the reader then takes); the next embedded
    cluster to start removes those nobody read."""
    first, first_address, first_token = scripts.start()
    second, second_address, _ = scripts.start()
    for proc in (first, second):
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    assert _record(fresh_home, first_address).exists() and _record(fresh_home, second_address).exists()

    port = first_address.rpartition(":")[2]
    started = actorrt_cli("start", "--port", port, "--cpus", "0", env=_env())
    try:
        assert started.returncode == 0, started.stderr
        assert (fresh_home / "token").read_text().strip() != first_token
        status = actorrt_cli("status", "--json", "--address", first_address, env=_env())
        assert status.returncode == 0, status.stderr  # the stale token was not sent
        assert json.loads(status.stdout)["address"] == first_address
        assert not _record(fresh_home, first_address).exists()
    finally:
        assert actorrt_cli("stop", env=_env()).returncode == 0

    assert _record(fresh_home, second_address).exists()  # nobody read it yet
    third, _, _ = scripts.start()
    assert not _record(fresh_home, second_address).exists()  # removed as the third one started
    third.communicate("close\n", timeout=60)
    assert wait_until(lambda: not list((fresh_home / "clusters").iterdir()), 5), list(
        (fresh_home / "clusters").iterdir()
    )


def test_a_worker_joined_to_an_embedded_cluster_ends_with_it(fresh_home: Path, scripts: _Scripts) -> None:
    """`actorrt connect --address ADDR` from a second terminal joins a script's embedded cluster
    (the token found by the address); when the script closes its cluster, the worker is told
    the cluster was stopped on purpose and exits with status 3, saying who stopped it."""
    proc, address, _ = scripts.start()
    log_path = fresh_home / "joined.log"
    with open(log_path, "wb") as log:
        worker = subprocess.Popen(
            [sys.executable, "-m", "actorrt", "connect", "--address", address, "--cpus", "1", "--block"],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=_env(),
        )
    try:
        assert wait_until(lambda: " joined " in log_path.read_text() or worker.poll() is not None, 60)
        status = json.loads(actorrt_cli("status", "--json", "--address", address, env=_env()).stdout)
        assert len(status["nodes"]) == 2, status
        proc.communicate("close\n", timeout=60)
        assert worker.wait(10) == 3, log_path.read_text()
        assert "closed its embedded cluster" in log_path.read_text()
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.wait()
