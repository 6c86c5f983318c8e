"""PARL's remote training scripts, unchanged, through ``python -m actorrt.compat.parl`` against a
cluster started with ``actorrt start`` (a master and worker daemons, real processes): the
runner's names reach the actor hosts with the script's classes, and PARL's ES and A2C scripts
(``benchmark/torch/ES``, ``benchmark/torch/a2c``, copied with their config made small) run to
their last line.

The scripts are PARL's (Apache-2.0), read from a PARL checkout: ``PARL_SRC`` (default
``/work/parl-src``); the tests that need them are skipped without one (scripts of this
project's own, written as a PARL user writes them, run everywhere: test_parl_style_scripts.py)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.conftest import ProcCluster

ROOT = Path(__file__).resolve().parents[2]
PARL_SRC = Path(os.environ.get("PARL_SRC", "/work/parl-src"))
BENCHMARKS = PARL_SRC / "benchmark" / "torch"
RUNNER = (sys.executable, "-m", "actorrt.compat.parl")


def run_script(
    cluster: ProcCluster, command: tuple[str, ...], path: Path, *args: str, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """``command path args`` in the script's folder, as a user on the cluster's machine (the
    token found in its home)."""
    env = dict(cluster.env, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    return subprocess.run(
        [*command, path.name, *args], capture_output=True, text=True, cwd=path.parent, env=env, timeout=timeout
    )


def copy_benchmark(name: str, to: Path, config: str, values: dict[str, str]) -> Path:
    """PARL's ``benchmark/torch/<name>`` copied to ``to``, its config file's ``values`` replaced
    (``'key': <value>`` as Python source); the folder."""
    if not BENCHMARKS.is_dir():
        pytest.skip(f"no PARL checkout at {PARL_SRC} (set PARL_SRC)")
    folder = to / name
    shutil.copytree(BENCHMARKS / name, folder)
    path = folder / config
    text = path.read_text()
    for key, value in values.items():
        text, n = re.subn(rf"'{key}':[^\n]*,", f"'{key}': {value},", text)
        assert n == 1, f"{key} not in {path}"
    path.write_text(text)
    return folder


def notices(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if "actorrt.compat.parl:" in line]


HOOKED = """
import json, sys
import gym
import numpy as np
import parl
from parl.env import CompatWrapper

@parl.remote_class
class Probe:
    def names(self):
        import parl  # an import the host runs, not a name that came pickled
        from parl.utils import logger
        from gym import spaces
        return {
            "parl": parl.__name__,
            "logger": logger.__name__,
            "spaces": spaces.__name__,
            "np_int": np.int is int,
            "zeros": list(np.zeros(None).shape),
            "old_api": list(CompatWrapper(gym.make("CartPole-v1")).reset().shape),
            "atari": gym.make("PongNoFrameskip-v4").spec.id,
            "mujoco": gym.make("Hopper-v3").spec.id,
        }

@parl.remote_class(wait=False)
class Later:
    def np_int(self):
        return np.int is int

parl.connect(sys.argv[1])
print(json.dumps({"probe": Probe().names(), "later": Later().np_int().get()}))
"""


def test_the_runners_names_reach_the_actor_hosts(cluster: ProcCluster, tmp_path: Path) -> None:
    path = tmp_path / "hooked.py"
    path.write_text(textwrap.dedent(HOOKED))
    out = run_script(cluster, RUNNER, path, cluster.address)
    assert out.returncode == 0, out.stderr
    seen = json.loads(out.stdout.splitlines()[-1])
    assert seen == {
        "probe": {
            "parl": "actorrt.compat.parl",
            "logger": "actorrt.compat.parl.utils.logger",
            "spaces": "gymnasium.spaces",
            "np_int": True,
            "zeros": [],
            "old_api": [4],
            "atari": "PongNoFrameskip-v4",
            "mujoco": "Hopper-v5",
        },
        "later": True,
    }
    # the hosts say nothing: the script's process said it (only the gym line: it made no env)
    assert [line.split(": ", 1)[1][:20] for line in notices(out.stderr)] == ["gym is not installed"]


ES_CONFIG = {  # PARL's ES, small: 2 actors, 2 training steps on InvertedPendulum
    "env_name": "'InvertedPendulum-v2'",  # a -v2 id: resolved in the learner and in each actor
    "actor_num": "2",
    "min_task_runtime": "0.05",
    "eval_prob": "0.3",
    "filter_update_prob": "0.5",
    "train_steps": "2",
    "min_episodes_per_batch": "10",
    "min_steps_per_batch": "100",
    "noise_size": "1000000",
    "report_window_size": "2",
}


def test_parls_es_script_trains_on_the_cluster_unchanged(cluster: ProcCluster, tmp_path: Path) -> None:
    """benchmark/torch/ES (no parl.algorithms: its own ES on parl.Algorithm) to its last line:
    two steps of 2 remote actors' rollouts, each logged, with TensorBoard scalars."""
    folder = copy_benchmark("ES", tmp_path, "es_config.py", {**ES_CONFIG, "master_address": repr(cluster.address)})
    out = run_script(cluster, RUNNER, folder / "train.py")
    assert out.returncode == 0, out.stdout + out.stderr
    steps = [json_of(line) for line in out.stdout.splitlines() if "'sample_total_episodes'" in line]
    assert len(steps) == 2, out.stdout
    assert steps[1]["sample_total_episodes"] > steps[0]["sample_total_episodes"] >= 10
    assert "Creating 2 remote actors to connect." in out.stdout
    assert list((folder / "train_log" / "train").glob("events.out.tfevents.*")), "no TensorBoard scalars"
    said = [line.split(": ", 1)[1] for line in notices(out.stderr)]
    assert (
        "gym.make('InvertedPendulum-v2'): InvertedPendulum-v2 needs mujoco-py; making InvertedPendulum-v5, its newest version"
        in said
    )
    assert "np.int was removed in numpy 1.24; it is int here, as it was before" in said  # ES's utils.unflatten
    assert len(said) == len(set(said)), "a notice said twice (the hosts must stay quiet)"


def json_of(line: str) -> dict[str, float]:
    """ES's metrics line: ``[time ...] {'key': value, ...}`` (numpy 2 prints np.float64(x))."""
    text = line.split("] ", 1)[1]
    text = re.sub(r"np\.\w+\(([^)]*)\)", r"\1", text).replace("'", '"').replace("None", "null")
    out: dict[str, float] = json.loads(text)
    return out


A2C_CONFIG = {  # PARL's A2C on Pong, small: 2 actors of 2 envs, 5-step rollouts, about a second
    "actor_num": "2",
    "env_num": "2",
    "sample_batch_steps": "5",
    "max_sample_steps": "20",
    "log_metrics_interval_s": "1",
}


def test_parls_a2c_script_runs_on_the_cluster_unchanged(cluster: ProcCluster, tmp_path: Path) -> None:
    """benchmark/torch/a2c to its end: the learner and its 2 remote actors each build Pong in
    wrap_deepmind, VectorEnv and calc_gae in the actors; weights go out and rollouts come back
    for a second."""
    folder = copy_benchmark("a2c", tmp_path, "a2c_config.py", {**A2C_CONFIG, "master_address": repr(cluster.address)})
    out = run_script(cluster, RUNNER, folder / "train.py")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "Creating 2 remote actors to connect." in out.stdout
    actors = {
        m.group(1) for m in re.finditer(r"\(Actor pid=\d+ id=(\w+)\) \[Powered by Stella\]", out.stdout + out.stderr)
    }
    assert len(actors) == 2, out.stdout + out.stderr
