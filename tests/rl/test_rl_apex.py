"""examples/apex_cartpole.py solves CartPole on a running cluster (``--address``): a real master
and worker daemon, collectors that push straight into a named replay actor, and a parameter
server actor they pull weights from."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ProcCluster, wait_until

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
@pytest.mark.timeout(400)
def test_apex_solves_cartpole_on_a_running_cluster(tmp_path: Path) -> None:
    cluster = ProcCluster(tmp_path / "home").start(workers=1, cpus_per_worker=4)
    try:
        env = {**cluster.env, "PYTHONPATH": str(ROOT), "ACTORRT_TOKEN": cluster.token}
        proc = subprocess.run(
            [
                sys.executable,
                "examples/apex_cartpole.py",
                "--address",
                cluster.address,
                "--no-progress",
                "--no-tensorboard",
                "--run-dir",
                str(tmp_path / "run"),
            ],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=360,
        )
        line = json.loads(proc.stdout.strip().splitlines()[-1])
        assert proc.returncode == 0 and line["solved"] and line["mean_return"] >= 475, (line, proc.stderr[-3000:])
        assert wait_until(lambda: not cluster.status()["actors"], 10), "the example's actors outlived it"
    finally:
        cluster.stop()
    assert os.path.getsize(tmp_path / "run" / "curve.png") > 0
