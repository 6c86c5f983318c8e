"""Names others chose reach people escaped: an actor whose class and name carry terminal escapes
(a window title, a clear screen, a bell) and newlines is shown by ``actorrt status``, the header
of ``actorrt logs``, the label of its output on the driver's terminal and in its daemon's log,
the master's log and the dashboard, every one through ``common.text.printable``."""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

import actorrt
from actorrt.common.text import printable
from tests.conftest import ProcCluster, actorrt_cli, free_port, run_driver, wait_until

CLASS = "Evil\x1b]0;owned\x07\x1b[2J\nRow\u202e"
NAME = "n\x1b[31mred\x07\nsplit"
RAW = (b"\x1b", b"\x07", "\u202e".encode())

DRIVER = """
import sys, time, actorrt

def ping(self):
    print("hello from the actor", flush=True)
    return "pong"

Evil = actorrt.remote_class(type(sys.argv[3], (), {"ping": ping}))
with actorrt.connect(sys.argv[1], token=sys.argv[2]) as c:
    h = Evil.options(name=sys.argv[4], lifetime="detached").remote().result()
    assert h.ping().result() == "pong"
    time.sleep(1.5)  # its line reaches this terminal
    print("actor", h.actor_id, flush=True)
"""


@pytest.fixture
def with_dashboard(tmp_path: Path) -> Iterator[tuple[ProcCluster, str]]:
    port = free_port()
    c = ProcCluster(tmp_path / "home").start(workers=1, master_args=("--dashboard-port", str(port)))
    try:
        yield c, f"http://127.0.0.1:{port}"
    finally:
        c.stop()


def _raw(data: bytes) -> list[bytes]:
    return [r for r in RAW if r in data]


def test_names_with_terminal_escapes_are_shown_escaped_everywhere(with_dashboard: tuple[ProcCluster, str]) -> None:
    cluster, url = with_dashboard
    driver = run_driver(cluster, DRIVER, CLASS, NAME)
    assert driver.returncode == 0, driver.stderr
    actor_id = driver.stdout.split("actor ")[-1].strip()
    # the label of its line on the driver's terminal
    label = next(line for line in driver.stdout.splitlines() if "hello from the actor" in line)
    assert label.startswith(f"({printable(CLASS)} pid="), label
    assert not _raw(driver.stdout.encode()), driver.stdout

    table = actorrt_cli("status", "--address", cluster.address, "--token", cluster.token)
    assert table.returncode == 0, table.stderr
    assert not _raw(table.stdout.encode()), table.stdout
    row = next(line for line in table.stdout.splitlines() if line.startswith(actor_id))
    assert printable(CLASS)[:20] in row and printable(NAME)[:14] in row  # one row, the names escaped
    assert not any(line.startswith(("Row", "split")) for line in table.stdout.splitlines())
    assert f"  {printable(CLASS)}" in table.stdout  # actors by class

    logs = actorrt_cli("logs", actor_id, "--address", cluster.address, "--token", cluster.token)
    assert logs.returncode == 0, logs.stderr
    assert f"== actor {actor_id} ({printable(CLASS)}) on " in logs.stderr and not _raw(logs.stderr.encode())
    assert "hello from the actor" in logs.stdout

    with urllib.request.urlopen(url + "/api/status", timeout=10) as r:
        shown = json.loads(r.read())
    actor = next(a for a in shown["actors"] if a["actor_id"] == actor_id)
    assert actor["class_name"] == printable(CLASS) and actor["name"] == printable(NAME)

    with cluster.connect() as c:
        c.kill(actorrt.get_actor(NAME).result()).result()
    master_log = cluster.home / "proc-0.log"
    assert wait_until(lambda: f"actor {actor_id} ({printable(CLASS)}) died".encode() in master_log.read_bytes(), 10)
    for log in (master_log, cluster.home / "proc-1.log"):  # the master's, the worker daemon's
        data = log.read_bytes()
        assert not _raw(data), (log.name, [line for line in data.splitlines() if _raw(line)][:3])
    assert f"({printable(CLASS)} pid=".encode() in (cluster.home / "proc-1.log").read_bytes()  # its echoed line
