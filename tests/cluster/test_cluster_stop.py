"""A deliberate stop of the head ends the whole cluster; a crash does not.

The head (a master with no local worker) and each worker are real CLI processes with homes of
their own, as on separate machines: `actorrt stop` on the head signals the master alone, and
the master tells its workers. Where a worker must miss that word, it lives in a network
namespace whose link is cut (tests/nethosts.py).
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import actorrt
from tests.conftest import ProcCluster, actorrt_cli, host_pids, wait_until
from tests.nethosts import NetHosts, can_create_namespaces

pytestmark = pytest.mark.timeout(150)

EXIT_CLUSTER_STOPPED = 3
WORKER_ENDS_WITHIN_S = 10.0  # from `actorrt stop` on the head to the remote worker's exit


@actorrt.remote_class
class Pid:
    def pid(self) -> int:
        return os.getpid()


class Head:
    """A master (no local worker) and workers that join it from homes of their own."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.master = ProcCluster(root / "head")  # the head: a master alone, and its home
        self.workers: list[ProcCluster] = []

    def start(self, *master_args: str) -> Head:
        self.master.start(workers=0, master_args=master_args)
        return self

    def join(self) -> subprocess.Popen[bytes]:
        """A worker daemon of one slot, from a home of its own (`actorrt stop` on the head does
        not know it)."""
        worker = ProcCluster(self.root / f"worker{len(self.workers)}")
        self.workers.append(worker)
        worker.home.mkdir(parents=True)
        worker.env = dict(os.environ, ACTORRT_HOME=str(worker.home))
        return worker.spawn("connect", "--address", self.master.address, "--cpus", "1", "--token", self.master.token)

    def stop_head(self) -> subprocess.CompletedProcess[str]:
        """`actorrt stop` on the head's machine."""
        return actorrt_cli("stop", "--timeout", "20", env=self.master.env)

    def start_master_again(self) -> None:
        """A new master from the head's home, on its address and token."""
        port = self.master.address.rsplit(":", 1)[1]
        self.master.spawn("start", "--port", port, "--cpus", "0", "--token", self.master.token, "--worker-timeout", "3")

    def worker_log(self, i: int = 0) -> str:
        return (self.workers[i].home / "proc-0.log").read_text(errors="replace")

    def close(self) -> None:
        for worker in self.workers:
            worker.stop()
        self.master.stop()


@pytest.fixture
def head(tmp_path: Path) -> Iterator[Head]:
    c = Head(tmp_path)
    try:
        yield c
    finally:
        c.close()


async def test_actorrt_stop_on_the_head_ends_its_remote_workers_and_their_actors(head: Head) -> None:
    """`actorrt stop` on the head ended the master, but a worker daemon started on another
    machine kept trying to reach it for ever (still running 20 s later), with its actors. The
    stop now ends the cluster, as xparl's does: the master tells every worker, which stops its
    actors and exits with status 3, saying why; the clients hear that their actors died."""
    head.start()
    worker = head.join()
    async with head.master.connect(log_to_driver=False) as c:
        actor = await Pid.remote()
        pid = await actor.pid()
        assert pid in host_pids()
        t0 = time.monotonic()
        stopped = await asyncio.to_thread(head.stop_head)
        assert stopped.returncode == 0 and "stopped master" in stopped.stdout, stopped.stderr
        code = await asyncio.to_thread(worker.wait, WORKER_ENDS_WITHIN_S)
        ended_s = time.monotonic() - t0
        print(f"\nactorrt stop on the head: the remote worker exited {ended_s:.2f}s later")
        assert code == EXIT_CLUSTER_STOPPED, head.worker_log()
        assert wait_until(lambda: pid not in host_pids(), 5)  # its actor ended with it
        assert not [p for p, daemon in host_pids().items() if daemon == worker.pid]
        log = head.worker_log()
        assert "stopped the cluster on purpose (SIGTERM to the master (pid" in log, log
        with pytest.raises(actorrt.ActorDiedError):
            await actor.pid()
        # The master told the client why (its host's stream may have broken first, under load).
        deadline = time.monotonic() + 10
        while "the cluster was stopped: SIGTERM to the master" not in (c.state.cause(actor.actor_id) or ""):
            assert time.monotonic() < deadline, c.state.cause(actor.actor_id)
            await asyncio.sleep(0.05)
        c.holders.actors.clear()  # nothing to release: the cluster is gone


@pytest.mark.parametrize("how", ["SIGKILL", "keep-workers"])
async def test_a_master_that_crashes_or_keeps_its_workers_leaves_them_to_the_next_one(head: Head, how: str) -> None:
    """A master that crashes (SIGKILL), or one started with --keep-workers and then stopped (a
    master restarted under its workers: a Kubernetes rollout), says nothing: the worker keeps
    its actor and registers with the next master on that address, as before."""
    head.start(*(["--keep-workers"] if how == "keep-workers" else []))
    worker = head.join()
    async with head.master.connect(log_to_driver=False) as c:
        actor = await Pid.remote()
        pid = await actor.pid()
        if how == "SIGKILL":
            master = head.master.procs[0]
            master.kill()
            master.wait()
        else:
            stopped = await asyncio.to_thread(head.stop_head)
            assert stopped.returncode == 0 and "stopped master" in stopped.stdout, stopped.stderr
        await asyncio.sleep(5.0)  # what a deliberate stop would have ended by now
        assert worker.poll() is None, head.worker_log()
        assert await actor.pid() == pid  # the data plane does not pass through the master
        head.start_master_again()

        async def back() -> bool:
            try:
                status = await c.status()
            except actorrt.ClusterConnectionError:
                return False
            return len(status.nodes) == 1 and [a["actor_id"] for a in status.actors] == [actor.actor_id]

        deadline = time.monotonic() + 20
        while not await back():
            assert time.monotonic() < deadline, "the worker never registered with the new master"
            await asyncio.sleep(0.1)
        assert "stopped the cluster on purpose" not in head.worker_log()
        await actorrt.kill(actor)


TOKEN = "cluster-stop-test-token"


def _wait_record(home: Path, proc: subprocess.Popen[bytes], timeout: float = 60) -> None:
    if not wait_until(lambda: any((home / "processes").glob(f"{proc.pid}@*.json")) or proc.poll() is not None, timeout):
        raise AssertionError(f"pid {proc.pid} did not become ready")
    assert proc.poll() is None, (home / "daemon.log").read_text(errors="replace")


@pytest.mark.skipif(bool(can_create_namespaces()), reason=f"no network namespaces: {can_create_namespaces()}")
@pytest.mark.parametrize("cut", ["as-it-stops", "past-the-worker-timeout"])
def test_a_worker_cut_off_during_the_stop_is_told_by_the_next_master(tmp_path: Path, cut: str) -> None:
    """A worker cut off from the head as it was stopped misses the word and tries to register
    again for as long as it runs (from its side a master stopped on purpose and one that crashed
    and has not come back look the same). The stopped master notes it in its home, whether it
    still listed the worker or had dropped it for its silence (cut off past the worker
    timeout); the next master started from that home tells it, when the link heals, that its
    cluster was stopped on purpose, instead of taking its actors back: it stops them and exits
    with status 3."""
    head_home, worker_home = tmp_path / "head", tmp_path / "worker"
    for home in (head_home, worker_home):
        home.mkdir()
    with NetHosts(["head", "w1"]) as net:
        address = f"{net.ip('head')}:8010"

        def daemon(host: str, home: Path, *args: str) -> subprocess.Popen[bytes]:
            env = dict(os.environ, ACTORRT_HOME=str(home), ACTORRT_TOKEN=TOKEN)
            with open(home / "daemon.log", "ab") as log:
                proc = net.popen(
                    host,
                    [sys.executable, "-m", "actorrt", *args, "--block"],
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    env=env,
                )
            _wait_record(home, proc)
            return proc

        head_args = ("start", "--host", net.ip("head"), "--port", "8010", "--cpus", "0", "--worker-timeout", "3")
        daemon("head", head_home, *head_args)
        worker = daemon("w1", worker_home, "connect", "--address", address, "--cpus", "1")
        hosts = [pid for pid, owner in host_pids().items() if owner == worker.pid]
        assert hosts  # its warm actor host

        net.cut("w1")
        if cut == "past-the-worker-timeout":  # the master drops it before it is stopped
            assert wait_until(lambda: "no heartbeat for 3s" in (head_home / "daemon.log").read_text(), 15)
        stopped = actorrt_cli("stop", "--timeout", "20", env=dict(os.environ, ACTORRT_HOME=str(head_home)))
        assert stopped.returncode == 0 and "stopped master" in stopped.stdout, stopped.stderr
        [unreached] = json.loads((head_home / "unreached.json").read_text())
        assert unreached["pid"] == worker.pid and "SIGTERM to the master" in unreached["reason"]
        time.sleep(3.0)
        assert worker.poll() is None  # it heard nothing, and keeps trying

        daemon("head", head_home, *head_args)  # the next master from that home
        net.heal("w1")
        code = worker.wait(30)
        log = (worker_home / "daemon.log").read_text(errors="replace")
        assert code == EXIT_CLUSTER_STOPPED, log
        assert "was stopped on purpose at" in log and "while this worker was out of reach" in log, log
        assert wait_until(lambda: not any(p in host_pids() for p in hosts), 10)
        master_log = (head_home / "daemon.log").read_text(errors="replace")
        assert "registers after its cluster was stopped: telling it so" in master_log, master_log
        status = net.run(
            "head",
            [sys.executable, "-m", "actorrt", "status", "--json", "--address", address, "--token", TOKEN],
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert status.returncode == 0 and json.loads(status.stdout)["nodes"] == [], status.stderr
