"""Distributed SAC against the single process, at the same update-to-data ratio (issue #17, item 5).

Runs ``examples/sac_halfcheetah.py`` as a fresh subprocess per run (embedded cluster, one torch
thread per process) with ``--num-collectors 0`` (the learner steps its own environment between
updates: the single process) and ``--num-collectors N`` (N remote collectors feed the learner's
replay while it updates), for each update ratio. The two sides alternate which goes first from
round to round, so a slow drift of the machine hits both alike.

    python bench/rl_distributed_sac.py                        # ratios 1 and 0.25, 3 rounds each
    python bench/rl_distributed_sac.py --ratios 1 --rounds 6 --replay actor
    python bench/rl_distributed_sac.py --quick                # smoke test: tiny budgets, 1 round

Each run takes ``--learning-starts`` steps of uniform actions, then ``--updates`` updates, so
``learning_starts + updates / ratio`` env steps: a run at ratio 0.25 collects 4x the env steps of
one at ratio 1 for the same updates. Output: one JSON line per run (``frames_per_s`` is env steps
per second over the whole run, as the example reports it), then one summary line per ratio with
each round's ratio distributed / single, their mean and median, and in how many rounds the
distributed run was faster.

What to expect on a small machine: at one update per env step the learner's gradient steps are
nearly all of a single process's time (stepping and acting ~0.24 ms per env step against ~9 ms
per float32 update on HalfCheetah here), so taking them off it gains a few percent; at a lower
update ratio they are a larger share, and so is the gain (``bench/README_rl.md``).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

from rl_throughput import ROOT, run_example


def _commit() -> str | None:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True
        )
    except (OSError, subprocess.CalledProcessError):
        return None
    return out.stdout.strip() or None


def run_once(collectors: int, ratio: float, args: argparse.Namespace) -> dict:
    """One training run of the example; its final JSON line, with what was asked and the load."""
    total = args.learning_starts + round(args.updates / ratio)
    row: dict = {
        "collectors": collectors,
        "updates_per_step": ratio,
        "replay": args.replay if collectors else "learner",
        "bf16": args.bf16,
        "compile": args.compile,
        "total_steps": total,
        "loadavg_start": " ".join(f"{x:.2f}" for x in os.getloadavg()),
    }
    t0 = time.perf_counter()
    try:
        returncode, final, stderr = run_example(
            "sac_halfcheetah",
            "--no-stop-when-solved",
            *("--seed", str(args.seed), "--num-collectors", str(collectors), "--total-steps", str(total)),
            *("--learning-starts", str(args.learning_starts), "--updates-per-step", str(ratio)),
            *("--replay", args.replay, "--bf16" if args.bf16 else "--no-bf16"),
            "--compile" if args.compile else "--no-compile",
            timeout=args.timeout,
        )
    except subprocess.TimeoutExpired:  # subprocess.run has killed it
        row["error"] = f"timed out after --timeout {args.timeout:g} s"
        return row
    row["process_s"] = round(time.perf_counter() - t0, 1)
    # The example exits 0 when solved and 1 when not (these budgets never solve HalfCheetah): a
    # run failed when it printed no final line or exited with anything else.
    if returncode not in (0, 1) or final is None:
        row["error"] = f"exit {returncode}: {stderr[-1500:]}"
        return row
    row.update({k: final[k] for k in ("env_steps", "updates", "wall_s", "frames_per_s", "mean_return") if k in final})
    return row


def summarise(ratio: float, pairs: list[tuple[dict, dict]], collectors: int) -> dict:
    """Per-round ratios distributed / single (env steps per second) and what they add up to."""
    ratios = [
        round(d["frames_per_s"] / s["frames_per_s"], 3)
        for s, d in pairs
        if "frames_per_s" in s and "frames_per_s" in d and s["frames_per_s"] > 0
    ]
    single = [s["frames_per_s"] for s, _ in pairs if "frames_per_s" in s]
    dist = [d["frames_per_s"] for _, d in pairs if "frames_per_s" in d]
    return {
        "summary": "distributed_vs_single",
        "updates_per_step": ratio,
        "collectors": collectors,
        "single_frames_per_s": single,
        "distributed_frames_per_s": dist,
        "ratio_per_round": ratios,
        "ratio_mean": round(statistics.fmean(ratios), 3) if ratios else None,
        "ratio_median": round(statistics.median(ratios), 3) if ratios else None,
        "distributed_faster_rounds": sum(r > 1 for r in ratios),
        "rounds": len(pairs),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ratios", default="1,0.25", help="comma-separated update-to-data ratios (default 1,0.25)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds per ratio (one run of each side per round)")
    parser.add_argument("--collectors", type=int, default=2, help="remote collectors of the distributed side")
    parser.add_argument("--updates", type=int, default=10_000, help="updates per run after the warm-up")
    parser.add_argument("--learning-starts", type=int, default=2_000, help="env steps of uniform actions first")
    parser.add_argument("--replay", choices=("learner", "actor"), default="learner", help="distributed side's replay")
    parser.add_argument("--bf16", action="store_true", help="updates in bfloat16 on both sides")
    parser.add_argument("--compile", action="store_true", help="SAC's losses through torch.compile on both sides")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--timeout", type=float, default=1800, help="seconds per run at most")
    parser.add_argument("--quick", action="store_true", help="smoke test: 1 round, 200 updates after 300 steps")
    parser.add_argument("--out", help="append the JSON lines to this file too")
    args = parser.parse_args()
    if args.quick:
        args.rounds, args.updates, args.learning_starts = 1, 200, 300
    ratios = [float(r) for r in args.ratios.split(",") if r.strip()]
    for r in ratios:
        if r <= 0:
            parser.error(f"--ratios: every ratio must be > 0, got {r}")
    if args.timeout <= 0:
        parser.error(f"--timeout must be > 0 seconds, got {args.timeout:g}")
    if args.collectors < 1:
        parser.error(f"--collectors must be >= 1, got {args.collectors}")
    commit = _commit()

    def emit(row: dict) -> None:
        row = {**row, "code": commit, "utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
        line = json.dumps(row)
        print(line, flush=True)
        if args.out:
            with open(args.out, "a") as fh:
                fh.write(line + "\n")

    failed = False
    for ratio in ratios:
        pairs = []
        for rnd in range(args.rounds):
            order = (0, args.collectors) if rnd % 2 == 0 else (args.collectors, 0)
            runs = {}
            for n in order:
                runs[n] = run_once(n, ratio, args)
                runs[n]["round"] = rnd
                failed |= "error" in runs[n]
                emit(runs[n])
            pairs.append((runs[0], runs[args.collectors]))
        emit(summarise(ratio, pairs, args.collectors))
    if failed:
        sys.exit(1)


if __name__ == "__main__":
    main()
