"""Actor hosts forked from their daemon's fork server (``actorrt.host.forkserver``).

Each forked host is its own process as a new interpreter's would be (session, folder, random
seeds, environment); a fork server that dies takes only its hosts along, and the daemon starts
another; one that cannot start leaves the daemon starting hosts as new interpreters.
"""

from __future__ import annotations

import asyncio
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import actorrt
from tests.conftest import ProcCluster, fork_server_pids, host_pids, wait_until

pytestmark = pytest.mark.timeout(120)


@actorrt.remote_class
class Probe:
    def facts(self) -> dict[str, Any]:
        import numpy

        return {
            "pid": os.getpid(),
            "ppid": os.getppid(),
            "sid": os.getsid(0),
            "cwd": os.getcwd(),
            "comm": Path("/proc/self/comm").read_text().strip(),
            "cmdline": Path("/proc/self/cmdline").read_bytes().replace(b"\0", b" ").decode(),
            "random": random.random(),
            "numpy": float(numpy.random.rand()),
            "token_in_env": "ACTORRT_TOKEN" in os.environ,
            "stdin_is_pipe": Path("/proc/self/fd/0").resolve().name.startswith("pipe:"),
        }


@pytest.fixture
def one_worker(tmp_path: Path) -> Iterator[ProcCluster]:
    c = ProcCluster(tmp_path / "home").start(workers=1, cpus_per_worker=2)
    try:
        yield c
    finally:
        c.stop()


def _servers_of(daemon: int) -> list[int]:
    return [pid for pid, parent in fork_server_pids().items() if parent == daemon]


async def test_forked_hosts_are_each_their_own_process(one_worker: ProcCluster) -> None:
    daemon = one_worker.procs[1].pid
    async with one_worker.connect(log_to_driver=False):
        a, b = await Probe.remote(), await Probe.remote()
        fa, fb = await a.facts(), await b.facts()
        [server] = _servers_of(daemon)
        for f in (fa, fb):
            assert f["ppid"] == server and host_pids()[f["pid"]] == daemon
            assert f["sid"] == f["pid"]  # its own session and process group, as a spawned host's
            assert f["comm"] == "actorrt-host" and "actorrt.host.forkserver" in f["cmdline"]
            assert f"actorrt-worker-{daemon}-" in f["cwd"]
            assert not f["token_in_env"] and f["stdin_is_pipe"]
        assert fa["cwd"] != fb["cwd"]
        assert fa["random"] != fb["random"] and fa["numpy"] != fb["numpy"]  # reseeded after the fork
        await actorrt.kill(a)
        c = await Probe.remote()
        fc = await c.facts()
        assert fc["ppid"] == server and fc["pid"] not in (fa["pid"], fb["pid"])
        await actorrt.kill(b)
        await actorrt.kill(c)


async def test_a_killed_fork_server_takes_its_hosts_along_and_another_starts(one_worker: ProcCluster) -> None:
    daemon = one_worker.procs[1].pid
    async with one_worker.connect(log_to_driver=False):
        a = await Probe.remote()
        host = (await a.facts())["pid"]
        [server] = _servers_of(daemon)
        killed = time.monotonic()
        os.kill(server, signal.SIGKILL)
        with pytest.raises(actorrt.ActorDiedError, match="signal 9"):
            for _ in range(100):  # until the daemon told its owner
                await a.facts()
                await asyncio.sleep(0.05)
        failed_s = time.monotonic() - killed
        assert wait_until(lambda: host not in host_pids(), 5)
        b = await Probe.remote()
        fb = await b.facts()
        print(f"\nfork server SIGKILLed: its actor's call failed after {failed_s:.3f}s; "
              f"a new actor answered after {time.monotonic() - killed:.3f}s")  # fmt: skip
        [new_server] = _servers_of(daemon)
        assert new_server != server and fb["ppid"] == new_server
        assert wait_until(lambda: len([p for p, d in host_pids().items() if d == daemon]) == 2, 10)
        await actorrt.kill(b)


# Preloads that the fork server cannot live with; each is harmless to a host started on its own.
CRASHES_THE_SERVER = """
import os, sys
if sys.argv[0].endswith("/host/forkserver.py"):
    os._exit(3)
"""
STARTS_A_THREAD = """
import threading, time
threading.Thread(target=time.sleep, args=(3600,), name="preloaded-sleeper", daemon=True).start()
"""


@pytest.mark.parametrize(
    ("module", "why"),
    [
        (CRASHES_THE_SERVER, "exit status 3"),
        (STARTS_A_THREAD, "a preloaded module started threads (preloaded-sleeper): forking is not safe"),
    ],
    ids=["crashes-the-server", "starts-a-thread"],
)
async def test_hosts_start_as_new_interpreters_where_the_fork_server_cannot_start(
    tmp_path: Path, module: str, why: str
) -> None:
    cluster = ProcCluster(tmp_path / "home").start(workers=0)
    try:
        (tmp_path / "unforkable.py").write_text(module)
        cluster.env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(tmp_path), cluster.env.get("PYTHONPATH")]))
        worker = cluster.spawn(
            "connect", "--address", cluster.address, "--cpus", "2", "--token", cluster.token, "--preload", "unforkable"
        )
        async with cluster.connect(log_to_driver=False):
            facts = [await a.facts() for a in [await Probe.remote(), await Probe.remote()]]
        for f in facts:
            assert f["ppid"] == worker.pid and "-m actorrt.host.server" in f["cmdline"] and f["comm"] == "actorrt-host"
        assert not _servers_of(worker.pid)
        log_text = (cluster.home / "proc-1.log").read_text()
        said = f"the fork server did not start ({why}); actor hosts start as new processes"
        assert log_text.count(said) == 1, log_text  # tried once, for both hosts waiting for it
    finally:
        cluster.stop()


@actorrt.remote_class
class EnvReader:
    def sizes(self, prefix: str) -> dict[str, int]:
        return {k: len(v) for k, v in os.environ.items() if k.startswith(prefix)}

    def parent(self) -> int:
        return os.getppid()


async def test_a_daemon_with_a_large_environment_forks_its_hosts(tmp_path: Path) -> None:
    """A Kubernetes pod's service variables can make an environment of hundreds of KB: a
    request carrying it in one datagram failed over the socket's ~208 KB send buffer (EMSGSIZE),
    the daemon restarted its fork server, and no actor host ever started. The request's body
    travels in a memfd now."""
    cluster = ProcCluster(tmp_path / "home").start(workers=0)
    try:
        for i in range(3):
            cluster.env[f"BIG_{i}"] = "x" * 100_000
        worker = cluster.spawn("connect", "--address", cluster.address, "--cpus", "1", "--token", cluster.token)
        async with cluster.connect(log_to_driver=False):
            actor = await EnvReader.options(placement_timeout=60).remote()
            assert await actor.sizes("BIG_") == {f"BIG_{i}": 100_000 for i in range(3)}
            [server] = _servers_of(worker.pid)
            assert await actor.parent() == server  # forked, not started as a new interpreter
            await actorrt.kill(actor)
    finally:
        cluster.stop()


async def test_the_fork_server_can_be_turned_off(tmp_path: Path) -> None:
    cluster = ProcCluster(tmp_path / "home").start(workers=0)
    try:
        cluster.env["ACTORRT_FORK_SERVER"] = "0"
        worker = cluster.spawn("connect", "--address", cluster.address, "--cpus", "1", "--token", cluster.token)
        async with cluster.connect(log_to_driver=False):
            f = await (await Probe.remote()).facts()
        assert f["ppid"] == worker.pid and "-m actorrt.host.server" in f["cmdline"]
        assert not _servers_of(worker.pid)
    finally:
        cluster.stop()


@pytest.mark.parametrize("args", [[], ["not-a-number"], ["0", "1"]])
def test_a_fork_server_run_by_hand_says_what_it_is(args: list[str]) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "actorrt.host.forkserver", *args], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 2
    assert "actorrt.host.forkserver is started by a worker daemon" in out.stderr


async def test_a_host_start_cancelled_before_the_answer_leaves_no_host_behind(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A daemon that closes cancels the starts in progress, and the fork server may have forked
    the host already. The cancelled start closes its ends of the host's pipes, so that host
    reads its stdin's EOF and leaves (it used to live on, unknown to anyone)."""
    from actorrt.worker import fork_server_link as _forked

    answer = _forked.ForkServer._answer
    asked = asyncio.Event()

    async def answered_too_late(status: Any) -> tuple[int, int]:
        asked.set()
        await asyncio.sleep(3600)  # the cancellation comes first
        return await answer(status)

    def ours() -> list[int]:
        return [pid for pid, daemon in host_pids().items() if daemon == os.getpid()]

    monkeypatch.setattr(_forked.ForkServer, "_answer", staticmethod(answered_too_late))
    server = _forked.ForkServer(str(tmp_path))
    stats_r, stats_w = os.pipe()
    try:
        env = dict(os.environ, ACTORRT_TOKEN="t")
        start = asyncio.create_task(server.spawn(("--bind", "127.0.0.1"), str(tmp_path), env, stats_w))
        await asyncio.wait_for(asked.wait(), 60)
        deadline = time.monotonic() + 30
        while not ours() and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        forked = ours()
        assert len(forked) == 1, "the fork server did not fork the host"
        await asyncio.sleep(1.0)
        assert ours() == forked, "the host left by itself: this test would prove nothing"
        start.cancel()
        with pytest.raises(asyncio.CancelledError):
            await start
        deadline = time.monotonic() + 20
        while ours() and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        assert not ours(), f"host {forked} outlived its cancelled start"
    finally:
        await server.close()
        os.close(stats_r)
        os.close(stats_w)
