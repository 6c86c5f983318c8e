"""The master at 200 nodes and 2,000 actors: bench/scale.py's simulation, real processes.

A real master process; 200 simulated worker daemons (4 processes, one gRPC connection each)
speaking the real WorkerSession protocol; 4 client processes placing through real
ClientSessions. It asserts that the protocol works at that size, not how fast: every actor is
placed, status lists them all, released actors die, a silent node's actors are reported dead
within the worker timeout, and after the master is SIGKILLed and restarted every node and
every live actor is back in its table. The full-size run is a benchmark (bench/README.md).
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "bench" / "scale.py"


@pytest.mark.timeout(400)
def test_200_nodes_2000_actors_place_die_and_come_back_after_a_master_restart() -> None:
    proc = subprocess.run(
        [
            sys.executable,
            str(BENCH),
            "--nodes",
            "200",
            "--slots-per-node",
            "16",
            "--actors",
            "2000",
            "--worker-timeout-s",
            "3",
            "--idle-s",
            "1",
            "--kill",
            "40",
        ],
        capture_output=True,
        text=True,
        timeout=360,
        cwd=ROOT,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-4000:]
    lines = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    phases = {row["phase"]: row for row in lines}
    assert list(phases) == ["register", "place", "status", "idle", "kill", "node_loss", "reconnect", "summary"]
    s: dict[str, Any] = phases["summary"]
    assert s["nodes"] == 200 and s["slots"] == 3200
    assert phases["register"]["slots_ready"] == 3200
    assert s["actors_placed"] == 2000 and s["placements_failed"] == 0
    assert s["status_ok"] and s["status_actors"] == 2000 and s["status_nodes"] == 200
    assert s["cli_status_ok"], s  # `actorrt status --json` lists them all too
    assert s["killed"] == 40
    assert s["node_loss_actors"] > 0 and s["node_loss_within_timeout"], s
    assert s["reconnect_complete"] and s["reconnect_nodes"] == 199, s
    assert s["reconnect_actors"] == 2000 - 40 - s["node_loss_actors"]
    for key in (
        "placements_per_s",
        "placement_p50_ms",
        "placement_p99_ms",
        "status_ms",
        "master_rss_mb",
        "master_cpu_pct",
        "master_idle_cpu_pct",
        "node_loss_detect_s",
        "reconnect_s",
    ):
        assert isinstance(s[key], (int, float)) and s[key] >= 0, (key, s[key])


async def test_the_master_lengthens_the_heartbeat_interval_as_the_cluster_grows() -> None:
    """Real daemons take the longer interval the master sends mid-session; a quarter of the
    worker timeout caps it. Budget 1 heartbeat/s: 2 workers -> 2 s; 3 workers -> 2 s (cap)."""
    from actorrt.master.server import Master
    from actorrt.worker.daemon import WorkerDaemon

    async with Master(heartbeat_interval_s=0.5, worker_timeout_s=8.0, heartbeats_per_s=1.0) as master:
        workers = [WorkerDaemon(master.address, cpus=1, reconnect=False, echo_output=False) for _ in range(3)]
        try:
            for w in workers:
                await w.start()
            assert master.servicer.heartbeats.interval(len(master.table.workers)) == 2.0
            for _ in range(100):
                if all(w.heartbeat_interval_s == 2.0 for w in workers):
                    break
                await asyncio.sleep(0.05)
            assert [w.heartbeat_interval_s for w in workers] == [2.0, 2.0, 2.0]
            await asyncio.sleep(3.0)  # two intervals: every worker still in the table
            assert len(master.table.workers) == 3
        finally:
            for w in workers:
                await w.close()
