"""examples/apex_cartpole.py on a running cluster (``--address``): a real master and worker
daemon, collectors that push straight into a named replay actor, and a parameter server actor
they pull weights from; the run ends with its result line and leaves no actor behind. That it
solves CartPole (a second DQN solve: tests/rl/test_rl_solves.py has one) is
``bench/rl_seed_sweeps.py apex``'s."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import ProcCluster, wait_until

ROOT = Path(__file__).resolve().parents[2]


def test_apex_runs_on_a_running_cluster(tmp_path: Path) -> None:
    cluster = ProcCluster(tmp_path / "home").start(workers=1, cpus_per_worker=4)
    try:
        env = {**cluster.env, "PYTHONPATH": str(ROOT), "ACTORRT_TOKEN": cluster.token}
        proc = subprocess.run(
            [
                sys.executable,
                "examples/apex_cartpole.py",
                "--address",
                cluster.address,
                "--total-steps",
                "3000",
                "--learning-starts",
                "500",
                "--no-progress",
                "--no-tensorboard",
                "--run-dir",
                str(tmp_path / "run"),
            ],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=180,
        )
        line = json.loads(proc.stdout.strip().splitlines()[-1])
        assert line["algo"] == "Ape-X DQN" and line["env_steps"] >= 3000, (line, proc.stderr[-3000:])
        assert proc.returncode == (0 if line["solved"] else 1), proc.stderr[-3000:]
        assert wait_until(lambda: not cluster.status()["actors"], 10), "the example's actors outlived it"
    finally:
        cluster.stop()
    assert os.path.getsize(tmp_path / "run" / "curve.png") > 0
