"""bench/rl_baselines.py --suite mujoco --quick runs end to end and writes well-formed rows (no
timing or return checks: 1.5k env steps learn nothing); stopped mid-run, it writes what the run
had reached."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from rl.precision import native_bfloat16_matmul
from tests.examples_run import ROOT, run_python

pytest.importorskip("mujoco", reason="the mujoco extra is not installed (pip install .[mujoco])")


def test_mujoco_quick_mode_writes_rows_for_both_sides(tmp_path: Path) -> None:
    pytest.importorskip("stable_baselines3", reason="stable-baselines3 is not installed")
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
    # Each run reports its progress at each point of its curve.
    assert "sb3_td3 HalfCheetah-v5 seed 0: 1000 env steps," in proc.stderr, proc.stderr[-2000:]
    assert "one SAC gradient step" in proc.stdout and "one TD3 gradient step" in proc.stdout


def _children_of_seed(seed: int) -> list[int]:
    """PIDs of benchmark children running ``seed`` (their spec is on their command line)."""
    pids = []
    for proc in Path("/proc").iterdir():
        try:
            cmdline = (proc / "cmdline").read_bytes().decode(errors="replace")
        except OSError:
            continue
        if "--child-json" in cmdline and f'"seed": {seed},' in cmdline:
            pids.append(int(proc.name))
    return pids


def test_a_stopped_benchmark_writes_its_run_so_far_as_a_partial_row(tmp_path: Path) -> None:
    """SIGTERM to a benchmark mid-run (a session out of time): the run's child is stopped with it,
    and the run's row up to its last reported point is written, marked ``partial``, exit 143."""
    out = tmp_path / "rows.jsonl"
    seed = 7000 + os.getpid() % 1000  # marks this test's child among the machine's processes
    # No learning (learning_starts = steps): random actions, a point every 500 env steps.
    args = ["bench/rl_baselines.py", "--suite", "mujoco", "--env", "Hopper-v5", "--algos", "td3", "--sides", "ours"]
    args += ["--steps", "1000000", "--learning-starts", "1000000", "--curve-every", "500", "--eval-episodes", "0"]
    args += ["--no-micro", "--first-seed", str(seed), "--out", str(out)]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    bench = subprocess.Popen(
        [sys.executable, *args], cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        assert bench.stderr is not None
        reported = []
        for line in bench.stderr:
            if "env steps" in line:
                reported.append(line)
                if len(reported) == 2:
                    break
        assert len(reported) == 2, reported
        assert reported[0].startswith(f"ours_td3 Hopper-v5 seed {seed}: 500 env steps, ")
        assert _children_of_seed(seed), "no child running the seed"
        bench.send_signal(signal.SIGTERM)
        stdout, stderr = bench.communicate(timeout=60)
        assert bench.returncode == 128 + signal.SIGTERM, stderr[-2000:]
        assert "written as a partial row" in stderr
        (row,) = [json.loads(line) for line in out.read_text().splitlines()]
        assert row["partial"] is True and row["runner"] == "ours_td3" and row["seed"] == seed, row
        assert 1000 <= row["env_steps"] < 1_000_000 and row["env_steps"] % 500 == 0, row
        assert [s for s, _ in row["curve"]] == list(range(500, row["env_steps"] + 1, 500)), row
        assert row["checkpoints"] == {} and row["updates"] is None and row["cpu"], row
        assert json.loads(stdout.strip().splitlines()[-1]) == row  # printed as it is written
        assert _children_of_seed(seed) == []  # the child went with it
    finally:
        if bench.poll() is None:
            bench.kill()
            bench.wait()
        for pid in _children_of_seed(seed):
            os.kill(pid, signal.SIGKILL)
