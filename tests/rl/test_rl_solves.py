"""Slow: the algorithms solve their tasks (mean of the last 20 training returns >= bar; of the
last 10 for the off-policy Pendulum runs, as the issue defines it).

``test_ppo_solves_cartpole`` takes ~5 s and is the one CI runs (all of them: ~4 min); the 5-seed runs check the bar
"solves CartPole-v1 on at least 4 of 5 seeds" for every algorithm.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

import pytest
import torch

import rl
from rl.collector import env_spaces

ROOT = Path(__file__).resolve().parents[2]


def _example(name: str) -> Any:
    spec = importlib.util.spec_from_file_location(name, ROOT / "examples" / f"{name}.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up while the file executes
    spec.loader.exec_module(module)
    return module


def _run_example(name: str, seed: int, tmp_path: Path, **overrides: Any) -> rl.TrainResult:
    module = _example(name)
    config = module.Config(
        seed=seed, run_dir=str(tmp_path / f"{name}_{seed}"), tensorboard=False, progress=False, **overrides
    )
    return module.main(config)


def _train(algo_cls: type, seed: int, cap: int, num_envs: int, num_steps: int, **kwargs: Any) -> rl.TrainResult:
    torch.manual_seed(seed)
    config = rl.CollectorConfig("CartPole-v1", num_envs=num_envs, num_steps=num_steps, seed=seed)
    obs_space, act_space = env_spaces(config)
    agent = rl.Agent(algo_cls(rl.ActorCritic(obs_space, act_space), **kwargs))
    collector = rl.Collector(config, agent)
    try:
        return rl.train_on_policy(agent, collector, cap, solved_return=475.0)
    finally:
        collector.close()


@pytest.mark.slow
def test_ppo_solves_cartpole(tmp_path: Path) -> None:
    result = _run_example("ppo_cartpole", 0, tmp_path)
    assert result.solved and result.mean_return >= 475, result


def _four_of_five(results: list[rl.TrainResult]) -> None:
    assert sum(r.solved for r in results) >= 4, [(r.solved, r.env_steps, round(r.mean_return)) for r in results]


@pytest.mark.slow
def test_ppo_solves_cartpole_4_of_5(tmp_path: Path) -> None:
    _four_of_five([_run_example("ppo_cartpole", s, tmp_path) for s in range(5)])


@pytest.mark.slow
def test_policy_gradient_solves_cartpole_4_of_5(tmp_path: Path) -> None:
    _four_of_five([_run_example("quickstart_cartpole", s, tmp_path) for s in range(5)])


@pytest.mark.slow
def test_dqn_solves_cartpole_4_of_5(tmp_path: Path) -> None:
    _four_of_five([_run_example("dqn_cartpole", s, tmp_path) for s in range(5)])


@pytest.mark.slow
def test_a2c_solves_cartpole_4_of_5() -> None:
    # The configuration of bench/rl_baselines.py.
    _four_of_five([_train(rl.A2C, s, 500_000, num_envs=8, num_steps=8, lr=2e-3) for s in range(5)])


@pytest.mark.slow
def test_impala_solves_cartpole_4_of_5() -> None:
    kwargs = dict(lr=7e-4, max_grad_norm=0.5)
    _four_of_five([_train(rl.IMPALA, s, 500_000, num_envs=8, num_steps=5, **kwargs) for s in range(5)])


@pytest.mark.slow
def test_ppo_solves_pendulum(tmp_path: Path) -> None:
    result = _run_example("ppo_pendulum", 0, tmp_path)
    assert result.solved and result.mean_return >= -200, result


@pytest.mark.slow
def test_sac_solves_pendulum(tmp_path: Path) -> None:
    """Mean of the last 10 returns >= -200; 5-7k env steps (15-20 s) on seeds 0-4."""
    result = _run_example("sac_pendulum", 0, tmp_path)
    assert result.solved and result.mean_return >= -200 and result.env_steps <= 15_000, result


@pytest.mark.slow
def test_sac_with_prioritized_replay_solves_pendulum(tmp_path: Path) -> None:
    result = _run_example("sac_pendulum", 1, tmp_path, prioritized=True)
    assert result.solved and result.mean_return >= -200, result


@pytest.mark.slow
def test_td3_solves_pendulum(tmp_path: Path) -> None:
    """7-9k env steps (12-17 s) on seeds 0-4."""
    result = _run_example("sac_pendulum", 0, tmp_path, algo="td3")
    assert result.solved and result.mean_return >= -200 and result.env_steps <= 20_000, result


@pytest.mark.slow
@pytest.mark.parametrize("replay", ["learner", "actor"])
def test_sac_with_remote_collectors_solves_pendulum(tmp_path: Path, replay: str) -> None:
    """off_policy_scheme on the example's own embedded cluster: 2 collectors feed the learner's
    replay, or a replay actor that the learner samples from. Solved in 5.7-6.8k env steps
    (17-21 s) on seeds 0-2."""
    import json
    import os
    import subprocess

    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run(
        [
            sys.executable,
            "examples/sac_pendulum.py",
            "--num-collectors",
            "2",
            "--num-steps",
            "16",
            "--replay",
            replay,
            "--no-progress",
            "--no-tensorboard",
            "--run-dir",
            str(tmp_path / "run"),
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=280,
    )
    line = json.loads(proc.stdout.strip().splitlines()[-1])
    assert proc.returncode == 0 and line["solved"] and line["mean_return"] >= -200, (line, proc.stderr[-2000:])
    assert line["updates"] > 0.8 * (line["env_steps"] - 1000)  # one update per env step after the warm-up


@pytest.mark.slow
def test_quickstart_main_solves_and_ends_with_its_json_line(tmp_path: Path) -> None:
    """``python examples/quickstart_cartpole.py`` as a user runs it, to a solved result line
    (it used to crash there: a numpy bool is not JSON serialisable)."""
    import json
    import os
    import subprocess

    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run(
        [
            sys.executable,
            "examples/quickstart_cartpole.py",
            "--no-progress",
            "--no-tensorboard",
            "--run-dir",
            str(tmp_path / "run"),
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=280,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    line = json.loads(proc.stdout.strip().splitlines()[-1])
    assert line["solved"] is True and line["mean_return"] >= 475, line
