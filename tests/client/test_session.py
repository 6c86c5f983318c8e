"""The client's session with the master: a client that stops reading it (the master bounds
what it buffers for it), and a notice the client fails to handle (the session reads on)."""

from __future__ import annotations

import asyncio
import re
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

import actorrt
from actorrt.client.control import Control
from tests.conftest import ProcCluster, Talker, wait_until

# ---- a client that stops reading its session -------------------------------------------------

STALLING_CLIENT = textwrap.dedent(
    """
    import asyncio, os, sys, threading, time
    import actorrt

    @actorrt.remote_class
    class Flood:
        def flood(self, delay, seconds, exit_code):
            time.sleep(delay)
            line = "x" * 8000
            end = time.monotonic() + seconds
            while time.monotonic() < end:
                for _ in range(60):
                    print(line)
                time.sleep(0.05)
            sys.stdout.flush()
            if exit_code:
                os._exit(exit_code)

    address, token, ready = sys.argv[1:4]
    with actorrt.connect(address, token=token) as c:
        a1 = Flood.remote().result()
        a2 = Flood.remote().result()
        waiting = Flood.remote()  # no free slot until a2 exits: placed while we do not read
        time.sleep(0.5)
        a1.flood(1.5, 30, 0)
        a2.flood(1.5, 5, 3)
        with open(ready + ".tmp", "w") as f:
            f.write(a1.actor_id + " " + a2.actor_id)
        os.rename(ready + ".tmp", ready)
        # The client stops reading its session: its loop thread blocks until the test says go.
        went = threading.Event()
        c.loop.call_soon_threadsafe(lambda: (sys.stdin.readline(), went.set()))
        went.wait()
        a3 = waiting.result(60)
        cause = asyncio.run_coroutine_threadsafe(c.death_cause(a2.actor_id, 30), c.loop).result()
        # To a file: on the stdout pipe, the output thread's long actor lines may split the line.
        with open(ready + ".result", "w") as f:
            f.write(f"RESULT placed {a3.actor_id} died {a2.actor_id} {cause!r}\\n")
        actorrt.kill(a1).result()
        actorrt.kill(a3).result()
    """
)


def rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no VmRSS for {pid}")


def test_a_client_that_stops_reading_does_not_make_the_master_grow(cluster: ProcCluster, tmp_path: Path) -> None:
    master = cluster.procs[0].pid
    script, ready = tmp_path / "stall.py", tmp_path / "ready"
    script.write_text(STALLING_CLIENT)
    client = subprocess.Popen(
        [sys.executable, str(script), cluster.address, cluster.token, str(ready)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        assert wait_until(ready.exists, 60), "the client did not start its actors"
        a1, a2 = ready.read_text().split()
        base = peak = rss_bytes(master)
        stalled_until = time.monotonic() + 12
        while time.monotonic() < stalled_until:
            peak = max(peak, rss_bytes(master))
            time.sleep(0.2)
        _, err = client.communicate(b"go\n", timeout=120)
    finally:
        if client.poll() is None:
            client.kill()
            client.wait()
    drained = rss_bytes(master)
    stderr = err.decode(errors="replace")
    assert client.returncode == 0, stderr[-3000:]
    print(
        f"master RSS: base {base / 2**20:.1f} MiB, peak +{(peak - base) / 2**20:.1f} MiB, "
        f"after the drain +{(drained - base) / 2**20:.1f} MiB"
    )
    assert peak - base < 60 * 2**20, f"the master grew by {(peak - base) / 2**20:.0f} MiB"
    assert drained - base < 60 * 2**20, f"the master kept {(drained - base) / 2**20:.0f} MiB after the drain"

    # The lines that did not fit were counted, per actor, in one notice each time ...
    dropped = re.findall(
        r"^\(Flood pid=\d+ id=(\w{8})\) \[actorrt: (\d+) lines of output dropped: the client did not keep up; "
        r"'actorrt logs (\w+)' has them\]$",
        stderr,
        re.M,
    )
    assert dropped, stderr[-3000:]
    assert {full for _, _, full in dropped} <= {a1, a2} and all(full.startswith(short) for short, _, full in dropped)
    print(f"{sum(int(n) for _, n, _ in dropped)} lines dropped and counted in {len(dropped)} notices")
    # ... and the control notices sent meanwhile (a placement, a death) all arrived.
    written = Path(f"{ready}.result").read_text()
    result = re.fullmatch(r"RESULT placed (\w+) died (\w+) '(.+)'\n", written)
    assert result is not None, written
    print(result.group(0))
    assert result.group(2) == a2 and "code 3" in result.group(3)


# ---- a notice the client fails to handle ------------------------------------------------------


async def test_a_notice_the_client_fails_to_handle_does_not_stop_the_ones_after_it(
    cluster: ProcCluster, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """One notice whose handling raises (here the first line of an actor's output) is logged
    with its traceback; the session reads on, so the next placement is answered."""
    handle = Control._on_notice
    failed: list[str] = []

    def fails_once(self: Control, notice: Any) -> None:
        if not failed and notice.WhichOneof("notice") == "actor_output":
            failed.append("actor_output")
            raise RuntimeError("injected: a bug handling this notice")
        handle(self, notice)

    monkeypatch.setattr(Control, "_on_notice", fails_once)
    async with cluster.connect():
        first = await Talker.remote()
        assert await first.say("hello") == "hello"
        deadline = time.monotonic() + 30
        while not failed and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        assert failed, "the actor's output never reached the client"
        second = await asyncio.wait_for(Talker.remote(), 30)  # answered by a later notice
        assert await asyncio.wait_for(second.say("again"), 30) == "again"
        await actorrt.kill(first)
        await actorrt.kill(second)
    logged = [r for r in caplog.records if "could not handle the master's actor_output notice" in r.getMessage()]
    assert logged and logged[0].exc_info is not None and "injected" in str(logged[0].exc_info[1])
