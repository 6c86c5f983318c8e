"""``actorrt stop`` signals only the processes its records name: never a process that reused a
recorded pid, never another machine's on a shared home."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.conftest import actorrt_cli


def test_stop_never_signals_a_process_that_reused_a_recorded_pid(fresh_home: Path) -> None:
    records = fresh_home / "processes"
    records.mkdir(parents=True)
    # Unrelated processes whose command lines contain "actorrt", under PIDs the records name.
    impostors = [
        subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", "actorrt", "--block"]) for _ in range(2)
    ]
    try:
        started = int(Path(f"/proc/{impostors[0].pid}/stat").read_text().rsplit(")", 1)[1].split()[19])
        stale = {"pid": impostors[0].pid, "start_time": started - 100, "kind": "master", "address": "127.0.0.1:1"}
        legacy = {"pid": impostors[1].pid, "kind": "worker", "address": "127.0.0.1:1"}  # no start time at all
        for record in (stale, legacy):
            (records / f"{record['pid']}.json").write_text(json.dumps(record))

        out = actorrt_cli("stop", "--timeout", "2")
        assert out.returncode == 0, out.stderr
        assert "nothing to stop" in out.stdout and "stopped" not in out.stdout
        time.sleep(0.5)  # a signal, had one been sent, lands at once
        assert all(p.poll() is None for p in impostors), "stop signalled a process that was not its own"
        assert not list(records.glob("*.json"))  # the stale records are gone
    finally:
        for p in impostors:
            os.kill(p.pid, signal.SIGKILL)
            p.wait()


def test_stop_leaves_other_machines_records_and_processes_alone(fresh_home: Path) -> None:
    """With ACTORRT_HOME shared between machines (an NFS home, as xparl clusters often have),
    `actorrt stop` on the head deleted the records of the workers on the other machines (their
    PIDs were not alive here) and `stop` there then found nothing: the daemons ran on. A record
    names its machine (boot and PID namespace) and only that machine stops or removes it. (The
    other machine is played by a record that says so, naming a live local process under a PID
    and start time that would otherwise match.)"""
    records = fresh_home / "processes"
    records.mkdir(parents=True)
    elsewhere = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", "actorrt", "--block"])
    try:
        started = int(Path(f"/proc/{elsewhere.pid}/stat").read_text().rsplit(")", 1)[1].split()[19])
        record = records / f"{elsewhere.pid}@another-machine.json"
        record.write_text(
            json.dumps({"pid": elsewhere.pid, "start_time": started, "machine": "another-boot/1", "kind": "worker"})
        )
        out = actorrt_cli("stop", "--timeout", "2")
        assert out.returncode == 0, out.stderr
        assert "nothing to stop" in out.stdout and "1 record(s) of actorrt processes on other machines" in out.stdout
        time.sleep(0.5)  # a signal, had one been sent, lands at once
        assert elsewhere.poll() is None and record.exists()
    finally:
        os.kill(elsewhere.pid, signal.SIGKILL)
        elsewhere.wait()
