"""Slow: each algorithm solves its task once, end to end (mean of the last 20 training returns >=
bar; of the last 10 for the off-policy Pendulum runs, as the issue defines it).

One run per algorithm, on a seed that solves: the bars that take many runs ("solves CartPole-v1 on
at least 4 of 5 seeds", the IMPALA demo on 5 seeds without collapsing) and the second solves of an
algorithm (PPO on Pendulum, SAC with prioritised replay or remote collectors, Ape-X DQN) are
``bench/rl_seed_sweeps.py``'s.
"""

from __future__ import annotations

import csv
import importlib.util
import sys
from pathlib import Path
from typing import Any

import pytest
import torch

import rl
from rl.collector import env_spaces
from tests.examples_run import ROOT, load_example, run_example


def _main_in_process(name: str, seed: int, tmp_path: Path, **overrides: Any) -> rl.TrainResult:
    module = load_example(name)
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


def _solved(result: rl.TrainResult) -> None:
    assert result.solved, (result.solved, result.env_steps, round(result.mean_return))


@pytest.mark.slow
def test_ppo_solves_cartpole(tmp_path: Path) -> None:
    _solved(_main_in_process("ppo_cartpole", 0, tmp_path))


@pytest.mark.slow
def test_dqn_solves_cartpole(tmp_path: Path) -> None:
    _solved(_main_in_process("dqn_cartpole", 0, tmp_path))


@pytest.mark.slow
def test_a2c_solves_cartpole() -> None:
    # The configuration of bench/rl_baselines.py.
    _solved(_train(rl.A2C, 0, 500_000, num_envs=8, num_steps=8, lr=2e-3))


def _seed_sweeps() -> Any:
    """``bench/rl_seed_sweeps.py`` as a module: its IMPALA collapse check is this test's too."""
    spec = importlib.util.spec_from_file_location("rl_seed_sweeps", ROOT / "bench" / "rl_seed_sweeps.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the file executes
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
def test_impala_demo_solves_cartpole_without_collapsing(tmp_path: Path) -> None:
    """The main demo as a user runs it (``./dev.sh demo``: IMPALA, 2 remote collectors on an
    embedded cluster) solves, and its policy does not collapse on the way: the median entropy of
    any 10 consecutive updates stays over 0.1 (what a collapse is, and why that bar:
    ``bench/rl_seed_sweeps.py``, which checks it on 5 seeds)."""
    sweeps = _seed_sweeps()
    run_dir = tmp_path / "seed0"
    rc, line, stderr = run_example("impala_cartpole", run_dir, "--seed", "0", "--total-steps", "1000000")
    assert rc == (0 if line["solved"] else 1), stderr
    with open(run_dir / "updates.csv") as f:
        floor, lowest = sweeps.collapse_floor(list(csv.DictReader(f)))
    assert line["solved"], (line["env_steps"], lowest)
    assert floor > sweeps.COLLAPSE_FLOOR, (round(floor, 3), lowest)


@pytest.mark.slow
def test_sac_solves_pendulum(tmp_path: Path) -> None:
    """Mean of the last 10 returns >= -200; 5-7k env steps (15-20 s) on seeds 0-4."""
    result = _main_in_process("sac_pendulum", 0, tmp_path)
    assert result.solved and result.mean_return >= -200 and result.env_steps <= 15_000, result


@pytest.mark.slow
def test_td3_solves_pendulum(tmp_path: Path) -> None:
    """7-9k env steps (12-17 s) on seeds 0-4."""
    result = _main_in_process("sac_pendulum", 0, tmp_path, algo="td3")
    assert result.solved and result.mean_return >= -200 and result.env_steps <= 20_000, result


@pytest.mark.slow
def test_quickstart_main_solves_and_ends_with_its_json_line(tmp_path: Path) -> None:
    """``python examples/quickstart_cartpole.py`` (PolicyGradient) as a user runs it, to a solved
    result line (it used to crash there: a numpy bool is not JSON serialisable)."""
    rc, line, stderr = run_example("quickstart_cartpole", tmp_path / "run")
    assert rc == 0, stderr
    assert line["solved"] is True and line["mean_return"] >= 475, line
