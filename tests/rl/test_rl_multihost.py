"""IMPALA across real separate hosts: the master, two workers and the learner each live in their
own network namespace (tests/nethosts.py); the demo runs unchanged with --address."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import pytest

from tests.nethosts import NetHosts, can_create_namespaces

pytestmark = [
    pytest.mark.slow,
    pytest.mark.timeout(300),
    pytest.mark.skipif(bool(can_create_namespaces()), reason=f"no network namespaces: {can_create_namespaces()}"),
]

ROOT = Path(__file__).resolve().parents[2]
TOKEN = "multihost-test-token"


def test_impala_trains_with_collectors_on_other_hosts(tmp_path: Path) -> None:
    with NetHosts(["master", "w1", "w2", "learner"]) as net:
        address = f"{net.ip('master')}:8010"
        env = dict(os.environ, ACTORRT_HOME=str(tmp_path / "home"), ACTORRT_TOKEN=TOKEN)
        logs = {h: open(tmp_path / f"{h}.log", "wb") for h in ("master", "w1", "w2")}
        net.popen(
            "master",
            [
                sys.executable,
                "-m",
                "actorrt",
                "start",
                "--block",
                "--host",
                net.ip("master"),
                "--port",
                "8010",
                "--cpus",
                "0",
            ],
            env=env,
            stdout=logs["master"],
            stderr=logs["master"],
        )
        time.sleep(1.0)
        for w in ("w1", "w2"):
            net.popen(
                w,
                [
                    sys.executable,
                    "-m",
                    "actorrt",
                    "connect",
                    "--block",
                    "--address",
                    address,
                    "--node-ip",
                    net.ip(w),
                    "--cpus",
                    "1",
                    "--preload",
                    "rl.learners",
                    "--timeout",
                    "20",
                ],
                env=env,
                stdout=logs[w],
                stderr=logs[w],
            )
        run = net.run(
            "learner",
            [
                sys.executable,
                str(ROOT / "examples" / "impala_cartpole.py"),
                "--address",
                address,
                "--total-steps",
                "40000",
                "--no-progress",
                "--no-tensorboard",
                "--run-dir",
                str(tmp_path / "run"),
            ],
            env=env,
            capture_output=True,
            text=True,
            timeout=240,
        )
        for log in logs.values():
            log.close()
        lines = [ln for ln in run.stdout.splitlines() if ln.startswith("{")]
        assert lines, run.stdout + run.stderr + (tmp_path / "w1.log").read_text()[-2000:]
        result = json.loads(lines[-1])
        assert result["env_steps"] >= 40_000 or result["solved"], result
        assert result["updates"] > 10 and result["frames_per_s"] > 1000, result
        assert result["mean_return"] > 40, result  # it learns: a random policy averages ~22
        for w in ("w1", "w2"):  # both remote hosts hosted a collector
            assert "RemoteCollector" in (tmp_path / f"{w}.log").read_text(), w
