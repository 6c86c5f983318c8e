"""The worker daemon's actor host processes, real ones: their folders (removed by the next daemon
when one was killed, never another live daemon's), their children (ended with the daemon), a pid 1
daemon reaping orphans, hosts that print before their ready line or start slowly.

Every test starts its own master and worker daemons (real CLI processes on 127.0.0.1) and stops
them by PID; the leak checks of ``conftest`` apply."""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

import actorrt
from tests.conftest import Echo, ProcCluster, host_pids, wait_until
from tests.worker.conftest import gone

pytestmark = pytest.mark.timeout(120)


@actorrt.remote_class
class FileReader:
    def read(self, path: str) -> str:
        with open(path) as f:
            return f.read()

    def pid(self) -> int:
        return os.getpid()


async def test_a_killed_daemons_slot_folders_are_removed_by_the_next_daemon(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "secret.txt").write_text("shipped")
    monkeypatch.chdir(tmp_path)
    # The daemons' folders in a temp dir of this test's own: a daemon that another test starts
    # meanwhile (the other pytest worker's) would remove the killed one's folders from /tmp too.
    (tmp_path / "tmp").mkdir()
    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))
    cluster = ProcCluster(tmp_path / "home").start(workers=1, cpus_per_worker=2)
    try:
        daemon = cluster.procs[1]
        async with cluster.connect(log_to_driver=False, files=["data/*.txt"]):
            a = await FileReader.remote()
            assert await a.read("data/secret.txt") == "shipped"
            host = await a.pid()
            hosts = {pid for pid, ppid in host_pids().items() if ppid == daemon.pid}
            folders = {Path(os.readlink(f"/proc/{pid}/cwd")) for pid in hosts}
            assert len(folders) == 2 and all(f.is_dir() and tmp_path / "tmp" in f.parents for f in folders)
            assert (Path(os.readlink(f"/proc/{host}/cwd")) / "data" / "secret.txt").exists()
            daemon.kill()
            daemon.wait()
            assert wait_until(lambda: not hosts & set(host_pids()), 10)
            assert all(f.is_dir() for f in folders)  # nobody cleaned up after the SIGKILL...
            t0 = time.monotonic()
            await asyncio.to_thread(
                cluster.spawn, "connect", "--address", cluster.address, "--cpus", "1", "--token", cluster.token
            )
            assert wait_until(lambda: not any(f.exists() for f in folders), 10), folders  # ...until now
            print(f"\nkilled daemon's slot folders removed {time.monotonic() - t0:.3f}s after a new daemon started")
            newcomer = {pid for pid, ppid in host_pids().items() if ppid == cluster.procs[-1].pid}
            assert newcomer and all(Path(os.readlink(f"/proc/{pid}/cwd")).is_dir() for pid in newcomer)
            with pytest.raises(actorrt.ActorDiedError):
                await asyncio.wait_for(a.read("data/secret.txt"), 10)
    finally:
        cluster.stop()


SLOW_PRELOAD = """
import fcntl, os, time
_lock = open(os.environ["SLOW_PRELOAD_LOCK"], "a")
try:
    fcntl.flock(_lock, fcntl.LOCK_EX | fcntl.LOCK_NB)  # the first host to get here starts at once
except OSError:
    time.sleep(60)  # the others take longer than the worker's start timeout
"""


def test_a_worker_whose_hosts_start_slowly_serves_with_those_that_started(tmp_path: Path) -> None:
    cluster = ProcCluster(tmp_path / "home").start(workers=0)
    try:
        (tmp_path / "slow_preload.py").write_text(SLOW_PRELOAD)
        cluster.env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(tmp_path), cluster.env.get("PYTHONPATH")]))
        cluster.env["SLOW_PRELOAD_LOCK"] = str(tmp_path / "lock")
        # Hosts started each as a new interpreter, each importing the preload: a fork server
        # would import it once, and its hosts would all start at once.
        cluster.env["ACTORRT_FORK_SERVER"] = "0"
        timeout_s = 2
        worker = cluster.spawn(
            "connect",
            "--address",
            cluster.address,
            "--cpus",
            "2",
            "--token",
            cluster.token,
            "--timeout",
            str(timeout_s),
            "--preload",
            "slow_preload",
        )
        log_text = (cluster.home / "proc-1.log").read_text()
        assert worker.poll() is None, log_text
        assert "1 of 2 actor hosts did not start in time; serving with the others meanwhile" in log_text
        with cluster.connect(log_to_driver=False):
            a = Echo.remote().result(30)
            assert a.echo(7).result(10) == 7
            actorrt.kill(a).result(15)
    finally:
        cluster.stop()


@actorrt.remote_class
class Spawner:
    def start_sleeper(self) -> int:
        """A child process of the actor's (as a multiprocessing pool or a Popen would be)."""
        return subprocess.Popen(["sleep", "300"]).pid


@pytest.mark.parametrize("how", ["SIGTERM", "SIGKILL"])
async def test_the_children_of_actors_end_with_their_daemon(tmp_path: Path, how: str) -> None:
    """A daemon stopping (SIGTERM: ``actorrt stop``, a refusal, a closing embedded cluster)
    cancelled the tasks that would have ended each actor's process group; one SIGKILLed left
    its hosts to exit alone. Either way what the actors had started ran on, orphaned (code
    sent under a token the master may have revoked)."""
    cluster = ProcCluster(tmp_path / "home").start(workers=1, cpus_per_worker=1)
    children: list[int] = []
    try:
        daemon = cluster.procs[1]
        async with cluster.connect(log_to_driver=False):
            s = await Spawner.remote()
            children.append(await s.start_sleeper())
            assert not gone(children[0])
            daemon.send_signal(getattr(signal, how))
            await asyncio.to_thread(daemon.wait, 20)
            assert wait_until(lambda: gone(children[0]), 10), f"the actor's child {children[0]} outlived its daemon"
    except actorrt.ActorRTError:
        pass  # closing the client after its actor's node went may complain
    finally:
        for pid in children:
            if not gone(pid):
                os.kill(pid, signal.SIGKILL)
        cluster.stop()


async def test_hosts_that_print_before_their_ready_line_still_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Hosts started as new interpreters (ACTORRT_FORK_SERVER=0, or after the fork server
    failed) whose preloaded module printed on import (a banner) failed to start: the banner was
    read as their ready line, and every slot retried every 5 s, forever."""
    banner = "print('Hello from the noisy banner')\nprint('second line')\nprint('=' * 100_000)  # a progress bar\n"
    (tmp_path / "noisy_banner.py").write_text(banner)
    monkeypatch.setenv("ACTORRT_FORK_SERVER", "0")
    monkeypatch.setenv("PYTHONPATH", f"{tmp_path}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    cluster = ProcCluster(tmp_path / "home").start(
        workers=1, cpus_per_worker=1, worker_args=("--preload", "noisy_banner")
    )
    try:
        async with cluster.connect(log_to_driver=False, placement_timeout=30) as c:
            e = await Echo.remote()
            assert await e.echo(5) == 5
            await c.kill(e)
        log_text = (cluster.home / "proc-1.log").read_text()
        assert "printed before it was ready: Hello from the noisy banner" in log_text, log_text[-2000:]
        assert "printed a line over 64 KiB before it was ready" in log_text
    finally:
        cluster.stop()


@actorrt.remote_class
class Orphaner:
    def orphan(self, n: int) -> list[int]:
        """``n`` processes whose parent ends at once (each is re-parented to the PID namespace's
        init) and that end 3 s later; their pids as the namespace sees them."""
        out = [
            subprocess.run(["sh", "-c", "sleep 3 >/dev/null 2>&1 & echo $!"], check=True, capture_output=True)
            for _ in range(n)
        ]
        return [int(p.stdout) for p in out]

    def parents(self, pids: list[int]) -> list[int]:
        return [int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1]) for pid in pids]

    def gone(self, pids: list[int]) -> bool:
        """Whether none of ``pids`` exists any more, not even as a zombie (it was reaped)."""
        return not any(Path(f"/proc/{pid}").exists() for pid in pids)


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("unshare"), reason="needs root and unshare(1)")
def test_a_daemon_that_is_pid_1_reaps_the_orphans_of_its_actors(tmp_path: Path) -> None:
    """A worker daemon that is a container's entry point (our Dockerfile's, in a Kubernetes pod)
    is PID 1: what an actor started and left (a simulator launched through a shell) is
    re-parented to it, and stayed a zombie once it ended, one more per launch. Here the daemon
    runs as PID 1 of a PID namespace of its own."""
    cluster = ProcCluster(tmp_path / "home").start(workers=0)
    # Its own home: inside its namespace the daemon's pid, which it records, is 1.
    env = dict(cluster.env, ACTORRT_HOME=str(tmp_path / "ns-home"))
    argv = ["unshare", "--pid", "--fork", "--mount-proc", "--kill-child", sys.executable, "-m", "actorrt"]
    argv += ["connect", "--address", cluster.address, "--token", cluster.token, "--cpus", "1", "--block"]
    with open(tmp_path / "ns-worker.log", "wb") as out:
        unshare = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, env=env)
    daemon = 0
    try:
        assert wait_until(lambda: bool(_children(unshare.pid)), 10)
        daemon = _children(unshare.pid)[0]
        with cluster.connect(log_to_driver=False, placement_timeout=60):
            a = Orphaner.remote().result(60)
            orphans = a.orphan(5).result(30)
            assert a.parents(orphans).result(10) == [1] * 5  # re-parented to the daemon
            assert wait_until(lambda: a.gone(orphans).result(10), 10), a.parents(orphans).result(10)
            actorrt.kill(a).result(15)
        assert "running as PID 1" in (tmp_path / "ns-worker.log").read_text()
    finally:
        if daemon:
            os.kill(daemon, signal.SIGTERM)
        try:
            unshare.wait(15)
        except subprocess.TimeoutExpired:
            unshare.kill()  # --kill-child: the daemon goes too
            unshare.wait()
        cluster.stop()


def _children(pid: int) -> list[int]:
    try:
        return [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def test_a_daemon_removes_only_the_folders_of_dead_daemons_of_its_own_pid_namespace(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A daemon in a pid namespace of its own (a container sharing the temp dir; the PID-1 test
    above in CI) saw the other daemons' pids as dead and removed their hosts' folders: every
    host of theirs then failed to start. Owner files now name their pid namespace."""
    from actorrt.worker import procs as _host_procs

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    mine = Path(_host_procs.make_workdirs())
    assert len(mine.joinpath("owner").read_text().split()) == 3
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    here = os.readlink("/proc/self/ns/pid")
    folders = {}
    for name, owner in {
        "dead-here": f"{dead.pid} 123 {here}",
        "dead-before-namespaces-were-named": f"{dead.pid} 123",
        "elsewhere": f"{dead.pid} 123 pid:[1]",
    }.items():
        folders[name] = tmp_path / f"actorrt-worker-{name}"
        folders[name].mkdir()
        (folders[name] / "owner").write_text(owner + "\n")
    removed = _host_procs.remove_dead_workdirs()
    assert sorted(Path(p).name for p in removed) == [
        "actorrt-worker-dead-before-namespaces-were-named",
        "actorrt-worker-dead-here",
    ]
    assert folders["elsewhere"].exists() and mine.exists()
