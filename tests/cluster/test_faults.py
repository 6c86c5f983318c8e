"""The failure model (docs/architecture.md), with real processes: each test kills something real.

Every test gets its own cluster (a master and worker daemons as processes), since it breaks it.
The times asserted are the upper bounds the failure model promises.
"""

from __future__ import annotations

import asyncio
import gc
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import actorrt
from tests.conftest import (
    DETACHED_CREATOR,
    ProcCluster,
    after_restart,
    fork_server_pids,
    host_pids,
    run_driver,
    wait_until,
)

pytestmark = pytest.mark.timeout(120)


@actorrt.remote_class
class Worker:
    def pid(self) -> int:
        return os.getpid()

    def echo(self, x: int) -> int:
        return x

    def burn(self, seconds: float) -> float:
        end = time.time() + seconds
        while time.time() < end:
            pass
        return seconds

    def grow(self, mb_per_step: int, steps: int) -> int:
        hoard = []
        for _ in range(steps):
            hoard.append(bytearray(mb_per_step * 2**20))
            time.sleep(0.05)
        return len(hoard)


@pytest.fixture
def one_worker(tmp_path: Path) -> Iterator[ProcCluster]:
    c = ProcCluster(tmp_path / "home").start(workers=1, cpus_per_worker=2)
    yield c
    c.stop()


@pytest.fixture
def two_workers(tmp_path: Path) -> Iterator[ProcCluster]:
    c = ProcCluster(tmp_path / "home").start(workers=2, cpus_per_worker=1)
    yield c
    c.stop()


async def _wait_for(predicate, timeout: float, interval: float = 0.05) -> float:
    """Seconds until ``await predicate()`` is true; fails after ``timeout``."""
    t0 = time.monotonic()
    while not await predicate():
        if time.monotonic() - t0 > timeout:
            raise AssertionError(f"not within {timeout}s")
        await asyncio.sleep(interval)
    return time.monotonic() - t0


async def test_actor_killed_mid_call(one_worker: ProcCluster) -> None:
    async with one_worker.connect() as c:
        victim, bystander = await asyncio.gather(Worker.remote(), Worker.remote())
        pid = await victim.pid()
        pending = victim.burn(30)
        await asyncio.sleep(0.2)
        os.kill(pid, signal.SIGKILL)
        t0 = time.monotonic()
        with pytest.raises(actorrt.ActorDiedError, match=r"killed by signal 9 \(SIGKILL\)"):
            await pending
        failed_s = time.monotonic() - t0
        assert failed_s < 1.0
        with pytest.raises(actorrt.ActorDiedError, match="SIGKILL"):
            await victim.echo(1)  # later calls fail the same way

        async def slot_free() -> bool:
            return (await c.status()).slots_used == 1

        freed_s = failed_s + await _wait_for(slot_free, 2.0)

        async def pool_refilled() -> bool:
            return (await c.status()).nodes[0]["slots_ready"] == 1

        refilled_s = freed_s + await _wait_for(pool_refilled, 10.0)
        print(
            f"\nactor SIGKILL: call failed {failed_s:.3f}s, slot free {freed_s:.3f}s, pool refilled {refilled_s:.3f}s"
        )
        assert await bystander.echo(7) == 7  # the other actor on that worker is untouched
        replacement = await Worker.remote()
        assert await replacement.echo(3) == 3


async def test_worker_daemon_killed(two_workers: ProcCluster) -> None:
    async with two_workers.connect() as c:
        a, b = await asyncio.gather(Worker.remote(), Worker.remote())
        status = await c.status()
        by_id = {n["worker_id"]: n for n in status.nodes}
        a_node = by_id[next(x["worker_id"] for x in status.actors if x["actor_id"] == a.actor_id)]
        a_host = await a.pid()
        pending = a.burn(60)
        await asyncio.sleep(0.2)
        os.kill(a_node["pid"], signal.SIGKILL)
        t0 = time.monotonic()
        with pytest.raises(actorrt.ActorDiedError):
            await pending
        detected = time.monotonic() - t0
        print(f"\nworker daemon SIGKILL: owner's call failed after {detected:.3f}s")
        assert detected < 3.0 + 1.0  # the fixture's worker timeout, plus a margin
        assert wait_until(lambda: a_host not in host_pids(), 5), "the dead daemon's actor host lived on"
        dead = a_node["pid"]  # its fork server leaves once its last host did
        assert wait_until(lambda: dead not in fork_server_pids().values(), 5), "the dead daemon's fork server lived on"

        async def dropped() -> bool:
            s = await c.status()
            return len(s.nodes) == 1 and len(s.actors) == 1

        await _wait_for(dropped, 4.0)
        assert await b.echo(5) == 5  # the rest of the cluster keeps serving


async def test_a_daemon_back_from_a_pause_never_ends_the_instance_that_replaced_its_actor(tmp_path: Path) -> None:
    """A daemon paused past the worker timeout (SIGSTOP: a VM pause, a partition) is dropped and
    its restartable actor is placed again on the other node. Back, it still hosts the old copy,
    which the master has it stop; that copy's exit report used to end the new instance (here,
    its last restart allowed: the actor died)."""
    cluster = ProcCluster(tmp_path / "home").start(workers=2, cpus_per_worker=1)
    try:
        async with cluster.connect() as c:
            x = await Worker.options(max_restarts=1).remote()
            status = await c.status()
            [row] = [a for a in status.actors if a["actor_id"] == x.actor_id]
            daemon = next(n["pid"] for n in status.nodes if n["worker_id"] == row["worker_id"])

            async def moved() -> bool:
                rows = [a for a in (await c.status()).actors if a["actor_id"] == x.actor_id]
                return bool(rows) and rows[0]["restarts"] == 1 and rows[0]["worker_id"] not in ("", row["worker_id"])

            os.kill(daemon, signal.SIGSTOP)
            try:
                await _wait_for(moved, 15.0)
            finally:
                os.kill(daemon, signal.SIGCONT)

            async def rejoined() -> bool:
                return len((await c.status()).nodes) == 2

            await _wait_for(rejoined, 15.0)
            await asyncio.sleep(2.0)  # it stops its old copy and reports that exit meanwhile
            assert await after_restart(lambda: x.echo(5)) == 5
            assert await moved()  # the new instance: still there, still its first restart
    finally:
        cluster.stop()


def _start_master_again(cluster: ProcCluster) -> None:
    """A new master on the old one's address and token (the old one was killed)."""
    port = cluster.address.rsplit(":", 1)[1]
    cluster.spawn(
        "start", "--port", port, "--cpus", "0", "--token", cluster.token, "--worker-timeout", "3", "--client-grace", "2"
    )


async def test_a_restarted_master_keeps_detached_actors_with_their_names_and_restart_limits(tmp_path: Path) -> None:
    """The workers' reports now carry what the placement said: a detached actor whose creator
    had left was stopped ("its client is gone") once the client grace ran out, its name was
    unknown and its restart limit 0."""
    cluster = ProcCluster(tmp_path / "home").start(workers=1, cpus_per_worker=2)
    try:
        out = await asyncio.to_thread(run_driver, cluster, DETACHED_CREATOR, "keeper", "7", "1")
        assert out.returncode == 0 and "value 7" in out.stdout, out.stderr
        master = cluster.procs[0]
        master.kill()
        master.wait()
        _start_master_again(cluster)
        async with cluster.connect() as c:

            async def rebuilt() -> bool:
                return any(a["class_name"] == "Keeper" for a in (await c.status()).actors)

            await _wait_for(rebuilt, 10.0)
            await asyncio.sleep(3.0)  # past the client grace (2 s): its creator never comes back
            keeper = await actorrt.get_actor("keeper")
            assert await keeper.add(3) == 10
            [row] = [a for a in (await c.status()).actors if a["class_name"] == "Keeper"]
            assert row["detached"] and row["name"] == "keeper" and row["max_restarts"] == 1
            await c.kill(keeper)
    finally:
        cluster.stop()


@actorrt.remote_class
class Holder:
    """Holds a handle it was given (its own client connection counts it)."""

    def __init__(self, target: actorrt.ActorHandle[Worker]) -> None:
        self.target = target

    async def echo_through(self, x: int) -> int:
        return await self.target.echo(x)


async def test_actors_that_died_while_the_master_was_down_restart_if_they_may_else_are_reported_dead(
    tmp_path: Path,
) -> None:
    """The master that saw them die is gone and no worker reports them to the new one. Their
    creator kept the connection of one it held, waiting forever for a death notice nobody would
    send; and restartable ones were reported dead although their restart limit allowed one more
    (the master that had counted their restarts was gone). Now the creator's word (its
    placement, its restarts) places a restartable one again, as its own restart would be, and
    every holder (here an actor too) reaches it again; one whose limit is used up, or that may
    not restart, is reported dead."""
    cluster = ProcCluster(tmp_path / "home").start(workers=1, cpus_per_worker=5)
    try:
        async with cluster.connect() as c:
            held = await Worker.remote()
            kept = await Worker.options(max_restarts=1, lifetime="detached").remote()
            back = await Worker.options(max_restarts=2).remote()
            holder = await Holder.remote(back)
            spent = await Worker.options(max_restarts=1).remote()
            assert await holder.echo_through(1) == 1
            spent_pid = await spent.pid()
            os.kill(spent_pid, signal.SIGKILL)  # its one restart, used while the master is up

            async def restarted() -> bool:
                try:
                    return await spent.pid() != spent_pid
                except actorrt.ActorDiedError:  # the call that met the restart
                    return False

            await _wait_for(restarted, 20.0, interval=0.2)
            held_id, kept_id, back_id, spent_id = (h._conn.actor_id for h in (held, kept, back, spent))
            pids = [await h.pid() for h in (held, kept, back, spent)]
            del kept
            gc.collect()

            async def dropped() -> bool:
                return kept_id not in c.holders.actors

            await _wait_for(dropped, 10.0)
            assert c.state.spec(kept_id) is not None  # the creator may still have to construct it
            master = cluster.procs[0]
            master.kill()
            master.wait()
            for pid in pids:  # they die while no master is there to hear it
                os.kill(pid, signal.SIGKILL)
            t0 = time.monotonic()
            _start_master_again(cluster)

            async def settled() -> bool:
                rows = {a["actor_id"]: a for a in (await c.status()).actors}
                return (
                    c.state.cause(held_id) is not None
                    and c.state.cause(spent_id) is not None
                    and all(a in rows and not rows[a]["restarting"] for a in (kept_id, back_id))
                )

            await _wait_for(settled, 30.0, interval=0.2)
            waited = time.monotonic() - t0
            # the daemon may have reported the SIGKILL itself, if it registered with it pending
            assert any(s in (c.state.cause(held_id) or "") for s in ("while the master was down", "SIGKILL"))
            assert "after 1 restarts, the last allowed" in (c.state.cause(spent_id) or "")
            assert held_id not in c.holders.actors and spent_id not in c.state.specs
            with pytest.raises(actorrt.ActorDiedError):  # its connection saw the host go
                await held.echo(1)
            rows = {a["actor_id"]: a for a in (await c.status()).actors}
            assert rows[kept_id]["restarts"] == 1 and rows[kept_id]["detached"]
            assert rows[back_id]["restarts"] == 1 and rows[back_id]["max_restarts"] == 2
            assert await asyncio.wait_for(back.echo(3), 20) == 3  # the creator's handle reaches it
            assert await asyncio.wait_for(holder.echo_through(4), 20) == 4  # and so does the other holder
            assert await back.pid() not in pids
            assert set(c.state.specs) == {kept_id, back_id}
            print(f"\nsettled {waited:.2f}s after the new master was started (worker timeout 3 s + 2 s)")
            fresh = await asyncio.wait_for(Worker.remote(), 10)  # the slots of those reported dead are free
            again = await asyncio.wait_for(Worker.remote(), 10)
            assert await fresh.echo(2) == 2 and await again.echo(3) == 3
    finally:
        cluster.stop()


async def test_workers_find_a_master_back_after_a_long_outage_within_seconds(tmp_path: Path) -> None:
    """gRPC's own backoff between connection attempts grows to 120 s: after a 25 s outage a
    worker found the new master only at its next attempt, seconds to tens of seconds later (and
    a new master reports the actors no worker brought back within its worker timeout + 2 s as
    gone). Channels now try at least every 2 s."""
    cluster = ProcCluster(tmp_path / "home").start(workers=1, cpus_per_worker=1)
    try:
        master = cluster.procs[0]
        master.kill()
        master.wait()
        await asyncio.sleep(25.0)  # the worker's channel backs off meanwhile
        _start_master_again(cluster)
        t0 = time.monotonic()
        async with cluster.connect() as c:

            async def registered() -> bool:
                return len((await c.status()).nodes) == 1

            await _wait_for(registered, 20.0)
            back_s = time.monotonic() - t0
            print(f"\nthe worker registered {back_s:.2f}s after the new master started (25 s outage)")
            assert back_s < 6.0, back_s
    finally:
        cluster.stop()


async def test_master_restarted_on_the_same_address(tmp_path: Path) -> None:
    cluster = ProcCluster(tmp_path / "home").start(workers=2, cpus_per_worker=1)
    try:
        async with cluster.connect() as c:
            a, b = await asyncio.gather(Worker.remote(), Worker.remote())
            before = sorted(x["actor_id"] for x in (await c.status()).actors)
            master = cluster.procs[0]
            master.kill()
            master.wait()
            # the data plane does not pass through the master: calls go on while it is down
            for i in range(20):
                assert await a.echo(i) == i and await b.echo(-i) == -i
                await asyncio.sleep(0.02)
            _start_master_again(cluster)

            async def rebuilt() -> bool:
                try:
                    s = await c.status()
                except actorrt.ClusterConnectionError:
                    return False
                return len(s.nodes) == 2 and sorted(x["actor_id"] for x in s.actors) == before

            rebuilt_s = await _wait_for(rebuilt, 10.0)
            print(f"\nmaster restart: table rebuilt {rebuilt_s:.3f}s after the new master started")
            assert await a.echo(1) == 1
            await actorrt.kill(a)
            fresh = await asyncio.wait_for(Worker.remote(), 10)  # new placements work
            assert await fresh.echo(2) == 2
            s = await c.status()
            assert s.slots_used == 2 and any(cl["client_id"] == c.client_id and cl["connected"] for cl in s.clients)
    finally:
        cluster.stop()


CLIENT_SCRIPT = """
import asyncio, sys, actorrt

@actorrt.remote_class
class Idle:
    def pid(self):
        import os
        return os.getpid()

async def main():
    async with actorrt.connect(sys.argv[1], token=sys.argv[2]):
        actors = [await Idle.remote(), await Idle.remote()]
        print(*[await a.pid() for a in actors], flush=True)
        await asyncio.sleep(3600)

actorrt.run(main())
"""


def test_client_killed_its_actors_stop_after_the_grace_period(two_workers: ProcCluster, tmp_path: Path) -> None:
    script = tmp_path / "client.py"
    script.write_text(textwrap.dedent(CLIENT_SCRIPT))
    proc = subprocess.Popen(
        [sys.executable, str(script), two_workers.address, two_workers.token], stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None
        pids = [int(x) for x in proc.stdout.readline().split()]
        assert len(pids) == 2 and two_workers.status()["slots"]["used"] == 2
        proc.kill()
        proc.wait()
        t0 = time.monotonic()
        assert wait_until(lambda: two_workers.status()["slots"]["used"] == 0, 2 + 3)  # grace 2s
        freed_s = time.monotonic() - t0
        print(f"\nclient SIGKILL: its slots freed after {freed_s:.3f}s (grace 2s)")
        assert freed_s > 1.0  # not before the grace period
        assert wait_until(lambda: not set(pids) & set(host_pids()), 5)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


async def test_memory_limit_stops_the_actor_and_names_it(one_worker: ProcCluster) -> None:
    async with one_worker.connect() as c:
        hog = await Worker.options(max_memory_mb=150).remote()
        with pytest.raises(
            actorrt.ActorDiedError, match=r"memory limit exceeded: \d+ MB used, max_memory_mb=150"
        ) as info:
            await hog.grow(20, 40)
        print(f"\nmemory limit: {info.value}")
        assert (await c.status()).slots_used == 0 or await _wait_for(lambda: _slots_used_is(c, 0), 2.0) >= 0


async def _slots_used_is(c: actorrt.Cluster, n: int) -> bool:
    return (await c.status()).slots_used == n


@actorrt.remote_class
class Spawner:
    def spawn(self) -> int:
        """A child that inherits the actor's stdout and would outlive it."""
        import subprocess

        return subprocess.Popen(["sleep", "1000"]).pid


async def test_an_actors_children_die_with_it_and_do_not_delay_its_exit(one_worker: ProcCluster) -> None:
    async with one_worker.connect() as c:
        actor = await Spawner.remote()
        child = await actor.spawn()
        t0 = time.monotonic()
        await actorrt.kill(actor)
        assert time.monotonic() - t0 < 3.0  # the exit was reported though the child held the pipe
        assert wait_until(
            lambda: (
                not Path(f"/proc/{child}").exists()
                or Path(f"/proc/{child}/stat").read_text().split(")")[-1].split()[0] == "Z"
            ),
            5,
        )
        assert (await c.status()).slots_used == 0
