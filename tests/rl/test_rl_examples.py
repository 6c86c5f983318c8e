"""Examples run from the repo root, answer --help, and end with the JSON result line."""

from __future__ import annotations

import json
import os
import importlib.util
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ["quickstart_cartpole.py", "dqn_cartpole.py", "ppo_cartpole.py", "ppo_pendulum.py"]


def _run(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run([sys.executable, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=120)


def test_every_example_has_help() -> None:
    code = "import runpy, sys\nfor name in sys.argv[1:]:\n    sys.argv = [name, '--help']\n    try:\n        runpy.run_path(name, run_name='__main__')\n    except SystemExit as e:\n        assert e.code == 0, name\n"
    proc = _run(["-c", code, *[f"examples/{e}" for e in EXAMPLES]], ROOT)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.count("usage:") == len(EXAMPLES)
    assert proc.stdout.count("--restore RESTORE") >= len(EXAMPLES)


def _load(example: str) -> Any:
    name = example.removesuffix(".py")
    spec = importlib.util.spec_from_file_location(name, ROOT / "examples" / example)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up while the file executes
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("example,extra", [("ppo_cartpole.py", []), ("dqn_cartpole.py", ["--learning-starts", "100"])])
def test_example_writes_outputs_and_json_line(tmp_path: Path, example: str, extra: list[str]) -> None:
    run_dir = tmp_path / "run"
    ckpt = tmp_path / "agent.pt"
    args = [str(ROOT / "examples" / example), "--total-steps", "512", "--run-dir", str(run_dir), "--save", str(ckpt), *extra]
    proc = _run(args, tmp_path)
    assert proc.returncode == 0, proc.stderr
    line = json.loads(proc.stdout.strip().splitlines()[-1])
    assert set(line) == {"env", "algo", "solved", "env_steps", "wall_s", "mean_return"}
    assert line["env_steps"] >= 512
    for name in ("curve.png", "episodes.csv", "updates.csv"):
        assert (run_dir / name).stat().st_size > 0
    assert any(p.name.startswith("events.out.tfevents") for p in run_dir.iterdir())
    # Restoring goes through the same main(); in-process saves a second interpreter start.
    module = _load(example)
    overrides = {"learning_starts": 100} if extra else {}
    config = module.Config(
        total_steps=512, run_dir=str(tmp_path / "again"), restore=str(ckpt), tensorboard=False, progress=False, **overrides
    )
    assert module.main(config).env_steps >= 512
