"""Micro-benchmark of ``await fut`` for a ``CallFuture`` on its own loop: the hot path of every
call made from async code (``bench/actor_calls.py``'s latency and pipelined rows).

    python bench/future_await.py            # ~10 s; one JSON line per measurement
    python bench/future_await.py --n 100000 --reps 7

Each row is the median over ``--reps`` runs of ``--n`` iterations, in ns per iteration, on uvloop
when installed (as ``actorrt.run``):

- ``await_done_callfuture``: create a CallFuture, set its result, await it (no suspension).
- ``await_pending_callfuture``: create a CallFuture, ``loop.call_soon(fut.set_result, None)``,
  await it: the task suspends on the future and is woken by it, as a call's reply does.
- ``await_pending_plain_future``: the same with ``loop.create_future()``: the floor.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
from collections.abc import Callable, Coroutine
from typing import Any

import actorrt
from actorrt import CallFuture


async def _done(n: int) -> float:
    loop = asyncio.get_running_loop()
    start = time.perf_counter()
    for _ in range(n):
        fut: CallFuture[None] = CallFuture(loop=loop)
        fut.set_result(None)
        await fut
    return time.perf_counter() - start


async def _pending(n: int) -> float:
    loop = asyncio.get_running_loop()
    start = time.perf_counter()
    for _ in range(n):
        fut: CallFuture[None] = CallFuture(loop=loop)
        loop.call_soon(fut.set_result, None)
        await fut
    return time.perf_counter() - start


async def _plain(n: int) -> float:
    loop = asyncio.get_running_loop()
    start = time.perf_counter()
    for _ in range(n):
        fut: asyncio.Future[None] = loop.create_future()
        loop.call_soon(fut.set_result, None)
        await fut
    return time.perf_counter() - start


CASES: dict[str, Callable[[int], Coroutine[Any, Any, float]]] = {
    "await_done_callfuture": _done,
    "await_pending_callfuture": _pending,
    "await_pending_plain_future": _plain,
}


async def main(n: int, reps: int) -> None:
    for case in CASES.values():  # warm-up
        await case(n // 10)
    samples: dict[str, list[float]] = {name: [] for name in CASES}
    for _ in range(reps):  # interleaved, so a busy spell of the machine weighs on all alike
        for name, case in CASES.items():
            samples[name].append(await case(n) / n * 1e9)
    for name, ns in samples.items():
        print(json.dumps({"bench": name, "value": round(statistics.median(ns), 1), "unit": "ns", "n": n, "reps": reps}))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=200_000, help="iterations per run")
    parser.add_argument("--reps", type=int, default=5, help="runs per case (the median is reported)")
    args = parser.parse_args()
    actorrt.run(main(args.n, args.reps))
