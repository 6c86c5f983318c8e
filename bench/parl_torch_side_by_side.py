"""PARL's own torch training scripts, unchanged, on PARL's own code and on ours, side by side:
SAC, TD3, DDPG and OAC (``benchmark/torch/<algo>/train.py``: the evaluation return every
``--test_every_steps`` on HalfCheetah-v4) and QuickStart (the test reward after its 1,000
episodes). The same script, the same environments (gymnasium's, through one ``gym`` mapping);
only the ``parl`` package differs:

- ``parl``: PARL 2.2.1's source (``--parl-src``, default ``/work/parl-src``) with
  ``PARL_BACKEND=torch``; its pure-Python dependencies (not grpcio, which is why PARL does not
  install on Python 3.11) in ``--parl-deps``:
  ``pip install --no-deps --target /work/parl-deps termcolor six pyzmq psutil tensorboardX pynvml nvidia-ml-py "setuptools<81"``
  (its old generated protobuf modules load with ``PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION=python``);
- ``ours``: ``actorrt.compat.parl`` (``rl`` underneath).

Both go through ``tests/compat/parl_shim.py`` until the runner (``python -m
actorrt.compat.parl``) is merged. Each run is a fresh process at nice 19 with one torch thread;
``--parallel`` runs the two sides of a seed at once, one per core (``taskset``), as
bench/README_rl.md's comparisons do. JSON lines: one per evaluation, one per finished run.

    python bench/parl_torch_side_by_side.py --print                                     # the commands only
    python bench/parl_torch_side_by_side.py --algos sac,td3,ddpg,oac --seeds 0,1,2 --steps 300000 --parallel
    python bench/parl_torch_side_by_side.py --algos quickstart --seeds 0,1,2,3,4 --parallel
    python bench/parl_torch_side_by_side.py --quick                                     # smoke: Pendulum, a few seconds
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
SHIM = ROOT / "tests" / "compat" / "parl_shim.py"
SIDES = ("parl", "ours")
# The evaluation lines of the scripts: SAC, DDPG, OAC ("Evaluation over: 5 episodes, Reward: R"),
# TD3 ("Steps N, Evaluate reward: R"), QuickStart ("Test reward: R").
_EVAL = re.compile(r"(?:Evaluation over: \d+ episodes, Reward: |Evaluate reward: |Test reward: )(-?[\d.]+(?:e-?\d+)?)")
_STEPS = re.compile(r"(?:Total Steps: |Steps:? )(\d+)")


def command(algo: str, side: str, seed: int, args: argparse.Namespace) -> tuple[list[str], dict[str, str]]:
    """The command line and environment of one run."""
    bench = Path(args.parl_src) / "benchmark" / "torch"
    env = {**os.environ, "RL_TORCH_THREADS": "1", "OMP_NUM_THREADS": "1"}
    if side == "parl":
        env["PYTHONPATH"] = os.pathsep.join([str(ROOT), args.parl_deps])
        env["PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION"] = "python"
        runner = [sys.executable, str(SHIM), "--parl-source", args.parl_src]
    else:
        env["PYTHONPATH"] = str(ROOT)
        runner = [sys.executable, str(SHIM)]
    if algo == "quickstart":
        script, script_args = bench / "QuickStart" / "train.py", []
    else:
        script = bench / algo / "train.py"
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
            row = {"bench": "parl_side_by_side", "algo": algo, "side": side, "seed": seed, "env": env_name}
            row |= {"steps": steps, "eval_return": evals[-1], "wall_s": round(time.perf_counter() - start, 1)}
            print(json.dumps(row), flush=True)
    code = proc.wait()
    summary = {"bench": "parl_side_by_side_run", "algo": algo, "side": side, "seed": seed, "env": env_name}
    summary |= {"returncode": code, "final_eval_return": evals[-1] if evals else None, "evaluations": len(evals)}
    summary |= {"wall_s": round(time.perf_counter() - start, 1)}
    if code != 0:
        summary["output_tail"] = tail
    print(json.dumps(summary), flush=True)
    return summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--algos", default="sac,td3,ddpg,oac,quickstart")
    parser.add_argument("--seeds", default="0")
    parser.add_argument("--sides", default=",".join(SIDES))
    parser.add_argument("--env", default="HalfCheetah-v4")
    parser.add_argument("--steps", type=int, default=300_000, help="env steps of each MuJoCo run")
    parser.add_argument("--test_every", type=int, default=10_000, help="env steps between evaluations")
    parser.add_argument("--parl-src", default=os.environ.get("PARL_SRC", "/work/parl-src"))
    parser.add_argument("--parl-deps", default="/work/parl-deps")
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
                    extra = {k: env[k] for k in ("PYTHONPATH", "PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION") if k in env}
                    print(" ".join(f"{k}={shlex.quote(v)}" for k, v in extra.items()), shlex.join(cmd))
        return
    failed = False
    for algo in algos:
        env_name = "CartPole-v0" if algo == "quickstart" else args.env
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
