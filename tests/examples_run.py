"""Running the project's scripts (examples, benchmarks) as a user does, from tests.

:func:`run_python` starts ``python ARGS`` in a fresh interpreter with the repo on ``PYTHONPATH``;
:func:`run_example` runs ``examples/<name>.py`` to its final JSON result line;
:func:`load_example` imports an example in-process (to build its ``Config`` or call its ``main``).
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def run_python(
    args: list[str], cwd: Path = ROOT, timeout: float = 280, tracebacks: bool = True
) -> subprocess.CompletedProcess[str]:
    """``python ARGS`` in ``cwd``, output captured, with the repo first on ``PYTHONPATH``;
    ``tracebacks``: a training script's error shows its traceback (``RL_TRACEBACK=1``), not only
    the one line a user sees."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    if tracebacks:
        env["RL_TRACEBACK"] = "1"
    else:
        env.pop("RL_TRACEBACK", None)
    return subprocess.run([sys.executable, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


def run_example(name: str, run_dir: Path, *args: str, timeout: float = 280) -> tuple[int, dict[str, Any], str]:
    """``python examples/<name>.py ARGS`` from the repo root (its own embedded cluster, no progress
    bar, no TensorBoard, outputs in ``run_dir``): exit status, final JSON line, stderr's tail."""
    options = ["--no-progress", "--no-tensorboard", "--run-dir", str(run_dir)]
    proc = run_python([f"examples/{name}.py", *args, *options], timeout=timeout)
    lines = proc.stdout.strip().splitlines()
    assert lines, proc.stderr[-2000:]
    return proc.returncode, json.loads(lines[-1]), proc.stderr[-2000:]


def load_example(name: str) -> Any:
    """``examples/<name>.py`` imported as module ``name``."""
    spec = importlib.util.spec_from_file_location(name, ROOT / "examples" / f"{name}.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up while the file executes
    spec.loader.exec_module(module)
    return module
