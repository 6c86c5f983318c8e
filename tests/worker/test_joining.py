"""A worker daemon and its master: joining a busy cluster, refused by a restarted master,
placements on warm hosts that just died retried, a constructor that ran never placed again."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import time
from pathlib import Path

import pytest

import actorrt
from tests.conftest import Echo, ProcCluster, host_pids, wait_until

pytestmark = pytest.mark.timeout(120)


def test_a_worker_joining_a_busy_cluster_stays_up(tmp_path: Path) -> None:
    cluster = ProcCluster(tmp_path / "home").start(workers=1, cpus_per_worker=1)
    try:
        with cluster.connect(log_to_driver=False) as c:
            first = Echo.remote().result(30)
            waiting = [Echo.remote() for _ in range(3)]  # queued: no free slot
            assert wait_until(lambda: c.status().result(10).placements_waiting == 3, 10)
            timeout_s = 2
            joined = cluster.spawn(
                "connect",
                "--address",
                cluster.address,
                "--cpus",
                "3",
                "--token",
                cluster.token,
                "--timeout",
                str(timeout_s),
            )
            actors = [f.result(30) for f in waiting]  # placed while the new worker's hosts warm up
            time.sleep(2 * timeout_s + 1.5)  # past the old readiness deadline
            assert joined.poll() is None, (cluster.home / "proc-2.log").read_text()
            assert [a.echo(i).result(10) for i, a in enumerate([first, *actors])] == [0, 1, 2, 3]
            status = c.status().result(10)
            assert len(status.nodes) == 2 and len(status.actors) == 4
            for a in [first, *actors]:
                actorrt.kill(a).result(15)
    finally:
        cluster.stop()


async def test_a_worker_refused_by_a_restarted_master_stops_its_hosts_and_exits(tmp_path: Path) -> None:
    cluster = ProcCluster(tmp_path / "home").start(workers=1, cpus_per_worker=2)
    checked = False
    try:
        worker = cluster.procs[1]
        async with cluster.connect(log_to_driver=False) as c:
            a = await Echo.remote()
            host = await a.pid()
            endpoint = (await c.status()).actors[0]["endpoint"]
            hosts = {pid for pid, ppid in host_pids().items() if ppid == worker.pid}
            assert host in hosts and len(hosts) == 2
            master = cluster.procs[0]
            master.kill()
            master.wait()
            port = cluster.address.rsplit(":", 1)[1]
            cluster.spawn(
                "start",
                "--port",
                port,
                "--cpus",
                "0",
                "--token",
                "a-new-token-" + "x" * 20,
                "--worker-timeout",
                "3",
                "--client-grace",
                "2",
            )
            t0 = time.monotonic()
            returncode = await asyncio.to_thread(worker.wait, 20)
            exited_s = time.monotonic() - t0
            log_text = (cluster.home / "proc-1.log").read_text()
            print(f"\nrefused worker: exited {exited_s:.3f}s after the new master started (code {returncode})")
            assert returncode != 0, log_text
            assert re.search(r"refused.*stopping this worker and its 2 actor hosts", log_text), log_text
            assert "actorrt connect: " in log_text and "refused" in log_text.rsplit("actorrt connect: ", 1)[1]
            assert not hosts & set(host_pids())
            with pytest.raises(actorrt.ActorRTError):
                await asyncio.wait_for(a.echo(1), 10)
            ip, host_port = endpoint.rsplit(":", 1)
            with pytest.raises(OSError):
                await asyncio.wait_for(asyncio.open_connection(ip, int(host_port)), 5)
            checked = True
    except actorrt.ActorRTError:
        assert checked  # only closing the client against the new master (which refuses it) may complain
    finally:
        cluster.stop()


def _worker_hosts(cluster: ProcCluster) -> set[int]:
    daemons = {p.pid for p in cluster.procs[1:]}
    return {pid for pid, ppid in host_pids().items() if ppid in daemons}


async def test_placement_right_after_the_warm_hosts_died_is_retried(tmp_path: Path) -> None:
    cluster = ProcCluster(tmp_path / "home").start(workers=2, cpus_per_worker=2)
    try:
        async with cluster.connect(log_to_driver=False):
            took = []
            for round_ in range(6):
                assert await asyncio.to_thread(wait_until, lambda: len(_worker_hosts(cluster)) == 4, 15)
                for pid in _worker_hosts(cluster):
                    os.kill(pid, signal.SIGKILL)
                t0 = time.monotonic()
                # a named, restartable one too: its name must be free again for the next attempt
                named = Echo.options(name=f"echo-{round_}", max_restarts=1)
                actors = await asyncio.wait_for(asyncio.gather(named.remote(), Echo.remote()), 30)
                took.append(time.monotonic() - t0)
                assert [await a.echo(round_) for a in actors] == [round_, round_]
                for a in actors:
                    await actorrt.kill(a)
            print(
                f"\nplacement after SIGKILL of every warm host: 2 actors each round in max {max(took):.3f}s "
                f"(rounds: {', '.join(f'{x:.2f}' for x in took)})"
            )
        master_log = (cluster.home / "proc-0.log").read_text()
        assert re.search(r"the warm host of slot \d exited \(killed by signal 9", master_log)  # SlotLost arrived
    finally:
        cluster.stop()


@actorrt.remote_class
class Fails:
    def __init__(self, counter: str, how: str) -> None:
        with open(counter, "a") as f:
            f.write("ran\n")
        if how == "raise":
            raise ValueError("bad config")
        os._exit(3)  # the host dies while constructing


async def test_a_constructor_that_ran_is_never_placed_again(one_worker: ProcCluster, tmp_path: Path) -> None:
    async with one_worker.connect(log_to_driver=False):
        raised, died = tmp_path / "raised", tmp_path / "died"
        with pytest.raises(actorrt.RemoteError, match="bad config"):
            await asyncio.wait_for(Fails.remote(str(raised), "raise"), 30)
        with pytest.raises(actorrt.ActorDiedError):
            await asyncio.wait_for(Fails.remote(str(died), "exit"), 30)
        assert raised.read_text() == "ran\n" and died.read_text() == "ran\n"
