"""The master at 200 nodes and 2,000 actors: bench/scale.py's simulation, real processes.

A real master process; 200 simulated worker daemons (4 processes, one gRPC connection each)
speaking the real WorkerSession protocol; 4 client processes placing through real
ClientSessions. It asserts that the protocol works at that size, not how fast: every actor is
placed, status lists them all, released actors die, a silent node's actors are reported dead
within the worker timeout, and after the master is SIGKILLed and restarted every node and
every live actor is back in its table. The full-size run is a benchmark (bench/README.md).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "bench" / "scale.py"


@pytest.mark.timeout(400)
def test_200_nodes_2000_actors_place_die_and_come_back_after_a_master_restart() -> None:
    proc = subprocess.run(
        [sys.executable, str(BENCH), "--nodes", "200", "--slots-per-node", "16", "--actors", "2000",
         "--worker-timeout-s", "3", "--idle-s", "1", "--kill", "40"],
        capture_output=True, text=True, timeout=360, cwd=ROOT, check=False,
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
    assert s["killed"] == 40
    assert s["node_loss_actors"] > 0 and s["node_loss_within_timeout"], s
    assert s["reconnect_complete"] and s["reconnect_nodes"] == 199, s
    assert s["reconnect_actors"] == 2000 - 40 - s["node_loss_actors"]
    for key in ("placements_per_s", "placement_p50_ms", "placement_p99_ms", "status_ms", "master_rss_mb",
                "master_cpu_pct", "master_idle_cpu_pct", "node_loss_detect_s", "reconnect_s"):
        assert isinstance(s[key], (int, float)) and s[key] >= 0, (key, s[key])
