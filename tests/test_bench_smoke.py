"""bench/actor_calls.py runs once at tiny sizes and prints valid JSON lines (no timing checks)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "bench" / "actor_calls.py"


def _run(*args: str) -> list[dict[str, object]]:
    # --quick arms the bench's own watchdog at 150 s: a hang fails with where it waited.
    try:
        proc = subprocess.run(
            [sys.executable, str(BENCH), "--quick", *args], capture_output=True, text=True, timeout=240, cwd=ROOT
        )
    except subprocess.TimeoutExpired as e:
        out, err = (x.decode(errors="replace") if isinstance(x, bytes) else x or "" for x in (e.stdout, e.stderr))
        pytest.fail(f"past 240 s; stdout ends:\n{out[-1500:]}\nstderr ends:\n{err[-4000:]}")
    assert proc.returncode == 0, f"stdout ends:\n{proc.stdout[-1500:]}\nstderr ends:\n{proc.stderr[-4000:]}"
    rows = [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]
    assert rows, proc.stderr[-4000:]
    for row in rows:
        assert {"bench", "system", "value", "unit"} <= row.keys(), row
        assert isinstance(row["value"], (int, float)), row
    return rows


def test_quick_bench_prints_json_lines() -> None:
    rows = _run()
    benches = {row["bench"] for row in rows}
    assert {
        "cold_start_connect_to_first_call",
        "actor_create_warm",
        "call_latency_median",
        "pipelined_calls_1_actor",
        "payload_to_actor_1MiB",
        "cpu_speedup_2_actors",
        "idle_rss_mb",
    } <= benches
    assert {row["system"] for row in rows} == {"actorrt"}


def test_quick_bench_side_by_side_with_the_floors() -> None:
    rows = _run("--floors", "--only", "latency,pipelined")
    assert {row["system"] for row in rows} == {"actorrt", "grpc_floor", "tcp_floor"}


def test_the_watchdog_says_where_the_benches_wait_then_stops_them_and_their_cluster() -> None:
    """A run past ``--watchdog`` prints each task's chain of awaits, cancels the benches (the
    cluster is closed by their ``finally``) and exits 3; no process it started outlives it."""
    mark = f"bench-watchdog-{os.getpid()}-{time.monotonic_ns()}"
    # The watchdog counts from the start, the cluster's opening included: 20 s leaves a loaded
    # host time to open it, and the idle bench (3 s to settle, then 120 s) is still waiting then.
    argv = [sys.executable, str(BENCH), "--quick", "--only", "idle", "--idle-seconds", "120", "--watchdog", "20"]
    proc = subprocess.run(
        argv, capture_output=True, text=True, timeout=120, cwd=ROOT, env={**os.environ, "BENCH_TEST_MARK": mark}
    )
    assert proc.returncode == 3, proc.stderr[-4000:]
    where = proc.stderr.split("watchdog: still running after 20 s; the benches wait in\n", 1)[-1].splitlines()[0]
    assert where.startswith("  run_system (actor_calls.py:") and "-> bench_idle (actor_calls.py:" in where, proc.stderr
    assert "the benches ran past --watchdog 20 s" in proc.stderr
    deadline = time.monotonic() + 20
    while (left := _processes_marked(mark)) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not left, f"processes started by the bench still run: {left}"


def _processes_marked(mark: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if mark.encode() in (entry / "environ").read_bytes():
                found.append(int(entry.name))
        except OSError:
            continue
    return found


def test_payload_floor_bench_prints_json_lines() -> None:
    argv = [
        sys.executable,
        str(ROOT / "bench" / "payload_floor.py"),
        "--sizes",
        "1",
        "--nets",
        "loopback",
        "--reps",
        "2",
    ]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=240, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-4000:]
    rows = [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]
    assert {(r["peer"], r["direction"]) for r in rows} == {
        (p, d) for p in ("tcp", "grpc", "actorrt", "actorrt_chunks") for d in ("to_server", "from_server")
    }, rows
    for row in rows:
        assert row["gib_s"] > 0 and row["sender"]["cpu_ms_per_mib"] >= 0, row
        assert row["peer"] == "tcp" or row["of_tcp_floor"] > 0, row


def test_host_turnover_bench_runs_both_modes_and_reports_their_ratio(tmp_path: Path) -> None:
    out = tmp_path / "turnover.jsonl"
    proc = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "host_turnover.py"), "--quick", "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=240,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    rows = [json.loads(line) for line in proc.stdout.splitlines()]
    assert rows == [json.loads(line) for line in out.read_text().splitlines()]
    *runs, summary = rows
    assert sorted(r["mode"] for r in runs) == ["fork", "spawn"]
    assert all(r["cycles"] == 6 and r["wall_s"] > 0 for r in runs)
    by_mode = {r["mode"]: r["ms_per_cycle"] for r in runs}
    assert summary["spawn_over_fork"] == round(by_mode["spawn"] / by_mode["fork"], 2)
