"""Fixtures that start real processes on 127.0.0.1, and the checks that nothing leaks.

- ``cluster``: a master and two worker daemons (one slot each) as real processes, started with
  the real CLI, shared by a module; each test checks afterwards that it left no actor and no
  used slot behind. ``one_worker``: a master and one worker of two slots, for one test.
  ``master_and_worker()``: an in-process master and worker daemon, as an embedded cluster has them.
- ``fresh_home``: an ``ACTORRT_HOME`` of the test's own, so CLI state never touches ``~``.
- Every test checks that it left no actor host process, and no thread, behind.
- ``async def`` tests run on uvloop via ``actorrt.run``.
- ``ACTORRT_VALIDATE=1`` for the whole session: every state object checks its invariants after
  each transition (the master's table, the daemon's pool, the client's state).
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import inspect
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import pytest

import actorrt
from actorrt.master.server import Master
from actorrt.transport import shm as _shm
from actorrt.worker.daemon import WorkerDaemon
from actorrt.worker.fork_server_link import HOST_NAME, SERVER_NAME

T = TypeVar("T")

ASYNC_TEST_TIMEOUT_S = 120

# State objects check their invariants after every transition, in this process and in every
# daemon the tests start: the client's ClientState, the daemon's HostPool, the master's
# ClusterTable (a broken table ends its master with exit status 70).
os.environ.setdefault("ACTORRT_VALIDATE", "1")
# Every process this test session starts inherits this tag, so the leak checks count our actor
# hosts only, never those of another program running on the machine.
SESSION_TAG = f"ACTORRT_TEST_SESSION={os.getpid()}-{time.time_ns()}"
os.environ["ACTORRT_TEST_SESSION"] = SESSION_TAG.split("=", 1)[1]
# Embedded clusters keep actor log files under ACTORRT_HOME (default ~/.actorrt): not in ~. Each
# pytest-xdist worker gets its own (a worker inherits its controller's environment), removed when
# the process exits; one set outside a worker is kept. Actor hosts that import this module (a
# test's class unpickled by reference) keep the one of the pytest process they descend from.
_HOME_FOR = os.environ.get("PYTEST_XDIST_WORKER", "")
if os.environ.get("ACTORRT_TEST_HOME_FOR") != _HOME_FOR and (not os.environ.get("ACTORRT_HOME") or _HOME_FOR):
    os.environ["ACTORRT_HOME"] = tempfile.mkdtemp(prefix="actorrt-test-home-")
    os.environ["ACTORRT_TEST_HOME_FOR"] = _HOME_FOR
    atexit.register(shutil.rmtree, os.environ["ACTORRT_HOME"], ignore_errors=True)


def pytest_configure(config: pytest.Config) -> None:
    """A suite started in the background by a non-interactive shell (``cmd &``, nohup) inherits
    SIGINT ignored, and so would every script it starts: the tests that press Ctrl-C on one (a
    SIGINT to its process group) would see it ignored. Such a pytest process handles SIGINT as
    an interactive one does, so that the scripts it starts get the default disposition."""
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem: pytest.Function) -> bool | None:
    if not inspect.iscoroutinefunction(pyfuncitem.obj):
        return None
    kwargs = {name: pyfuncitem.funcargs[name] for name in pyfuncitem._fixtureinfo.argnames}
    marker = pyfuncitem.get_closest_marker("timeout")
    timeout = float(marker.args[0]) - 5 if marker and marker.args else ASYNC_TEST_TIMEOUT_S
    actorrt.run(asyncio.wait_for(pyfuncitem.obj(**kwargs), timeout))
    return True


# The files that take longest (seconds of the suite on a 2-core AMD EPYC, idle: docs/development.md
# has the table), longest first. ./dev.sh test's two pytest-xdist workers take whole files in
# collection order (--dist loadfile --no-loadscope-reorder): starting these first keeps one worker
# from ending on a long file alone.
LONG_FILES_FIRST = (
    "tests/rl/test_rl_examples.py",  # 117 s
    "tests/rl/test_rl_compile.py",  # 95 s
    "tests/cluster/test_faults.py",  # 60 s
    "tests/rl/test_rl_learners.py",  # 49 s
    "tests/rl/test_rl_solves.py",  # 42 s
    "tests/client/test_topologies.py",  # 42 s
    "tests/rl/test_rl_learners_off_policy.py",  # 41 s
    "tests/test_bench_smoke.py",  # 38 s
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return  # one process: the files' own order
    rank = {path: i for i, path in enumerate(LONG_FILES_FIRST)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::", 1)[0], len(rank)))  # stable


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _session_processes() -> dict[int, tuple[str, int]]:
    """Live actor hosts and fork servers that this test session started: pid -> (name, parent)."""
    procs = {}
    tag = SESSION_TAG.encode()
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            name, rest = (proc / "stat").read_text()[:-1].split("(", 1)[1].rsplit(")", 1)
            if name not in (HOST_NAME, SERVER_NAME) or tag not in (proc / "environ").read_bytes().split(b"\0"):
                continue
        except (OSError, ValueError):
            continue
        state, ppid = rest.split()[:2]
        if state != "Z":
            procs[int(proc.name)] = (name, int(ppid))
    return procs


def host_pids() -> dict[int, int]:
    """Live actor host processes that this test session started: pid -> the worker daemon that
    owns it (its parent, or the parent of the fork server that forked it)."""
    procs = _session_processes()
    return {pid: procs[ppid][1] if ppid in procs else ppid for pid, (name, ppid) in procs.items() if name == HOST_NAME}


def fork_server_pids() -> dict[int, int]:
    """Live fork servers (``actorrt.host.forkserver``) that this test session's daemons started: pid
    -> its daemon."""
    return {pid: ppid for pid, (name, ppid) in _session_processes().items() if name == SERVER_NAME}


_live_daemons: set[int] = set()  # PIDs of fixture daemons whose warm hosts are not leaks


@contextlib.contextmanager
def shared_embedded_cluster(**kwargs: Any) -> Iterator[actorrt.Cluster]:
    """A blocking embedded cluster shared by several tests: its warm hosts are not leaks."""
    with actorrt.connect(**kwargs) as c:
        _live_daemons.add(os.getpid())
        try:
            yield c
        finally:
            _live_daemons.discard(os.getpid())


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def shm_files_left(since: set[str]) -> list[str]:
    """actorrt's /dev/shm files made since ``since`` by this process, its actor hosts, or processes
    now dead. A live process of anything else (another pytest-xdist worker's cluster, another
    program) may have files in flight: those are not ours to count."""
    out, hosts = [], host_pids()
    for name in os.listdir(_shm.SHM_DIR):
        if not name.startswith(_shm.PREFIX) or name in since:
            continue
        pid = int(name.split("-")[1])
        if pid == os.getpid() or not _alive(pid) or pid in hosts:
            out.append(name)
    return out


def leaked_hosts(before: dict[int, int]) -> set[int]:
    """Actor hosts and fork servers that were not there at ``before`` and whose daemon is not
    a live shared cluster's."""
    now = {**host_pids(), **fork_server_pids()}
    return {pid for pid, daemon in now.items() if pid not in before and daemon not in _live_daemons}


def wait_until(predicate: Any, timeout: float = 10.0, interval: float = 0.05) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return bool(predicate())


def actorrt_cli(*args: str, env: dict[str, str] | None = None, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "actorrt", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
    )


@dataclass
class ProcCluster:
    """A master and worker daemons, each a real process, stopped by PID."""

    home: Path
    address: str = ""
    token: str = ""
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    status_args: tuple[str, ...] = ()

    def spawn(self, *args: str) -> subprocess.Popen[bytes]:
        log = open(self.home / f"proc-{len(self.procs)}.log", "wb")
        proc = subprocess.Popen(
            [sys.executable, "-m", "actorrt", *args, "--block"],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=self.env,
        )
        self.procs.append(proc)
        _live_daemons.add(proc.pid)
        records = self.home / "processes"
        if not wait_until(lambda: any(records.glob(f"{proc.pid}@*.json")) or proc.poll() is not None, 30):
            raise RuntimeError(f"{args} did not become ready")
        if proc.poll() is not None:
            raise RuntimeError(f"{args} exited: {(self.home / f'proc-{len(self.procs) - 1}.log').read_text()}")
        return proc

    def start(
        self,
        workers: int = 2,
        cpus_per_worker: int = 1,
        master_args: tuple[str, ...] = (),
        worker_args: tuple[str, ...] = (),
        status_args: tuple[str, ...] = (),
    ) -> ProcCluster:
        self.status_args = status_args
        self.home.mkdir(parents=True, exist_ok=True)
        self.env = dict(os.environ, ACTORRT_HOME=str(self.home))
        self.env.pop("ACTORRT_TOKEN", None)
        self.env.pop("ACTORRT_ADDRESS", None)
        port = free_port()
        try:
            self.spawn(
                "start",
                "--port",
                str(port),
                "--cpus",
                "0",
                "--worker-timeout",
                "3",
                "--client-grace",
                "2",
                *self._master_extra(),
                *master_args,
            )
            self.address = f"127.0.0.1:{port}"
            self.token = (self.home / "token").read_text().strip()
            for _ in range(workers):
                self.spawn(
                    "connect",
                    "--address",
                    self.address,
                    "--cpus",
                    str(cpus_per_worker),
                    "--token",
                    self.token,
                    *self._worker_extra(),
                    *worker_args,
                )
        except BaseException:  # a worker that did not start: what did start is stopped here
            self.stop()
            raise
        return self

    def _master_extra(self) -> tuple[str, ...]:
        """Arguments a subclass adds to the master's command line."""
        return ()

    def _worker_extra(self) -> tuple[str, ...]:
        """Arguments a subclass adds to each worker's command line (called once per worker)."""
        return ()

    def status(self) -> dict[str, Any]:
        out = actorrt_cli("status", "--address", self.address, "--json", "--token", self.token, *self.status_args)
        assert out.returncode == 0, out.stderr
        return json.loads(out.stdout)

    def stop(self) -> None:
        for proc in self.procs:
            _live_daemons.discard(proc.pid)
        for proc in reversed(self.procs):
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in self.procs:
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()

    def connect(self, **kwargs: Any) -> actorrt.Cluster:
        return actorrt.connect(self.address, token=self.token, **kwargs)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ProcCluster]:
    c = ProcCluster(tmp_path_factory.mktemp("actorrt-home")).start()
    try:
        yield c
    finally:
        c.stop()


@pytest.fixture
def one_worker(tmp_path: Path) -> Iterator[ProcCluster]:
    """A master and one worker daemon of two slots, real processes, for one test."""
    c = ProcCluster(tmp_path / "home").start(workers=1, cpus_per_worker=2)
    yield c
    c.stop()


@pytest.fixture(autouse=True)
def _no_slot_leak(request: pytest.FixtureRequest) -> Iterator[None]:
    yield
    if "cluster" not in request.fixturenames:
        return
    c: ProcCluster = request.getfixturevalue("cluster")
    if any(p.poll() is not None for p in c.procs):
        return  # a test that kills cluster processes checks its own leaks

    def clean() -> bool:
        s = c.status()
        return not s["actors"] and s["slots"]["used"] == 0 and all(n["slots_ready"] == n["cpus"] for n in s["nodes"])

    assert wait_until(clean, 10), f"test leaked an actor or slot: {c.status()}"


@pytest.fixture(autouse=True)
def _no_process_or_thread_leak() -> Iterator[None]:
    hosts_before = {**host_pids(), **fork_server_pids()}
    threads_before = set(threading.enumerate())
    yield
    assert wait_until(lambda: not leaked_hosts(hosts_before), 10), f"leaked actor hosts: {leaked_hosts(hosts_before)}"
    # gRPC's own completion-queue poller ("_poll_wrapper") lives per process and loop, not per test.
    leaked = [
        t for t in threading.enumerate() if t not in threads_before and t.is_alive() and "_poll_wrapper" not in t.name
    ]
    assert wait_until(lambda: not [t for t in leaked if t.is_alive()], 5), f"test leaked threads: {leaked}"


@pytest.fixture
def fresh_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "home"
    monkeypatch.setenv("ACTORRT_HOME", str(home))
    monkeypatch.delenv("ACTORRT_TOKEN", raising=False)
    monkeypatch.delenv("ACTORRT_ADDRESS", raising=False)
    return home


def run_driver(cluster: ProcCluster, script: str, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """Run ``script`` as a separate driver process of ``cluster`` (argv: address, token, ``args``)."""
    env = dict(cluster.env, PYTHONPATH=os.getcwd())
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script), cluster.address, cluster.token, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        cwd="/",  # tests/ is not importable there: the class is not either
    )


DETACHED_CREATOR = """
import sys, actorrt

@actorrt.remote_class
class Keeper:
    def __init__(self):
        self.items = []
    def add(self, k):
        self.items.append(k)
        return sum(self.items)

with actorrt.connect(sys.argv[1], token=sys.argv[2]) as c:
    restarts = int(sys.argv[5]) if len(sys.argv) > 5 else 0
    h = Keeper.options(name=sys.argv[3], lifetime="detached", max_restarts=restarts).remote().result()
    print("value", h.add(int(sys.argv[4])).result(), flush=True)
"""
"""A driver that creates a detached ``Keeper`` named argv[3], adds argv[4] and exits (argv[5]:
its ``max_restarts``)."""


async def after_restart(call: Callable[[], Awaitable[T]], timeout: float = 20.0) -> T:
    """``call()``'s result once a restarted actor answers it: a call sent before its caller heard
    of the restart fails ("... restarting it ..."), and is made again."""
    async with asyncio.timeout(timeout):
        while True:
            try:
                return await call()
            except actorrt.ActorDiedError as e:
                if "restarting it" not in str(e):
                    raise
                await asyncio.sleep(0.1)


@actorrt.remote_class
class Talker:
    """Says what it is told, on its output too (which the client's session forwards)."""

    def say(self, text: str) -> str:
        print(text, flush=True)
        return text


@actorrt.remote_class
class Echo:
    def echo(self, x: int) -> int:
        return x

    def pid(self) -> int:
        return os.getpid()


@contextlib.asynccontextmanager
async def master_and_worker(
    *, worker_timeout_s: float = 10.0, reconnect: bool = False
) -> AsyncIterator[tuple[Master, WorkerDaemon]]:
    """An in-process master (token "t") and a 2-slot worker daemon, closed at the end."""
    master = await Master("127.0.0.1", 0, token="t", worker_timeout_s=worker_timeout_s).start()
    daemon = WorkerDaemon(master.address, token="t", cpus=2, reconnect=reconnect, wait_ready=True, echo_output=False)
    try:
        await daemon.start()
        yield master, daemon
    finally:
        await daemon.close()
        await master.close()
