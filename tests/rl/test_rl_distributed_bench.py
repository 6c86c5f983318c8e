"""bench/rl_distributed_sac.py runs both sides (single process, remote collectors on a real embedded
cluster) end to end and summarises them, and refuses bad arguments by name (no timing checks:
the quick budgets are too small to say which side is faster)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.examples_run import run_python

pytest.importorskip("mujoco", reason="the mujoco extra is not installed (pip install .[mujoco])")


def test_quick_mode_writes_a_run_per_side_and_a_summary(tmp_path: Path) -> None:
    out = tmp_path / "rows.jsonl"
    proc = run_python(["bench/rl_distributed_sac.py", "--quick", "--ratios", "0.5", "--out", str(out)], timeout=400)
    assert proc.returncode == 0, proc.stderr[-4000:]
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert rows == [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    runs = [r for r in rows if "summary" not in r]
    summaries = [r for r in rows if "summary" in r]
    assert [(r["updates_per_step"], r["collectors"]) for r in runs] == [(0.5, 0), (0.5, 2)]
    for r in runs:
        assert "error" not in r, r
        # --quick: 300 warm-up steps, then 200 updates' worth of env steps at the run's ratio
        # (steps come in rollouts of 64 per collector, or of 64 in the single process).
        want = 300 + round(200 / r["updates_per_step"])
        assert r["total_steps"] == want, r
        assert want <= r["env_steps"] <= want + 64 * max(1, r["collectors"]), r
        assert r["updates"] >= 0.9 * 200, r
        assert r["frames_per_s"] > 0 and r["wall_s"] > 0 and r["loadavg_start"], r
    (s,) = summaries
    single, dist = runs
    assert s["updates_per_step"] == 0.5 and s["rounds"] == 1 and s["collectors"] == 2
    assert s["single_frames_per_s"] == [single["frames_per_s"]] and s["distributed_frames_per_s"] == [
        dist["frames_per_s"]
    ]
    assert s["ratio_per_round"] == [round(dist["frames_per_s"] / single["frames_per_s"], 3)]
    assert s["ratio_mean"] == s["ratio_median"] == s["ratio_per_round"][0]
    assert s["distributed_faster_rounds"] == int(s["ratio_per_round"][0] > 1)


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["--ratios", "1,0"], "--ratios"),
        (["--ratios", "-1"], "--ratios"),
        (["--collectors", "0"], "--collectors"),
        (["--timeout", "0"], "--timeout"),
    ],
)
def test_bad_arguments_are_refused_by_name_before_any_run(args: list[str], named: str) -> None:
    proc = run_python(["bench/rl_distributed_sac.py", *args], timeout=60)
    assert proc.returncode == 2, proc.stdout
    assert named in proc.stderr and proc.stdout == ""


def test_a_run_past_its_timeout_is_an_error_row_and_exit_1(tmp_path: Path) -> None:
    out = tmp_path / "rows.jsonl"
    proc = run_python(
        ["bench/rl_distributed_sac.py", "--quick", "--ratios", "1", "--timeout", "0.5", "--out", str(out)]
    )
    assert proc.returncode == 1, proc.stderr[-2000:]
    runs = [json.loads(line) for line in out.read_text().splitlines() if "summary" not in line]
    assert len(runs) == 2 and all(r["error"] == "timed out after --timeout 0.5 s" for r in runs), runs
    summary = json.loads(out.read_text().splitlines()[-1])
    assert summary["ratio_per_round"] == [] and summary["ratio_mean"] is None
