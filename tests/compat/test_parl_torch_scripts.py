"""PARL's own torch training scripts (``benchmark/torch/`` of PARL's source, read from
``$PARL_SRC``, default ``/work/parl-src``; skipped without it), unchanged, each run to its final
line as a user runs it (``python -m actorrt.compat.parl train.py ARGS``), with arguments small
enough for CI: PARL's torch API (``parl.Model``, ``parl.algorithms``, ``MAenv``) in a real
script, with the runner's ``parl.utils``, ``parl.env`` and ``gym``."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BENCHMARK = Path(os.environ.get("PARL_SRC", "/work/parl-src")) / "benchmark" / "torch"

pytestmark = pytest.mark.skipif(not BENCHMARK.is_dir(), reason=f"PARL's source is not at {BENCHMARK} (set PARL_SRC)")


def _run(script: str, *args: str, cwd: Path, timeout: float = 120) -> list[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "RL_TORCH_THREADS": "1"}
    out = subprocess.run(
        [sys.executable, "-m", "actorrt.compat.parl", str(BENCHMARK / script), *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    return out.stdout.strip().splitlines()  # PARL's logger writes to stdout


def test_maddpg_simple_spread_trains_saves_and_restores(tmp_path: Path) -> None:
    pytest.importorskip("mpe2")
    model_dir = tmp_path / "model"
    args = ["--env", "simple_spread", "--test_every_episodes", "5", "--model_dir", str(model_dir)]
    lines = _run("maddpg/train.py", *args, "--max_episodes", "10", cwd=tmp_path)
    assert re.search(
        r"total_steps 250, episode 10, reward -?[\d.]+, agents rewards \[.*\], episode steps 25$", lines[-1]
    )
    assert sum("Evaluation over: 3 episodes" in line for line in lines) == 2
    assert sorted(p.name for p in model_dir.iterdir()) == ["agent_0", "agent_1", "agent_2"]
    lines = _run("maddpg/train.py", *args, "--max_episodes", "1", "--restore", cwd=tmp_path)
    assert "episode 1," in lines[-1]


def test_quickstart_runs_its_1000_episodes(tmp_path: Path) -> None:
    lines = _run("QuickStart/train.py", cwd=tmp_path)
    tests = [float(m.group(1)) for line in lines if (m := re.search(r"Test reward: ([\d.]+)$", line))]
    assert len(tests) == 10  # one every 100 episodes
    assert "Test reward" in lines[-1]


def test_sac_learns_through_its_script(tmp_path: Path) -> None:
    """Past the 10,000 warm-up steps, so that the agent learns (300 updates), on Pendulum."""
    lines = _run("sac/train.py", "--env", "Pendulum-v1", "--train_total_steps", "10300", cwd=tmp_path)
    assert re.search(r"Total Steps: 10400 Reward: -?[\d.]+$", lines[-1])
    assert sum("Evaluation over: 5 episodes" in line for line in lines) == 3  # at 0, 5000 and 10000 steps
