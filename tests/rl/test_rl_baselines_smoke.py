"""bench/rl_baselines.py --suite mujoco --quick runs end to end and writes well-formed rows (no
timing or return checks: 1.5k env steps learn nothing)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rl.precision import native_bfloat16_matmul
from tests.examples_run import run_python

pytest.importorskip("mujoco", reason="the mujoco extra is not installed (pip install .[mujoco])")
pytest.importorskip("stable_baselines3", reason="stable-baselines3 is not installed")


def test_mujoco_quick_mode_writes_rows_for_both_sides(tmp_path: Path) -> None:
    out = tmp_path / "rows.jsonl"
    # The compiled side runs SAC and TD3, in bfloat16 only where this CPU has native bfloat16
    # matmuls (elsewhere they are ~15x slower); sb3 runs every algorithm.
    compiled = "oursbf16compile" if native_bfloat16_matmul() else "ourscompile"
    sides = f"ours,{compiled},sb3"
    args = ["bench/rl_baselines.py", "--suite", "mujoco", "--quick", "--algos", "sac,td3,ppo", "--sides", sides]
    args += ["--out", str(out)]
    proc = run_python(args)
    assert proc.returncode == 0, proc.stderr[-4000:]
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert all("error" not in r for r in rows), rows
    by_runner = {r["runner"] + ("_" + r["algo"] if r["runner"] == "micro" else ""): r for r in rows}
    assert set(by_runner) == {
        *("micro_sac", "micro_td3", "ours_sac", f"{compiled}_sac", "sb3_sac"),
        *("ours_td3", f"{compiled}_td3", "sb3_td3", "ours_ppo", "sb3_ppo"),
    }
    for algo, hidden in (("sac", [256, 256]), ("td3", [400, 300])):
        micro = by_runner[f"micro_{algo}"]
        assert micro["algo"] == algo and micro["hidden"] == hidden, micro
        for side in ("ours", compiled, "sb3"):
            assert micro[f"{side}_median_ms"] > 0 and micro[f"{side}_steps_timed"] == 20, micro
    for name in ("ours_sac", f"{compiled}_sac", "sb3_sac", "ours_td3", f"{compiled}_td3", "sb3_td3"):
        r = by_runner[name]
        assert r["env_steps"] == 1500, r
        assert [step for step, _ in r["curve"]] == [500, 1000, 1500], r  # the learning curve's points
        assert r["updates"] == 500, r  # one per env step after learning_starts (1000)
        assert set(r["checkpoints"]) == {"750", "1500"}, r
        assert r["checkpoints"]["1500"]["mean_return"] is not None, r  # one 1000-step episode finished
        assert r["reached_3000"] is None and r["loadavg_start"] and r["loadavg_end"]
        # the mean action, one 1000-step episode at each checkpoint, its time not in the wall-clock
        assert r["eval_episodes"] == 1 and all(at["eval_return"] is not None for at in r["checkpoints"].values()), r
    for name in ("ours_ppo", "sb3_ppo"):
        r = by_runner[name]
        assert r["env_steps"] == 2048 and r["updates"] == 1, r  # one whole rollout of n_steps 2048
        assert set(r["checkpoints"]) == {"750", "1500"} and r["episodes"] == 2, r
        assert r["checkpoints"]["1500"]["mean_return"] is not None, r
        assert "eval_return" not in r["checkpoints"]["1500"], r  # evaluated for SAC and TD3 only
    assert "ours_sac" in proc.stdout and "sb3_td3" in proc.stdout  # the summary table
    assert "one SAC gradient step" in proc.stdout and "one TD3 gradient step" in proc.stdout
