"""bench/rl_summary.py: item 5's table from benchmark rows, run as a user runs it (a subprocess),
on rows written here with answers worked out by hand, and on the committed rows."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from tests.examples_run import ROOT, run_python


def _run(
    runner: str, seed: int, returns: dict[int, float], utc: str, reached: tuple[int, float] | None, **kw: Any
) -> dict[str, Any]:
    return {
        "runner": runner,
        "env": kw.pop("env", "HalfCheetah-v5"),
        "seed": seed,
        "steps": max(returns),
        "quick": kw.pop("quick", False),
        "checkpoints": {str(k): {"mean_return": v, "wall_s": 1.0} for k, v in returns.items()},
        "reached_3000": None if reached is None else {"env_steps": reached[0], "wall_s": reached[1]},
        "wall_s": kw.pop("wall_s", 500.0),
        "utc_end": utc,
        "code": kw.pop("code", "abc1234"),
        **kw,
    }


def _summary(tmp_path: Path, rows: list[dict[str, Any]], *args: str) -> tuple[int, str, str]:
    path = tmp_path / "runs.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    proc = run_python(["bench/rl_summary.py", "--runs", str(path), *args], timeout=60)
    return proc.returncode, proc.stdout, proc.stderr


def test_cells_pair_seeds_take_the_latest_run_and_bound_unreached_sb3(tmp_path: Path) -> None:
    rows = [
        # An older run of ours on seed 0, superseded at 50k by the later one (another commit).
        _run("oursbf16compile_sac", 0, {50_000: 100.0}, "2026-01-01T00:00Z", (49_000, 999.0), code="old0001"),
        _run("oursbf16compile_sac", 0, {50_000: 3000.0}, "2026-01-02T00:00Z", (45_000, 200.0)),
        _run("oursbf16compile_sac", 1, {50_000: 2000.0}, "2026-01-02T00:10Z", (50_000, 250.0)),
        _run("oursbf16compile_sac", 2, {50_000: 2600.0}, "2026-01-02T00:20Z", (48_000, 300.0)),
        _run("oursbf16compile_sac", 3, {50_000: 9999.0}, "2026-01-02T00:30Z", None),  # no SB3 seed 3
        _run("sb3_sac", 0, {50_000: 2500.0, 100_000: 4000.0}, "2026-01-01T12:00Z", (60_000, 600.0)),
        _run("sb3_sac", 1, {50_000: 2200.0}, "2026-01-01T12:10Z", (55_000, 400.0)),
        _run("sb3_sac", 2, {50_000: 2400.0}, "2026-01-01T12:20Z", None, wall_s=750.0),
        # The latest SB3 seed 0, on another CPU: its return counts, its wall-clock pairs with nothing.
        _run("sb3_sac", 0, {50_000: 2500.0}, "2026-01-05T00:00Z", (60_000, 60.0), cpu="Other CPU, AVX2"),
        # Left out: a --quick run, a micro-benchmark row, another env's runs.
        _run("sb3_sac", 1, {50_000: -5.0}, "2026-02-01T00:00Z", (1, 1.0), quick=True),
        {"runner": "micro", "algo": "sac", "env": "HalfCheetah-v5", "utc_end": "2026-02-01T00:00Z"},
        _run("ours_td3", 0, {50_000: 300.0}, "2026-01-03T00:00Z", None, env="Hopper-v5"),
        _run("sb3_td3", 0, {50_000: 400.0}, "2026-01-03T00:00Z", None, env="Hopper-v5"),
        # Our TD3 is timed against SB3's SAC (item 5's reference), never against SB3's TD3.
        _run("ourscompile_td3", 1, {50_000: 3100.0}, "2026-01-04T00:00Z", (48_000, 160.0)),
        _run("sb3_td3", 1, {50_000: 3000.0}, "2026-01-04T00:00Z", (47_000, 100.0)),
        # TD3 with 256x256 networks is its own configuration: timed against SB3's SAC too, and its
        # returns compared with SB3's td3-256 only (none here), never with rl-zoo's td3.
        _run("ourscompile_td3-256", 0, {50_000: 3200.0}, "2026-01-04T01:00Z", (44_000, 150.0)),
        # Ours never reaching 3,000 is listed, as a bound from below (its whole run against SB3's time).
        _run("ourscompile_td3-256", 1, {50_000: 1000.0}, "2026-01-04T01:10Z", None, wall_s=600.0),
        # SAC with its gradients written out: its own side in the wall-clock table, its seed 0 timed
        # apart from the autograd rows of seed 0, on the same CPU as those; for returns the same
        # side, its seed 0 the latest row (the same update, rounded differently).
        _run("oursbf16compile_sac", 0, {50_000: 3300.0}, "2026-01-06T00:00Z", (44_000, 150.0), written_out=True),
    ]
    rc, out, err = _summary(tmp_path, rows, "--json")
    assert rc == 0, err
    lines = [json.loads(line) for line in out.splitlines()]
    cells = {(c["env"], c["algo"], c["checkpoint"], c["side"]): c for c in lines if c["kind"] == "returns"}
    # 100k: SB3 only, so no cell; Hopper TD3: one seed, flagged as too few.
    assert set(cells) == {
        ("HalfCheetah-v5", "sac", 50_000, "oursbf16compile"),
        ("HalfCheetah-v5", "td3", 50_000, "ourscompile"),
        ("Hopper-v5", "td3", 50_000, "ours"),
    }
    c = cells[("HalfCheetah-v5", "sac", 50_000, "oursbf16compile")]
    assert c["seeds"] == [0, 1, 2] and c["n"] == 3 and c["enough_seeds"]
    # Seed 0 from the written-out row (3300), the latest: ours 3300, 2000, 2600.
    assert (c["ours_mean"], c["sb3_mean"]) == (2633.3, 2366.7)
    assert (c["ours_median"], c["sb3_median"]) == (2600.0, 2400.0)
    assert c["ours_above"] == 2 and c["ties"] == 0 and c["mean_diff"] == 266.7
    # Sample variances 423333.3 and 23333.3 (n - 1 = 2): sqrt((423333.3 + 23333.3) / 3) = 385.9.
    assert c["se_diff"] == 385.9 and c["diff_in_se"] == 0.69
    hop = cells[("Hopper-v5", "td3", 50_000, "ours")]
    assert hop["n"] == 1 and not hop["enough_seeds"] and hop["se_diff"] is None and hop["mean_diff"] == -100.0

    reach, reach_written, td3, td3_256 = [c for c in lines if c["kind"] == "reach_3000"]  # SAC x2, TD3, TD3 256x256
    assert reach_written["side"] == "oursbf16compile/written-out" and reach_written["algo"] == "sac"
    assert [(p["seed"], p["ratio"]) for p in reach_written["seeds"]] == [(0, 0.25)]  # 150 s against 600 s
    assert (td3_256["algo"], td3_256["sb3_algo"], td3_256["n"]) == ("td3-256", "sac", 1)
    # Seed 0: 150 s against SAC's 600 s; seed 1: never, its 600 s run against SAC's 400 s.
    assert [(p["seed"], p["ours_reached"], p["ratio"]) for p in td3_256["seeds"]] == [(0, True, 0.25), (1, False, 1.5)]
    assert td3_256["seeds"][1]["ours_env_steps"] is None and td3_256["total_ratio"] == 0.25
    assert td3_256["at_most_half"] == 1 and td3_256["ours_never"] == 1
    assert (td3["algo"], td3["sb3_algo"], td3["side"]) == ("td3", "sac", "ourscompile")
    (only,) = td3["seeds"]
    assert (only["seed"], only["sb3_env_steps"], only["ratio"]) == (1, 55_000, 0.4)  # 160 s against SAC's 400 s
    assert td3["n"] == 1 and td3["at_most_half"] == 1
    assert (reach["algo"], reach["sb3_algo"]) == ("sac", "sac")
    assert reach["side"] == "oursbf16compile" and reach["cpu"] == "CPU not recorded"
    by_seed = {p["seed"]: p for p in reach["seeds"]}
    assert sorted(by_seed) == [0, 1, 2]  # seed 3: ours never reached 3,000 (and SB3 has no run)
    assert by_seed[0]["ratio"] == round(200 / 600, 3) and by_seed[0]["ours_run"].startswith("abc1234")
    assert by_seed[1]["ratio"] == 0.625
    assert not by_seed[2]["sb3_reached"] and by_seed[2]["ratio"] == 0.4  # bound: 300 s against a 750 s run
    # Totals over the seeds both reached (0, 1): 450 / 1000 s; at most half on seeds 0 and 2.
    assert reach["n"] == 2 and reach["total_ratio"] == 0.45 and reach["median_ratio"] == round((1 / 3 + 0.625) / 2, 3)
    assert reach["at_most_half"] == 2

    rc, text, err = _summary(tmp_path, rows)
    assert rc == 0, err
    assert re.search(r"^Hopper-v5 +td3 +50000 +ours +1\* ", text, re.M), text
    assert "at most half on 2 of 3 seeds, ours never reached it on 0" in text
    assert re.search(r"^ +1 +never +600\.0 +55000 +400\.0 > 1\.500 ", text, re.M), text
    assert "at most half on 1 of 2 seeds, ours never reached it on 1" in text
    assert "HalfCheetah-v5: our td3 (ourscompile) against SB3's sac, on CPU not recorded" in text
    assert "HalfCheetah-v5: our td3-256 (ourscompile) against SB3's sac, on CPU not recorded" in text


def test_bad_input_is_named(tmp_path: Path) -> None:
    missing = tmp_path / "nope.jsonl"
    proc = run_python(["bench/rl_summary.py", "--runs", str(missing)], timeout=60)
    assert proc.returncode == 2 and f"--runs {missing}: no such file" in proc.stderr
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps(_run("sb3_sac", 0, {50_000: 1.0}, "t", None)) + "\n{not json\n")
    proc = run_python(["bench/rl_summary.py", "--runs", str(bad)], timeout=60)
    assert proc.returncode == 1 and f"{bad}:2: not a JSON line" in proc.stderr


def test_the_committed_rows_summarise() -> None:
    """The committed rows cover what bench/README_rl.md reports: SAC, TD3 and PPO on HalfCheetah
    and Hopper, at least three seeds at 50k for each, and the wall-clock to 3,000."""
    proc = run_python(["bench/rl_summary.py", "--json"], timeout=60)
    assert proc.returncode == 0, proc.stderr
    lines = [json.loads(line) for line in proc.stdout.splitlines()]
    cells = [c for c in lines if c["kind"] == "returns"]
    for env in ("HalfCheetah-v5", "Hopper-v5"):
        for algo in ("sac", "td3", "ppo"):
            at_50k = [c for c in cells if (c["env"], c["algo"], c["checkpoint"]) == (env, algo, 50_000)]
            assert max(c["n"] for c in at_50k) >= 3, (env, algo)
    # One table per CPU the runs recorded; the Xeon rounds' has the seeds.
    compiled = [c for c in lines if c["kind"] == "reach_3000" and (c["algo"], c["side"]) == ("sac", "oursbf16compile")]
    assert max(c["n"] for c in compiled) >= 3
    assert (ROOT / "bench" / "rl_mujoco_runs.jsonl").is_file()


def test_curves_pair_our_side_with_sb3_per_seed_from_the_latest_rows(tmp_path: Path) -> None:
    curve = lambda *means: [[10_000 * (i + 1), m] for i, m in enumerate(means)]  # noqa: E731
    rows = [
        _run("ours_sac", 2, {20_000: 5.0}, "2026-01-01T00:00Z", None, env="Hopper-v5", curve=curve(1.0, 5.0)),
        # The later row of ours replaces it; SB3's curve is a point longer.
        _run("ours_sac", 2, {30_000: 7.0}, "2026-01-02T00:00Z", None, env="Hopper-v5", curve=curve(None, 9.0, 7.0)),
        _run("sb3_sac", 2, {40_000: 8.0}, "2026-01-02T00:00Z", None, env="Hopper-v5", curve=curve(2.0, 3.0, 4.0, 8.0)),
        # No pair: SB3 has no curve for seed 3, and a quick run is left out.
        _run("ours_sac", 3, {30_000: 1.0}, "2026-01-02T00:00Z", None, env="Hopper-v5", curve=curve(1.0)),
        _run("sb3_sac", 3, {30_000: 1.0}, "2026-01-02T00:00Z", None, env="Hopper-v5"),
        _run("sb3_sac", 2, {10_000: 0.0}, "2026-02-01T00:00Z", None, env="Hopper-v5", quick=True, curve=curve(0.0)),
    ]
    code, out, err = _summary(tmp_path, rows, "--curves", "--json")
    assert code == 0, err
    pairs = [json.loads(line) for line in out.splitlines()]
    assert len(pairs) == 1
    p = pairs[0]
    assert (p["env"], p["algo"], p["seed"], p["side"]) == ("Hopper-v5", "sac", 2, "ours")
    assert p["steps"] == [10_000, 20_000, 30_000, 40_000]
    assert p["ours"] == [None, 9.0, 7.0, None] and p["sb3"] == [2.0, 3.0, 4.0, 8.0]
    assert p["ours_peak"] == [20_000, 9.0] and p["sb3_peak"] == [40_000, 8.0]
    code, out, err = _summary(tmp_path, rows, "--curves")
    assert code == 0, err
    assert "Learning curves, Hopper-v5 sac seed 2: ours against sb3" in out
    assert re.search(r"^ +20000 +9 +3$", out, re.M) and "ours peak: 9.0 at 20000 steps" in out


def test_eval_returns_make_their_own_table_from_the_rows_that_have_them(tmp_path: Path) -> None:
    """Rows that evaluated the mean action at a checkpoint (``eval_return``) give a second table,
    paired as the training returns are; rows without it count in the first table only."""

    def evaluated(runner: str, seed: int, train: float, evaluation: float | None) -> dict[str, Any]:
        row = _run(runner, seed, {300_000: train}, f"2026-01-0{seed + 1}T00:00Z", None, env="Hopper-v5")
        if evaluation is not None:
            row["checkpoints"]["300000"]["eval_return"] = evaluation
        return row

    rows = [
        evaluated("ours_td3", 0, 2000.0, 3100.0),
        evaluated("ours_td3", 1, 1500.0, 3300.0),
        evaluated("ours_td3", 2, 1000.0, None),  # an older row: no evaluation
        evaluated("sb3_td3", 0, 2500.0, 2900.0),
        evaluated("sb3_td3", 1, 1700.0, 3000.0),
        evaluated("sb3_td3", 2, 900.0, None),
    ]
    code, out, err = _summary(tmp_path, rows, "--json")
    assert code == 0, err
    lines = [json.loads(line) for line in out.splitlines()]
    (train,) = [c for c in lines if c["kind"] == "returns"]
    (ev,) = [c for c in lines if c["kind"] == "eval_returns"]
    assert train["n"] == 3 and train["ours_mean"] == 1500.0 and train["sb3_mean"] == 1700.0
    assert ev["seeds"] == [0, 1] and (ev["ours_mean"], ev["sb3_mean"]) == (3200.0, 2950.0) and ev["ours_above"] == 2
    code, text, err = _summary(tmp_path, rows)
    assert code == 0, err
    head, _, evals = text.partition("The mean action's return at each checkpoint (eval_return)")
    assert re.search(r"^Hopper-v5 +td3 +300000 +ours +3 +1500\.0 +1700\.0 ", head, re.M), text
    assert re.search(r"^Hopper-v5 +td3 +300000 +ours +2\* +3200\.0 +2950\.0 ", evals, re.M), text
    code, text, _ = _summary(tmp_path, [r for r in rows if r["seed"] == 2])
    assert code == 0 and "eval_return" not in text  # no row has one: no second table


def test_partial_rows_count_where_they_reached_and_bound_nothing_where_they_stopped(tmp_path: Path) -> None:
    """A run stopped before its end (``"partial": true``) gives its checkpoints and its curve, and
    its time to 3,000 if it got there; stopped short of 3,000, it is no bound in the wall-clock
    table, and it does not hide an earlier complete run of the same seed."""
    curve = lambda *means: [[10_000 * (i + 1), m] for i, m in enumerate(means)]  # noqa: E731
    rows = [
        # Seed 0: SB3's run stopped at 50k, before 3,000: its 50k return counts, its time does not.
        _run("ours_sac", 0, {50_000: 3100.0}, "2026-01-01T00:00Z", (45_000, 200.0)),
        _run("sb3_sac", 0, {50_000: 2000.0}, "2026-01-01T01:00Z", None, partial=True, wall_s=900.0),
        # Seed 1: ours stopped at 50k, after reaching 3,000 at 48k in 250 s: timed.
        _run("ours_sac", 1, {50_000: 3050.0}, "2026-01-01T02:00Z", (48_000, 250.0), partial=True),
        _run("sb3_sac", 1, {50_000: 2500.0}, "2026-01-01T03:00Z", (55_000, 500.0)),
        # Seed 2: a complete run, then a later one of the same seed stopped at 20k (nothing reached
        # yet): the complete run's time and curve stand.
        _run("ours_sac", 2, {50_000: 3200.0}, "2026-01-01T04:00Z", (50_000, 300.0), curve=curve(1.0, 2.0, 3.0)),
        _run("ours_sac", 2, {50_000: 0.0}, "2026-01-02T00:00Z", None, partial=True, curve=curve(1.0, 2.0)),
        _run("sb3_sac", 2, {50_000: 2400.0}, "2026-01-01T05:00Z", (52_000, 600.0), curve=curve(0.5, 1.5, 2.5)),
    ]
    rows[5]["checkpoints"] = {}  # stopped at 20k: no checkpoint reached
    code, out, err = _summary(tmp_path, rows, "--json")
    assert code == 0, err
    lines = [json.loads(line) for line in out.splitlines()]
    (ret,) = [c for c in lines if c["kind"] == "returns"]
    assert ret["seeds"] == [0, 1, 2] and (ret["ours_mean"], ret["sb3_mean"]) == (3116.7, 2300.0)
    (reach,) = [c for c in lines if c["kind"] == "reach_3000"]
    assert [(p["seed"], p["ratio"]) for p in reach["seeds"]] == [(1, 0.5), (2, 0.5)]
    assert reach["ours_never"] == 0 and reach["total_ratio"] == round(550 / 1100, 3)
    code, out, err = _summary(tmp_path, rows, "--curves", "--json")
    assert code == 0, err
    (pair,) = [json.loads(line) for line in out.splitlines()]
    assert pair["seed"] == 2 and pair["ours"] == [1.0, 2.0, 3.0]
