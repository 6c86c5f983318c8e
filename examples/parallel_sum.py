"""The GIL demo: the same pure-Python sum on threads and on actors.

Python threads share one interpreter lock, so CPU-bound work on N threads takes as long as on
one. actorrt actors each live in their own process, so N actors use N cores.

    python examples/parallel_sum.py                    # embedded cluster, all local cores
    python examples/parallel_sum.py --address H:P      # a running cluster (actorrt start)
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import actorrt


def sum_of_squares(lo: int, hi: int) -> int:
    """Deliberately pure Python: holds the GIL the whole time."""
    total = 0
    for i in range(lo, hi):
        total += i * i % 7
    return total


@actorrt.remote_class
class Summer:
    def run(self, lo: int, hi: int) -> int:
        return sum_of_squares(lo, hi)


@dataclass
class Config:
    n: int = 20_000_000
    """how many terms to sum"""
    workers: int = os.cpu_count() or 2
    """threads and actors to split the work over"""
    address: str | None = None
    """master host:port; default: an embedded cluster"""


def chunks(n: int, k: int) -> list[tuple[int, int]]:
    step = -(-n // k)
    return [(lo, min(n, lo + step)) for lo in range(0, n, step)]


async def main(cfg: Config) -> dict[str, float]:
    parts = chunks(cfg.n, cfg.workers)

    t0 = time.perf_counter()
    expected = sum_of_squares(0, cfg.n)
    serial_s = time.perf_counter() - t0
    print(f"1 thread              {serial_s:6.2f} s")

    t0 = time.perf_counter()
    with ThreadPoolExecutor(cfg.workers) as pool:
        assert sum(pool.map(lambda p: sum_of_squares(*p), parts)) == expected
    threads_s = time.perf_counter() - t0
    print(f"{cfg.workers} threads             {threads_s:6.2f} s   ({serial_s / threads_s:.2f}x: the GIL)")

    async with actorrt.connect(cfg.address, num_cpus=cfg.workers) as cluster:
        summers = await asyncio.gather(*[Summer.remote() for _ in parts])
        t0 = time.perf_counter()
        results = await asyncio.gather(*[s.run(lo, hi) for s, (lo, hi) in zip(summers, parts, strict=True)])
        actors_s = time.perf_counter() - t0
        assert sum(results) == expected
        print(
            f"{cfg.workers} actors              {actors_s:6.2f} s   ({serial_s / actors_s:.2f}x) on {cluster.address}"
        )
        await asyncio.gather(*[actorrt.kill(s) for s in summers])
    report = {
        "workers": cfg.workers,
        "serial_s": round(serial_s, 3),
        "threads_s": round(threads_s, 3),
        "actors_s": round(actors_s, 3),
        "actor_speedup": round(serial_s / actors_s, 2),
    }
    print(json.dumps(report))
    return report


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


def parse_args() -> Config:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    defaults = Config()
    parser.add_argument("--n", type=_positive, default=defaults.n, help=f"how many terms to sum ({defaults.n})")
    parser.add_argument(
        "--workers", type=_positive, default=defaults.workers, help=f"threads and actors ({defaults.workers})"
    )
    parser.add_argument("--address", default=None, help="master host:port (default: embedded cluster)")
    args = parser.parse_args()
    return Config(n=args.n, workers=args.workers, address=args.address)


if __name__ == "__main__":
    actorrt.run(main(parse_args()))
