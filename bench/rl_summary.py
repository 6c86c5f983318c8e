"""Where our MuJoCo runs stand against SB3's: the table of issue #17's item 5, computed from the rows
that ``bench/rl_baselines.py --suite mujoco --out FILE`` appends (``bench/rl_mujoco_runs.jsonl``).

    python bench/rl_summary.py                               # the committed rows: tables
    python bench/rl_summary.py --json                        # one JSON line per cell instead
    python bench/rl_summary.py --runs a.jsonl --runs b.jsonl # rows of several files together

**Returns.** A cell is (env, algorithm, checkpoint, our side). It compares that side with SB3 on
the seeds that both ran to the checkpoint. It gives, for each side, the mean and the median of
the return there (the mean of the last 10 training episodes). It also gives how many seeds ours
is above on, and the difference of the means with its standard error, ``sqrt(s_ours^2/n +
s_sb3^2/n)``. The runs of the two sides share a seed number but nothing random, so the error is
not paired. A cell with fewer than 3 seeds is marked: item 5 asks for at least 3. Rows of SAC
and TD3 runs that evaluated the mean action at each checkpoint (``eval_return``) give a second
table of the same cells on that return.

**Wall-clock to 3,000.** On HalfCheetah, for each of our SAC and TD3 sides (rl-zoo's TD3 and the
256x256 ``td3-256`` and ``td3-256-zoo``) against SB3's SAC (the reference item 5 names) and each
seed both ran: the env steps and the seconds each side took to 3,000, and the ratio. Where one
side's run never reached it, the ratio is a bound by that whole run: from above where SB3's did
not (``<``), from below where ours did not (``>``). Then the total ratio and the median ratio over
the seeds both reached, on how many seeds ours took at most half of SB3's time, and on how many
ours never reached 3,000. Runs pair only with runs on the same CPU (the row's ``cpu``), and even
then wall-clocks compare best within one round, so the table names the commit and the UTC end
time of each run it reads.

A run is deterministic per seed on one kind of CPU: the same code gives the same returns whatever
the load (another CPU's kernels round differently, and so give another, equally valid, sample). So
where a (runner, env, seed) has several rows, each checkpoint is read from the latest row that has
it, whichever CPU it ran on.
Micro-benchmark rows and ``--quick`` runs are left out. Our SAC, TD3 and DDPG rows whose gradients
were written out (``"written_out": true``: ``rl.backprop``, SAC from commit 4a1cc94 on, TD3 and
DDPG from 022f3ae on) are another side, ``<side>/written-out`` (``ourscompile/written-out``), in
the wall-clock table: another update code, whose wall-clock must not be totalled with the autograd
rows'. In the returns tables and the curves they count as their side: the same update, rounded
differently (tests/rl check the two give the same weights), as on another kind of CPU.

**Learning curves** (``--curves``): for each (env, algorithm, seed) where our side and SB3 both
have a row with a curve (the mean of the last 10 training episodes every 10,000 env steps), the
two curves side by side, each from the latest such row, with each side's peak and where it was.

**Partial rows** (``"partial": true``: a run stopped before its end, written up to the last point
of its curve) count for the checkpoints they reached and for their curve where no complete row
has a longer one. In the wall-clock table, one counts only if it reached 3,000: a stopped run that
had not yet is no bound on anything.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from rl_baselines import OFF_POLICY

DEFAULT_RUNS = Path(__file__).with_name("rl_mujoco_runs.jsonl")
SB3 = "sb3"
TARGET_KEY = "reached_3000"
UNRECORDED = "CPU not recorded"
MIN_SEEDS = 3
"""Item 5: returns over at least 3 seeds."""

Run = dict[str, Any]


def load(paths: Iterable[Path]) -> list[Run]:
    """The training runs of ``paths`` (``runner`` ``<side>_<algo>``), in file order."""
    runs = []
    for path in paths:
        for n, line in enumerate(Path(path).read_text().splitlines(), 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as e:
                raise SystemExit(f"{path}:{n}: not a JSON line ({e.msg})") from None
            runner = row.get("runner", "")
            if runner == "micro" or row.get("quick") or "_" not in runner or "checkpoints" not in row:
                continue
            runs.append(row)
    return runs


def cpu(row: Run) -> str:
    """The CPU a row ran on (rows from before ``bench/rl_baselines.py`` recorded it: ``UNRECORDED``)."""
    return str(row.get("cpu") or UNRECORDED)


WRITTEN_OUT = "/written-out"
"""Appended to the side of our rows whose gradients were written out (``"written_out": true``,
:mod:`rl.backprop`): another update code, timed apart from the autograd rows."""


def side_algo(row: Run, timed: bool = False) -> tuple[str, str]:
    """``(side, algo)`` of a row's runner ``<side>_<algo>``; where ``timed``, the side marked
    :data:`WRITTEN_OUT` where the row says its gradients were written out."""
    side, algo = row["runner"].rsplit("_", 1)
    return (side + WRITTEN_OUT if timed and row.get("written_out") else side), algo


def latest(runs: list[Run]) -> dict[tuple[str, str, str, str, int], Run]:
    """The latest run (by ``utc_end``, then file order) of each ``(cpu, side, algo, env, seed)``."""
    out: dict[tuple[str, str, str, str, int], Run] = {}
    for row in sorted(runs, key=lambda r: r.get("utc_end", "")):  # stable: file order breaks ties
        side, algo = side_algo(row, timed=True)
        out[(cpu(row), side, algo, row["env"], int(row["seed"]))] = row
    return out


def returns(runs: list[Run], key: str = "mean_return") -> dict[tuple[str, str, str, int], dict[int, float]]:
    """``(side, algo, env, checkpoint) -> {seed: return}``, each from the latest run that has it;
    ``key``: ``mean_return`` (the training episodes) or ``eval_return`` (the mean action)."""
    table: dict[tuple[str, str, str, int], dict[int, float]] = defaultdict(dict)
    for row in sorted(runs, key=lambda r: r.get("utc_end", "")):
        side, algo = side_algo(row)
        for checkpoint, at in row["checkpoints"].items():
            if at.get(key) is not None:
                table[(side, algo, row["env"], int(checkpoint))][int(row["seed"])] = float(at[key])
    return table


def compare(ours: dict[int, float], sb3: dict[int, float]) -> dict[str, Any] | None:
    """Our side against SB3's on the seeds both have (``None`` if there are none)."""
    seeds = sorted(set(ours) & set(sb3))
    if not seeds:
        return None
    a, b = [ours[s] for s in seeds], [sb3[s] for s in seeds]
    n = len(seeds)
    se = math.sqrt(statistics.variance(a) / n + statistics.variance(b) / n) if n > 1 else None
    diff = statistics.fmean(a) - statistics.fmean(b)
    return {
        "seeds": seeds,
        "n": n,
        "enough_seeds": n >= MIN_SEEDS,
        "ours_mean": round(statistics.fmean(a), 1),
        "sb3_mean": round(statistics.fmean(b), 1),
        "ours_median": round(statistics.median(a), 1),
        "sb3_median": round(statistics.median(b), 1),
        "ours_above": sum(x > y for x, y in zip(a, b, strict=True)),
        "ties": sum(x == y for x, y in zip(a, b, strict=True)),
        "mean_diff": round(diff, 1),
        "se_diff": None if se is None else round(se, 1),
        "diff_in_se": None if not se else round(diff / se, 2),
    }


def return_cells(runs: list[Run], key: str = "mean_return") -> list[dict[str, Any]]:
    """Every (env, algo, checkpoint, our side) that SB3 also ran, sorted (``key``: see ``returns``)."""
    table = returns(runs, key)
    cells = []
    for (side, algo, env, checkpoint), ours in sorted(table.items()):
        if side == SB3:
            continue
        c = compare(ours, table.get((SB3, algo, env, checkpoint), {}))
        if c is not None:
            cells.append({"env": env, "algo": algo, "checkpoint": checkpoint, "side": side, **c})
    return sorted(cells, key=lambda c: (c["env"], c["algo"], c["checkpoint"], c["side"]))


def reach_cells(
    runs: list[Run],
    env: str = "HalfCheetah-v5",
    algos: tuple[str, ...] = OFF_POLICY,
    reference: str = "sac",
) -> list[dict[str, Any]]:
    """Wall-clock to 3,000 of each of our sides of each of ``algos`` against SB3's ``reference``
    algorithm (item 5 measures against SB3's SAC), seed by seed."""
    # A run stopped before reaching 3,000 says nothing of when it would have.
    last = latest([r for r in runs if not (r.get("partial") and r.get(TARGET_KEY) is None)])
    cells = []
    ours = sorted({(a, c, s) for (c, s, a, e, _) in last if a in algos and e == env and s != SB3})
    for algo, machine, side in sorted(ours, key=lambda k: (algos.index(k[0]), k[1], k[2])):
        per_seed = []
        for (c, s, a, e, seed), row in sorted(last.items()):
            other = last.get((machine, SB3, reference, env, seed))
            if (c, s, a, e) != (machine, side, algo, env) or other is None:
                continue
            mine, theirs = row.get(TARGET_KEY), other.get(TARGET_KEY)
            # A side that never reached 3,000 in its run bounds the ratio by its whole run: from
            # above where SB3 never did ("<"), from below where ours never did (">"); none if neither.
            ours_wall = mine["wall_s"] if mine is not None else row["wall_s"]
            sb3_wall = theirs["wall_s"] if theirs is not None else other["wall_s"]
            per_seed.append(
                {
                    "seed": seed,
                    "ours_env_steps": mine["env_steps"] if mine is not None else None,
                    "ours_wall_s": ours_wall,
                    "ours_reached": mine is not None,
                    "sb3_env_steps": theirs["env_steps"] if theirs is not None else None,
                    "sb3_wall_s": sb3_wall,
                    "sb3_reached": theirs is not None,
                    "ratio": round(ours_wall / sb3_wall, 3) if mine is not None or theirs is not None else None,
                    "ours_run": f"{row.get('code', '?')} {row.get('utc_end', '?')}",
                    "sb3_run": f"{other.get('code', '?')} {other.get('utc_end', '?')}",
                }
            )
        both = [p for p in per_seed if p["sb3_reached"] and p["ours_reached"]]
        if per_seed:
            cells.append(
                {
                    "env": env,
                    "algo": algo,
                    "sb3_algo": reference,
                    "side": side,
                    "cpu": machine,
                    "n": len(both),
                    "total_ratio": (
                        round(sum(p["ours_wall_s"] for p in both) / sum(p["sb3_wall_s"] for p in both), 3)
                        if both
                        else None
                    ),
                    "median_ratio": round(statistics.median(p["ratio"] for p in both), 3) if both else None,
                    "at_most_half": sum(p["ours_reached"] and p["ratio"] <= 0.5 for p in per_seed),
                    "ours_never": sum(not p["ours_reached"] for p in per_seed),
                    "seeds": per_seed,
                }
            )
    return cells


def curve_pairs(runs: list[Run]) -> list[dict[str, Any]]:
    """Each (env, algo, seed, our side) with a curve on that side and on SB3's (the latest row of
    each with one): ``steps``, ``ours`` and ``sb3`` (None where a side had no episode yet or
    stopped before), and each side's peak ``(steps, mean)``."""
    curves: dict[tuple[str, str, str, int], dict[int, float | None]] = {}
    for row in sorted(runs, key=lambda r: r.get("utc_end", "")):
        if row.get("curve") and not row.get("quick"):
            side, algo = side_algo(row)
            key = (side, algo, row["env"], int(row["seed"]))
            if row.get("partial") and key in curves and max(curves[key]) >= row["curve"][-1][0]:
                continue  # a stopped run does not replace a longer curve
            curves[key] = {int(k): v for k, v in row["curve"]}
    pairs = []
    for (side, algo, env, seed), ours in sorted(curves.items()):
        sb3 = curves.get((SB3, algo, env, seed))
        if side == SB3 or sb3 is None:
            continue
        steps = sorted(set(ours) | set(sb3))

        def peak(c: dict[int, float | None]) -> tuple[int, float] | None:
            known = [(v, k) for k, v in c.items() if v is not None]
            return None if not known else (max(known)[1], max(known)[0])

        pairs.append(
            {
                "env": env,
                "algo": algo,
                "seed": seed,
                "side": side,
                "steps": steps,
                "ours": [ours.get(k) for k in steps],
                "sb3": [sb3.get(k) for k in steps],
                "ours_peak": peak(ours),
                "sb3_peak": peak(sb3),
            }
        )
    return pairs


def print_curves(pairs: list[dict[str, Any]]) -> None:
    if not pairs:
        print("No (env, algorithm, seed) has a learning curve on both our side and SB3's yet.")
    for p in pairs:
        print(f"\nLearning curves, {p['env']} {p['algo']} seed {p['seed']}: {p['side']} against sb3")
        sw = max(16, len(p["side"]))
        print(f"{'steps':>8} {p['side']:>{sw}} {'sb3':>9}")
        for k, a, b in zip(p["steps"], p["ours"], p["sb3"], strict=True):
            print(f"{k:>8} {_fmt(a):>{sw}} {_fmt(b):>9}")
        for name in ("ours", "sb3"):
            at = p[f"{name}_peak"]
            print(f"{name} peak: " + ("none" if at is None else f"{at[1]:.1f} at {at[0]} steps"))


def _fmt(x: float | None) -> str:
    return "-" if x is None else f"{x:g}"


def print_tables(
    returns_: list[dict[str, Any]], reach: list[dict[str, Any]], evals: list[dict[str, Any]] | None = None
) -> None:
    print("Returns at each checkpoint: our side against SB3 on the seeds both ran (* fewer than 3 seeds)")
    _print_returns(returns_)
    if evals:
        print("\nThe mean action's return at each checkpoint (eval_return), the same way")
        _print_returns(evals)
    _print_reach(reach)


def _print_returns(returns_: list[dict[str, Any]]) -> None:
    w = max([len("algo"), *(len(c["algo"]) for c in returns_)])
    sw = max([16, *(len(c["side"]) for c in returns_)])
    head = f"{'env':<15} {'algo':<{w}} {'step':>7} {'side':<{sw}} {'n':>3}  {'ours mean':>9} {'sb3 mean':>9}"
    print(head + f"  {'ours med':>9} {'sb3 med':>9}  {'above':>5}  {'diff':>7} {'se':>6}")
    for c in returns_:
        n = f"{c['n']}{'' if c['enough_seeds'] else '*'}"
        print(
            f"{c['env']:<15} {c['algo']:<{w}} {c['checkpoint']:>7} {c['side']:<{sw}} {n:>3}  "
            f"{c['ours_mean']:>9.1f} {c['sb3_mean']:>9.1f}  {c['ours_median']:>9.1f} {c['sb3_median']:>9.1f}  "
            f"{c['ours_above']:>2}/{c['n']:<2}  {c['mean_diff']:>7.1f} {_fmt(c['se_diff']):>6}"
        )


def _print_reach(reach: list[dict[str, Any]]) -> None:
    for r in reach:
        print(
            f"\nWall-clock to 3,000, {r['env']}: our {r['algo']} ({r['side']}) against SB3's {r['sb3_algo']}, "
            f"on {r['cpu']}"
        )
        print(
            f"{'seed':>4}  {'ours steps':>10} {'ours s':>8}  {'sb3 steps':>9} {'sb3 s':>8}  {'ratio':>6}  runs (ours; sb3)"
        )
        for p in r["seeds"]:
            ours_steps = p["ours_env_steps"] if p["ours_reached"] else "never"
            sb3_steps = p["sb3_env_steps"] if p["sb3_reached"] else "never"
            bound = " " if p["ours_reached"] == p["sb3_reached"] else "<" if p["ours_reached"] else ">"
            ratio = "-" if p["ratio"] is None else f"{p['ratio']:.3f}"
            print(
                f"{p['seed']:>4}  {ours_steps:>10} {p['ours_wall_s']:>8.1f}  {sb3_steps:>9} "
                f"{p['sb3_wall_s']:>8.1f} {bound}{ratio:>6}  {p['ours_run']}; {p['sb3_run']}"
            )
        over = (
            f"total {r['total_ratio']:.3f} and median {r['median_ratio']:.3f} over the {r['n']} seeds both reached"
            if r["n"]
            else "no seed that both reached"
        )
        print(
            f"{over}; at most half on {r['at_most_half']} of {len(r['seeds'])} seeds, ours never reached it on "
            f"{r['ours_never']} (< : SB3 never reached it in its run, > : ours never did)"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", action="append", type=Path, help=f"JSON-lines file (default {DEFAULT_RUNS.name})")
    parser.add_argument("--json", action="store_true", help="one JSON line per cell instead of tables")
    parser.add_argument("--curves", action="store_true", help="learning curves of ours and SB3's side by side")
    args = parser.parse_args(argv)
    paths = args.runs or [DEFAULT_RUNS]
    for p in paths:
        if not p.is_file():
            parser.error(f"--runs {p}: no such file")
    runs = load(paths)
    if args.curves:
        pairs = curve_pairs(runs)
        if args.json:
            for c in pairs:
                print(json.dumps({"kind": "curves", **c}))
        else:
            print_curves(pairs)
        return 0
    cells, reach, evals = return_cells(runs), reach_cells(runs), return_cells(runs, "eval_return")
    if args.json:
        for c in cells:
            print(json.dumps({"kind": "returns", **c}))
        for c in evals:
            print(json.dumps({"kind": "eval_returns", **c}))
        for r in reach:
            print(json.dumps({"kind": "reach_3000", **r}))
    else:
        print_tables(cells, reach, evals)
    return 0


if __name__ == "__main__":
    sys.exit(main())
