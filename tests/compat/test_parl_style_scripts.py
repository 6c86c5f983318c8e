"""Scripts written as a PARL user writes them (``tests/compat/parl_scripts/``: this project's own,
not PARL's), run through ``python -m actorrt.compat.parl`` to their last line: PARL's torch API
(``parl.Model``, ``parl.Agent``, ``parl.algorithms.PolicyGradient``), ``parl.utils`` and
``parl.env`` with ``gym`` mapped onto gymnasium, and PARL's remote API against a cluster from the
real CLI. They run wherever the suite runs; PARL's own scripts, read from a PARL checkout, are in
``test_parl_torch_scripts.py`` and ``test_parl_scripts.py``."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from tests.conftest import ProcCluster

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = Path(__file__).resolve().parent / "parl_scripts"


def _run(script: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    env = dict(env or os.environ, PYTHONPATH=str(ROOT), RL_TORCH_THREADS="1")
    return subprocess.run(
        [sys.executable, "-m", "actorrt.compat.parl", str(script), *args],
        capture_output=True,
        text=True,
        cwd=script.parent,
        env=env,
        timeout=120,
    )


def _copy(name: str, to: Path) -> Path:
    """The script folder ``name`` copied to ``to`` (what it writes, train_log/, stays there)."""
    return Path(shutil.copytree(SCRIPTS / name, to / name))


def test_a_policy_gradient_script_trains_through_the_runner(tmp_path: Path) -> None:
    out = _run(_copy("cartpole_pg", tmp_path) / "train.py", "--episodes", "100")
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    lines = out.stdout.strip().splitlines()  # PARL's logger writes to stdout
    assert [int(m.group(1)) for line in lines if (m := re.search(r"episode (\d+), train reward", line))] == [50, 100]
    assert re.search(r"test reward: [\d.]+$", lines[-1]), lines[-1]
    assert "gym is not installed" in out.stderr  # said once, by the runner


def test_a_remote_script_runs_on_a_started_cluster(cluster: ProcCluster, tmp_path: Path) -> None:
    script = _copy("remote_search", tmp_path) / "train.py"
    out = _run(script, "--address", cluster.address, "--steps", "3", env=dict(cluster.env))
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    lines = out.stdout.strip().splitlines()
    assert [line.split("] ", 1)[1].split(",")[0] for line in lines if ", best " in line] == [
        "step 1",
        "step 2",
        "step 3",
    ]
    assert re.search(r"done: best score [\d.]+ with 2 evaluators$", lines[-1]), lines[-1]
    assert list((script.parent / "train_log").rglob("events.out.tfevents.*")), "no TensorBoard scalars"
