"""``max_memory_mb`` over an actor's whole process tree: its children count, and pages they share
copy-on-write count once."""

from __future__ import annotations

import asyncio
import multiprocessing
import subprocess
import sys
import time

import pytest

import actorrt
from tests.conftest import ProcCluster, wait_until
from tests.worker.conftest import gone

pytestmark = pytest.mark.timeout(120)


@actorrt.remote_class
class Parent:
    def start_hog(self, mb: int) -> int:
        """A child process that holds ``mb`` MiB, touched, and then sleeps; its pid."""
        code = f"import time; b = bytearray({mb} * 2**20); b[::4096] = b'x' * len(b[::4096]); time.sleep(600)"
        return subprocess.Popen([sys.executable, "-c", code]).pid

    def echo(self, x: int) -> int:
        return x


async def test_memory_limit_counts_the_actors_children(one_worker: ProcCluster) -> None:
    async with one_worker.connect(log_to_driver=False) as c:
        a = await Parent.options(max_memory_mb=200).remote()
        child = await a.start_hog(400)
        t0 = time.monotonic()
        over = r"memory limit exceeded: \d+ MB used, max_memory_mb=200 \(over the actor's 2 processes\)"
        with pytest.raises(actorrt.ActorDiedError, match=over) as info:
            while time.monotonic() - t0 < 20:
                await a.echo(1)
                await asyncio.sleep(0.1)
        stopped_s = time.monotonic() - t0
        print(f"\nchild over the limit: actor stopped {stopped_s:.3f}s after the child started: {info.value}")
        assert time.monotonic() - t0 < 10
        assert wait_until(lambda: gone(child), 5), "the child outlived its actor"
        assert await asyncio.wait_for(_slots_free(c), 10)


@actorrt.remote_class
class Forker:
    def fork_sharing(self, mb: int, children: int) -> list[int]:
        """Hold ``mb`` MiB, touched, then fork ``children`` processes that share it (copy on
        write, never written) and sleep; their pids."""
        self.block = bytearray(mb * 2**20)
        self.block[::4096] = b"x" * len(self.block[::4096])
        ctx = multiprocessing.get_context("fork")
        self.children = [ctx.Process(target=time.sleep, args=(600,), daemon=True) for _ in range(children)]
        for child in self.children:
            child.start()
        return [child.pid for child in self.children if child.pid is not None]

    def echo(self, x: int) -> int:
        return x


async def test_memory_shared_copy_on_write_by_an_actors_children_counts_once(one_worker: ProcCluster) -> None:
    """max_memory_mb added the RSS of the actor's processes: 150 MiB that the actor's three
    forked children share with it (never written) counted four times, 600 MiB against a limit
    of 350, and the actor was killed. The limit is judged on the proportional set size."""
    async with one_worker.connect(log_to_driver=False) as c:
        a = await Forker.options(max_memory_mb=350).remote()
        children = await a.fork_sharing(150, 3)
        assert len(children) == 3
        await asyncio.sleep(2.0)  # ten checks of the limit
        assert await a.echo(1) == 1, "killed for memory its children share"
        rss = next(int(x["rss_bytes"]) for x in (await c.status()).actors if x["actor_id"] == a.actor_id)
        print(f"\nRSS over the actor's 4 processes: {rss / 2**20:.0f} MiB (limit 350 MiB): alive")
        assert rss > 350 * 2**20  # the RSS alone would have been over it
        await c.kill(a)
        assert wait_until(lambda: all(gone(pid) for pid in children), 10)


async def _slots_free(c: actorrt.Cluster) -> bool:
    while (await c.status()).slots_used:
        await asyncio.sleep(0.05)
    return True
