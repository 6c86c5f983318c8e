"""Slow: the algorithms solve their tasks (mean of the last 20 training returns >= bar; of the
last 10 for the off-policy Pendulum runs, as the issue defines it).

The 5-seed runs check the bar "solves CartPole-v1 on at least 4 of 5 seeds" for every algorithm;
the others solve one seed.
"""

from __future__ import annotations

import csv
import statistics
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch

import rl
from rl.collector import env_spaces
from tests.examples_run import load_example, run_example


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


def _four_of_five(run: Callable[[int], rl.TrainResult]) -> None:
    """``run(seed)`` solves on at least 4 of seeds 0-4. The seeds run in order until the verdict
    is known (4 solved, or 2 did not): the ones left could not change it."""
    results: list[rl.TrainResult] = []
    for seed in range(5):
        results.append(run(seed))
        solved = sum(r.solved for r in results)
        if solved >= 4 or len(results) - solved >= 2:
            break
    assert solved >= 4, [(r.solved, r.env_steps, round(r.mean_return)) for r in results]


@pytest.mark.slow
def test_ppo_solves_cartpole_4_of_5(tmp_path: Path) -> None:
    _four_of_five(lambda s: _main_in_process("ppo_cartpole", s, tmp_path))


@pytest.mark.slow
def test_policy_gradient_solves_cartpole_4_of_5(tmp_path: Path) -> None:
    _four_of_five(lambda s: _main_in_process("quickstart_cartpole", s, tmp_path))


@pytest.mark.slow
@pytest.mark.timeout(600)  # 179 s alone on a slow 2-core Xeon; past 300 s beside CI's other worker and a benchmark
def test_dqn_solves_cartpole_4_of_5(tmp_path: Path) -> None:
    _four_of_five(lambda s: _main_in_process("dqn_cartpole", s, tmp_path))


@pytest.mark.slow
def test_a2c_solves_cartpole_4_of_5() -> None:
    # The configuration of bench/rl_baselines.py.
    _four_of_five(lambda s: _train(rl.A2C, s, 500_000, num_envs=8, num_steps=8, lr=2e-3))


@pytest.mark.slow
def test_impala_solves_cartpole_4_of_5() -> None:
    kwargs = dict(lr=7e-4, max_grad_norm=0.5)
    _four_of_five(lambda s: _train(rl.IMPALA, s, 500_000, num_envs=8, num_steps=5, **kwargs))


COLLAPSE_WINDOW = 10  # updates, ~5k env steps of the demo


def _collapse_floor(rows: list[dict[str, str]]) -> tuple[float, str]:
    """The lowest median entropy over any ``COLLAPSE_WINDOW`` consecutive updates, and for the
    failure message the single lowest update (its entropy, weight lag and mean return)."""
    entropy = [float(row["entropy"]) for row in rows]
    medians = [statistics.median(entropy[i : i + COLLAPSE_WINDOW]) for i in range(len(entropy) - COLLAPSE_WINDOW + 1)]
    low = min(range(len(entropy)), key=entropy.__getitem__)
    row = rows[low]
    lowest = (
        f"update {low}/{len(rows)}: entropy {entropy[low]:.3f}, lag {row['weight_lag']}, return {row['mean_return']}"
    )
    return min(medians or entropy), lowest


@pytest.mark.slow
def test_impala_demo_solves_cartpole_without_collapsing(tmp_path: Path) -> None:
    """The main demo as a user runs it (``./dev.sh demo``: IMPALA, 2 remote collectors on an
    embedded cluster) solves on at least 4 of 5 seeds, and no run's policy collapses on the way.

    A collapse is the policy running off to a deterministic one (entropy near 0, returns ~9);
    some runs find their way back, others stay there to the step cap. With RMSprop's eps at 1e-5
    and the gradient clipped at 0.5, 4 of 79 runs (seeds 0-39 and 200-239) had an update's
    entropy fall below 0.03 and two of those never solved; training on past solving, 6 of 15
    runs fell to returns of ~9. The demo now uses the paper's eps 0.01 and clip 40: on seeds
    200-239 the lowest entropy any update saw was 0.16 (healthy runs: 0.3-0.5), hence 0.1.

    A collapse lasts: the check is on the median of 10 consecutive updates, not on one. One
    update's batch is one rollout, and its entropy is the learner's policy on the states that
    rollout's (older) policy visited; a CI run once saw a single update at 0.024 on seed 1,
    which 74 runs here (seeds 0-4, idle and beside 1-3 busy processes) never came near
    (lowest 0.29, at a lag of 16). The lowest single update is in the failure message.
    """
    lines, floors = [], []
    for seed in range(5):
        run_dir = tmp_path / f"seed{seed}"
        rc, line, stderr = run_example("impala_cartpole", run_dir, "--seed", str(seed), "--total-steps", "1000000")
        assert rc == (0 if line["solved"] else 1), stderr
        lines.append(line)
        with open(run_dir / "updates.csv") as f:
            floors.append(_collapse_floor(list(csv.DictReader(f))))
    runs = [
        (line["solved"], line["env_steps"], round(floor, 3), lowest)
        for line, (floor, lowest) in zip(lines, floors, strict=True)
    ]
    assert sum(line["solved"] for line in lines) >= 4, runs
    assert min(floor for floor, _ in floors) > 0.1, runs


@pytest.mark.slow
def test_ppo_solves_pendulum(tmp_path: Path) -> None:
    result = _main_in_process("ppo_pendulum", 0, tmp_path)
    assert result.solved and result.mean_return >= -200, result


@pytest.mark.slow
def test_sac_solves_pendulum(tmp_path: Path) -> None:
    """Mean of the last 10 returns >= -200; 5-7k env steps (15-20 s) on seeds 0-4."""
    result = _main_in_process("sac_pendulum", 0, tmp_path)
    assert result.solved and result.mean_return >= -200 and result.env_steps <= 15_000, result


@pytest.mark.slow
def test_sac_with_prioritized_replay_solves_pendulum(tmp_path: Path) -> None:
    result = _main_in_process("sac_pendulum", 1, tmp_path, prioritized=True)
    assert result.solved and result.mean_return >= -200, result


@pytest.mark.slow
def test_td3_solves_pendulum(tmp_path: Path) -> None:
    """7-9k env steps (12-17 s) on seeds 0-4."""
    result = _main_in_process("sac_pendulum", 0, tmp_path, algo="td3")
    assert result.solved and result.mean_return >= -200 and result.env_steps <= 20_000, result


@pytest.mark.slow
@pytest.mark.parametrize("replay", ["learner", "actor"])
def test_sac_with_remote_collectors_solves_pendulum(tmp_path: Path, replay: str) -> None:
    """off_policy_scheme on the example's own embedded cluster: 2 collectors feed the learner's
    replay, or a replay actor that the learner samples from. Solved in 5.7-6.8k env steps
    (17-21 s) on seeds 0-2."""
    args = ["--num-collectors", "2", "--num-steps", "16", "--replay", replay]
    rc, line, stderr = run_example("sac_pendulum", tmp_path / "run", *args)
    assert rc == 0 and line["solved"] and line["mean_return"] >= -200, (line, stderr)
    assert line["updates"] > 0.8 * (line["env_steps"] - 1000)  # one update per env step after the warm-up


@pytest.mark.slow
def test_quickstart_main_solves_and_ends_with_its_json_line(tmp_path: Path) -> None:
    """``python examples/quickstart_cartpole.py`` as a user runs it, to a solved result line
    (it used to crash there: a numpy bool is not JSON serialisable)."""
    rc, line, stderr = run_example("quickstart_cartpole", tmp_path / "run")
    assert rc == 0, stderr
    assert line["solved"] is True and line["mean_return"] >= 475, line
