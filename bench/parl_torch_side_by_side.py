"""PARL's own off-policy torch training scripts, unchanged, on PARL's own code and on ours, side
by side: SAC, TD3, DDPG and OAC (``benchmark/torch/<algo>/train.py``), the evaluation return the
script logs every ``--test_every`` env steps up to ``--steps``, on HalfCheetah-v4 by default.
The same script, the same environments (gymnasium's, through the runner's ``gym``); only the
training code differs:

- ``parl``: PARL 2.2.1's own package from a PARL checkout (``--parl-src``, default
  ``$PARL_SRC`` or ``/work/parl-src``), through ``bench/parl_side_by_side.py --launch-parl``
  (its remote layer swapped for this one's; PARL itself does not install on Python 3.11). It
  needs PARL's pure-Python dependencies: ``pip install -e '.[parl-bench]'``;
- ``ours``: ``python -m actorrt.compat.parl train.py`` (``parl.algorithms`` on ``rl``).

QuickStart's test reward after its 1,000 episodes is ``bench/parl_side_by_side.py quickstart``.
Each run is a fresh process at nice 19 with one torch thread; ``--parallel`` runs the two sides
of a seed at once, one per core (``taskset``), as bench/README_rl.md's comparisons do. JSON
lines: one per evaluation, one per finished run. Not for CI: time them on an idle machine.

    python bench/parl_torch_side_by_side.py --print                              # the commands only
    python bench/parl_torch_side_by_side.py --seeds 0,1,2 --steps 300000 --parallel
    python bench/parl_torch_side_by_side.py --quick                              # smoke: SAC on Pendulum, seconds
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SIDES = ("parl", "ours")
ALGOS = ("sac", "td3", "ddpg", "oac")
# The evaluation lines of the scripts: SAC, DDPG, OAC ("Evaluation over: 5 episodes, Reward: R"),
# TD3 ("Steps N, Evaluate reward: R").
_EVAL = re.compile(r"(?:Evaluation over: \d+ episodes, Reward: |Evaluate reward: )(-?[\d.]+(?:e-?\d+)?)")
_STEPS = re.compile(r"(?:Total Steps: |Steps:? )(\d+)")


def command(algo: str, side: str, seed: int, args: argparse.Namespace) -> tuple[list[str], dict[str, str]]:
    """The command line and environment of one run."""
    script = Path(args.parl_src) / "benchmark" / "torch" / algo / "train.py"
    env = {**os.environ, "RL_TORCH_THREADS": "1", "OMP_NUM_THREADS": "1"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    if side == "parl":
        runner = [sys.executable, str(ROOT / "bench" / "parl_side_by_side.py"), "--launch-parl", args.parl_src]
    else:
        runner = [sys.executable, "-m", "actorrt.compat.parl"]
    script_args = ["--env", args.env, "--seed", str(seed), "--train_total_steps", str(args.steps)]
    script_args += ["--test_every_steps", str(args.test_every)]
    return ["nice", "-n", "19", *runner, str(script), *script_args], env


def run(algo: str, side: str, seed: int, args: argparse.Namespace, core: int | None) -> subprocess.Popen[str]:
    cmd, env = command(algo, side, seed, args)
    if core is not None:
        cmd = ["taskset", "-c", str(core), *cmd]
    folder = tempfile.mkdtemp(prefix=f"parl-{algo}-{side}-{seed}-")  # the scripts write logs and models here
    return subprocess.Popen(cmd, cwd=folder, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def follow(proc: subprocess.Popen[str], algo: str, side: str, seed: int, env_name: str) -> dict[str, Any]:
    """Print a JSON line per evaluation the run logs; return the run's summary."""
    start, steps = time.perf_counter(), 0
    evals: list[float] = []
    tail: list[str] = []
    assert proc.stdout is not None
    for line in proc.stdout:
        tail = [*tail[-20:], line.rstrip()]
        if m := _STEPS.search(line):
            steps = int(m.group(1))
        if m := _EVAL.search(line):
            evals.append(float(m.group(1)))
            row = {"bench": "parl_torch_side_by_side", "algo": algo, "side": side, "seed": seed, "env": env_name}
            row |= {"steps": steps, "eval_return": evals[-1], "wall_s": round(time.perf_counter() - start, 1)}
            print(json.dumps(row), flush=True)
    code = proc.wait()
    summary = {"bench": "parl_torch_side_by_side_run", "algo": algo, "side": side, "seed": seed, "env": env_name}
    summary |= {"returncode": code, "final_eval_return": evals[-1] if evals else None, "evaluations": len(evals)}
    summary |= {"wall_s": round(time.perf_counter() - start, 1)}
    if code != 0:
        summary["output_tail"] = tail
    print(json.dumps(summary), flush=True)
    return summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--algos", default=",".join(ALGOS))
    parser.add_argument("--seeds", default="0")
    parser.add_argument("--sides", default=",".join(SIDES))
    parser.add_argument("--env", default="HalfCheetah-v4")
    parser.add_argument("--steps", type=int, default=300_000, help="env steps of each MuJoCo run")
    parser.add_argument("--test_every", type=int, default=10_000, help="env steps between evaluations")
    parser.add_argument("--parl-src", default=os.environ.get("PARL_SRC", "/work/parl-src"))
    parser.add_argument("--parallel", action="store_true", help="both sides of a seed at once, one per core")
    parser.add_argument("--print", action="store_true", help="print the commands and exit")
    parser.add_argument("--quick", action="store_true", help="SAC on Pendulum-v1 past its warm-up: a smoke test")
    args = parser.parse_args()
    if args.quick:
        args.algos, args.env, args.steps, args.test_every = "sac", "Pendulum-v1", 10_300, 5_000
    algos, seeds, sides = args.algos.split(","), [int(s) for s in args.seeds.split(",")], args.sides.split(",")
    if args.print:
        for algo in algos:
            for seed in seeds:
                for side in sides:
                    cmd, env = command(algo, side, seed, args)
                    print(f"PYTHONPATH={shlex.quote(env['PYTHONPATH'])}", shlex.join(cmd))
        return
    failed = False
    for algo in algos:
        if algo not in ALGOS:
            parser.error(f"--algos: {algo!r} is not one of {', '.join(ALGOS)} (QuickStart: bench/parl_side_by_side.py)")
        env_name = args.env
        for seed in seeds:
            if args.parallel:  # one reader thread per run: neither blocks on a full pipe
                procs = [(side, run(algo, side, seed, args, core)) for core, side in enumerate(sides)]
                with concurrent.futures.ThreadPoolExecutor(len(procs)) as pool:
                    futures = [pool.submit(follow, p, algo, side, seed, env_name) for side, p in procs]
                    results = [f.result() for f in futures]
            else:
                results = [follow(run(algo, side, seed, args, None), algo, side, seed, env_name) for side in sides]
            failed |= any(r["returncode"] != 0 for r in results)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
