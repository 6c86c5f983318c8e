"""Actor turnover: hosts forked by the fork server against hosts started as new interpreters.

    python bench/host_turnover.py                        # 3 rounds x 2 modes, 60 cycles each
    python bench/host_turnover.py --preload torch        # hosts that import torch first
    python bench/host_turnover.py --quick                # smoke test: 1 round, 6 cycles

A cycle is what a workload that churns actors pays (evolution strategies' short-lived workers,
restarts, one actor per task): ``await Counter.remote()``, its first call, ``kill`` and the next
creation at once, on an embedded cluster with ``--cpus`` slots. A host serves one actor and is
replaced when it exits, so once the pool's first hosts are used, each creation waits for a new
host: its start is the cycle's cost. Each round runs each mode in a fresh child interpreter
(``ACTORRT_FORK_SERVER=1`` / ``0``), alternating, so a drift of the machine hits both.

stdout: one JSON line per child run (``mode``, ``round``, ``cycles``, ``wall_s``, ``ms_per_cycle``,
``actors_per_s``), then one summary line with each mode's median ms per cycle and the ratio
``spawn_over_fork``. ``--out FILE`` appends the same lines to FILE.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from machine import cpu_model

ROOT = Path(__file__).resolve().parent.parent
MODES = {"fork": "1", "spawn": "0"}


def _child(cycles: int, cpus: int, preload: list[str]) -> None:
    sys.path.insert(0, str(ROOT))
    import actorrt

    @actorrt.remote_class
    class Counter:
        def __init__(self, n: int) -> None:
            self.n = n

        def add(self, k: int) -> int:
            self.n += k
            return self.n

    async def run() -> dict[str, float]:
        async with actorrt.connect(num_cpus=cpus, preload=preload, log_to_driver=False) as cluster:
            while sum(n["slots_ready"] for n in (await cluster.status()).nodes) < cpus:  # a full warm pool
                await asyncio.sleep(0.05)
            started = time.perf_counter()
            for i in range(cycles):
                actor = await Counter.remote(i)
                assert await actor.add(1) == i + 1
                await actorrt.kill(actor)
            wall = time.perf_counter() - started
        return {
            "wall_s": round(wall, 3),
            "ms_per_cycle": round(1000 * wall / cycles, 2),
            "actors_per_s": round(cycles / wall, 2),
        }

    print(json.dumps(asyncio.run(run())), flush=True)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--cycles", type=int, default=60)
    parser.add_argument("--cpus", type=int, default=2, help="slots of the embedded cluster")
    parser.add_argument("--preload", default="", help="comma-separated modules every host imports first")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--out", type=Path)
    parser.add_argument("--_child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    preload = [m for m in args.preload.split(",") if m]
    if args._child:
        _child(args.cycles, args.cpus, preload)
        return 0
    if args.quick:
        args.rounds, args.cycles = 1, 6
    lines: list[dict[str, object]] = []
    per_mode: dict[str, list[float]] = {mode: [] for mode in MODES}
    common = {"cpus": args.cpus, "preload": preload, "cpu": cpu_model()}
    for rnd in range(args.rounds):
        for mode, flag in MODES.items():
            cmd = [sys.executable, __file__, "--_child", "--cycles", str(args.cycles), "--cpus", str(args.cpus)]
            if preload:
                cmd += ["--preload", ",".join(preload)]
            out = subprocess.run(
                cmd, capture_output=True, text=True, timeout=1800, env=dict(os.environ, ACTORRT_FORK_SERVER=flag)
            )
            if out.returncode != 0:
                print(out.stderr, file=sys.stderr)
                return 1
            result = json.loads(out.stdout.strip().splitlines()[-1])
            per_mode[mode].append(result["ms_per_cycle"])
            lines.append(
                {"bench": "host_turnover", "mode": mode, "round": rnd, "cycles": args.cycles, **common, **result}
            )
            print(json.dumps(lines[-1]), flush=True)
    fork, spawn = (statistics.median(per_mode[m]) for m in ("fork", "spawn"))
    lines.append(
        {
            "bench": "host_turnover_summary",
            "rounds": args.rounds,
            "cycles": args.cycles,
            **common,
            "fork_ms_per_cycle": fork,
            "spawn_ms_per_cycle": spawn,
            "spawn_over_fork": round(spawn / fork, 2),
        }
    )
    print(json.dumps(lines[-1]), flush=True)
    if args.out:
        with args.out.open("a") as f:
            f.writelines(json.dumps(line) + "\n" for line in lines)
    return 0


if __name__ == "__main__":
    sys.exit(main())
