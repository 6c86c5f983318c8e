"""Hardening of the CLI and the daemons it starts, each against real processes on 127.0.0.1:
one channel factory with TLS for every client command, no token on any command line, rotated
daemon logs, ``stop`` that checks a process's identity, bounded resource counts, and a private
state directory."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest

import actorrt
from actorrt.common import home
from actorrt.transport import rpc as _rpc
from actorrt.v1 import master_pb2, master_pb2_grpc
from tests.conftest import ProcCluster, actorrt_cli, free_port, wait_until
from tests.transport.test_security import pki  # noqa: F401 - the fixture: a CA and certificates for 127.0.0.1


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()[0] != "Z"
    except OSError:
        return False


def _record_pids(home: Path) -> list[int]:
    return [int(p.stem.split("@")[0]) for p in (home / "processes").glob("*.json")]


def _children(parents: set[int]) -> list[int]:
    """Live processes whose parent is one of ``parents``."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            fields = (proc / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[0] != "Z" and int(fields[1]) in parents:
            found.append(int(proc.name))
    return found


def _one_line(out: subprocess.CompletedProcess[str]) -> bool:
    return out.returncode == 1 and out.stderr.strip().count("\n") == 0 and "Traceback" not in out.stderr


@pytest.fixture
def stop_by_pid(fresh_home: Path) -> Iterator[list[int]]:
    """After the test: ``actorrt stop``, then SIGKILL whatever recorded or listed PID still runs."""
    extra: list[int] = []
    yield extra
    pids = set(_record_pids(fresh_home)) if (fresh_home / "processes").is_dir() else set()
    actorrt_cli("stop", "--timeout", "5")
    for pid in [*pids, *extra]:
        if _alive(pid):
            os.kill(pid, signal.SIGKILL)


# ---- 3: actorrt logs honours TLS, through the one channel factory ------------------------------


class _RecordingProxy:
    """A TCP forwarder on 127.0.0.1 that keeps every byte the client sent."""

    def __init__(self, target: str) -> None:
        host, port = target.rsplit(":", 1)
        self.target = (host, int(port))
        self.sent = bytearray()
        self._sockets: list[socket.socket] = []
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.address = f"127.0.0.1:{self.listener.getsockname()[1]}"
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._accept, daemon=True)]
        self._threads[0].start()

    def _accept(self) -> None:
        self.listener.settimeout(0.1)
        while not self._stop.is_set():
            try:
                client, _ = self.listener.accept()
            except OSError:
                continue
            server = socket.create_connection(self.target)
            self._sockets += [client, server]
            for src, dst, record in ((client, server, True), (server, client, False)):
                t = threading.Thread(target=self._pipe, args=(src, dst, record), daemon=True)
                self._threads.append(t)
                t.start()

    def _pipe(self, src: socket.socket, dst: socket.socket, record: bool) -> None:
        src.settimeout(0.1)
        try:
            while not self._stop.is_set():
                try:
                    data = src.recv(65536)
                except TimeoutError:
                    continue
                if not data:
                    break
                if record:
                    self.sent.extend(data)
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def close(self) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(5)
        for s in [*self._sockets, self.listener]:
            s.close()


@actorrt.remote_class
class Talker:
    def say(self, text: str) -> None:
        print(text, flush=True)


async def test_logs_speaks_tls_from_flags_and_env_and_never_sends_the_token_in_plaintext(
    tmp_path: Path,
    pki: dict[str, str],  # noqa: F811 - the imported fixture
) -> None:
    node = ("--tls-cert", pki["node"], "--tls-key", pki["node_key"])
    c = ProcCluster(tmp_path / "home").start(
        workers=1, cpus_per_worker=1, master_args=node, worker_args=node, status_args=("--tls-ca", pki["ca"])
    )
    proxy = _RecordingProxy(c.address)
    try:
        async with actorrt.connect(c.address, token=c.token, tls_ca=pki["ca"], log_to_driver=False):
            talker = await Talker.remote()
            await talker.say("hello over tls")
            args = ("logs", talker.actor_id, "--address", proxy.address, "--token", c.token, "--timeout", "10")

            def logs_with_flag() -> bool:
                got = actorrt_cli(*args, "--tls-ca", pki["ca"])
                return got.returncode == 0 and got.stdout == "hello over tls\n"

            assert await asyncio.to_thread(wait_until, logs_with_flag, 20)
            env = dict(os.environ, ACTORRT_TLS_CA=pki["ca"])
            got = await asyncio.to_thread(actorrt_cli, *args, env=env)
            assert got.returncode == 0 and got.stdout == "hello over tls\n", got.stderr
            assert proxy.sent and c.token.encode() not in proxy.sent  # inside TLS only

            proxy.sent.clear()
            plain = await asyncio.to_thread(actorrt_cli, *args[:-1], "5")
            assert _one_line(plain), plain.stderr
            assert "no actorrt master answers" in plain.stderr and "--tls-ca" in plain.stderr
            # The plaintext attempt ended at the handshake: the HTTP/2 preface went out, the
            # request with its token never did.
            assert bytes(proxy.sent).startswith(b"PRI * HTTP/2.0")
            assert c.token.encode() not in proxy.sent
            await actorrt.kill(talker)
        assert len(c.status()["nodes"]) == 1  # the cluster serves on
    finally:
        proxy.close()
        c.stop()


# ---- 4: the token is on no command line ----------------------------------------------------------


def test_start_and_connect_keep_the_token_off_every_command_line(fresh_home: Path, stop_by_pid: list[int]) -> None:
    token = "cmdline-secret-" + os.urandom(8).hex()
    port = free_port()
    started = actorrt_cli("start", "--port", str(port), "--cpus", "1", "--token", token)
    assert started.returncode == 0, started.stderr
    joined = actorrt_cli("connect", "--address", f"127.0.0.1:{port}", "--cpus", "1", f"--token={token}")
    assert joined.returncode == 0, joined.stderr

    daemons = set(_record_pids(fresh_home))
    assert len(daemons) == 2
    hosts = _children(daemons)
    assert len(hosts) >= 2  # one warm actor host per slot, ready before start/connect return
    for pid in [*daemons, *hosts]:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        assert token.encode() not in cmdline, f"pid {pid}: {cmdline!r}"

    status = actorrt_cli("status", "--json", "--address", f"127.0.0.1:{port}", "--token", token)
    assert status.returncode == 0, status.stderr
    assert json.loads(status.stdout)["slots"]["total"] == 2  # both joined with the token


# ---- 8: the daemons' own logs rotate -----------------------------------------------------------


@actorrt.remote_class
class Printer:
    def spam(self, n: int) -> int:
        for i in range(n):
            print(f"spam line {i:06d} " + "x" * 80)
        return n


async def test_daemon_logs_rotate_under_their_bound(fresh_home: Path, stop_by_pid: list[int]) -> None:
    max_bytes, backups = 64 * 1024, 2
    port = free_port()
    started = await asyncio.to_thread(
        actorrt_cli,
        "start",
        "--port",
        str(port),
        "--cpus",
        "1",
        "--log-max-bytes",
        str(max_bytes),
        "--log-backups",
        str(backups),
    )
    assert started.returncode == 0, started.stderr
    address = f"127.0.0.1:{port}"
    logs = fresh_home / "logs"

    # Refused RPCs (each may log a warning) and 5,000 echoed actor lines of ~100 bytes: ~0.5 MB.
    async with grpc.aio.insecure_channel(address) as ch:
        stub = master_pb2_grpc.MasterStub(ch)
        for _ in range(1000):
            with pytest.raises(grpc.RpcError):
                await stub.GetClusterStatus(master_pb2.GetClusterStatusRequest(), timeout=5)
    async with actorrt.connect(address, token=(fresh_home / "token").read_text().strip(), log_to_driver=False):
        printer = await Printer.remote()
        assert await printer.spam(5000) == 5000
        await actorrt.kill(printer)

    def last_line_logged() -> bool:
        current = sorted(logs.glob("master-*.log"))
        return bool(current) and "spam line 004999" in current[0].read_text(errors="replace")

    assert await asyncio.to_thread(wait_until, last_line_logged, 15)
    files = sorted(logs.glob("master-*.log*"))
    sizes = {p.name: p.stat().st_size for p in files}
    assert len(files) == backups + 1, sizes  # it rotated, and kept no more than it should
    assert all(size <= max_bytes for size in sizes.values()), sizes
    assert sum(sizes.values()) <= (backups + 1) * max_bytes
    status = await asyncio.to_thread(actorrt_cli, "status", "--json", "--address", address)
    assert status.returncode == 0, status.stderr  # and it serves on


def test_log_rotation_flags_are_checked(fresh_home: Path) -> None:
    out = actorrt_cli("start", "--log-max-bytes", "10")
    assert out.returncode == 2 and "--log-max-bytes" in out.stderr and "must be >= 1024" in out.stderr
    out = actorrt_cli("connect", "--address", "127.0.0.1:1", "--log-backups", "0")
    assert out.returncode == 2 and "--log-backups" in out.stderr and "must be > 0" in out.stderr


# ---- 11: stop signals only the very process it recorded ---------------------------------------


def test_stop_never_signals_a_process_that_reused_a_recorded_pid(fresh_home: Path) -> None:
    records = fresh_home / "processes"
    records.mkdir(parents=True)
    # Unrelated processes whose command lines contain "actorrt", under PIDs the records name.
    impostors = [
        subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", "actorrt", "--block"]) for _ in range(2)
    ]
    try:
        started = int(Path(f"/proc/{impostors[0].pid}/stat").read_text().rsplit(")", 1)[1].split()[19])
        stale = {"pid": impostors[0].pid, "start_time": started - 100, "kind": "master", "address": "127.0.0.1:1"}
        legacy = {"pid": impostors[1].pid, "kind": "worker", "address": "127.0.0.1:1"}  # no start time at all
        for record in (stale, legacy):
            (records / f"{record['pid']}.json").write_text(json.dumps(record))

        out = actorrt_cli("stop", "--timeout", "2")
        assert out.returncode == 0, out.stderr
        assert "nothing to stop" in out.stdout and "stopped" not in out.stdout
        time.sleep(0.5)  # a signal, had one been sent, lands at once
        assert all(p.poll() is None for p in impostors), "stop signalled a process that was not its own"
        assert not list(records.glob("*.json"))  # the stale records are gone
    finally:
        for p in impostors:
            os.kill(p.pid, signal.SIGKILL)
            p.wait()


def test_stop_leaves_other_machines_records_and_processes_alone(fresh_home: Path) -> None:
    """With ACTORRT_HOME shared between machines (an NFS home, as xparl clusters often have),
    `actorrt stop` on the head deleted the records of the workers on the other machines (their
    PIDs were not alive here) and `stop` there then found nothing: the daemons ran on. A record
    names its machine (boot and PID namespace) and only that machine stops or removes it. (The
    other machine is played by a record that says so, naming a live local process under a PID
    and start time that would otherwise match.)"""
    records = fresh_home / "processes"
    records.mkdir(parents=True)
    elsewhere = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", "actorrt", "--block"])
    try:
        started = int(Path(f"/proc/{elsewhere.pid}/stat").read_text().rsplit(")", 1)[1].split()[19])
        record = records / f"{elsewhere.pid}@another-machine.json"
        record.write_text(
            json.dumps({"pid": elsewhere.pid, "start_time": started, "machine": "another-boot/1", "kind": "worker"})
        )
        out = actorrt_cli("stop", "--timeout", "2")
        assert out.returncode == 0, out.stderr
        assert "nothing to stop" in out.stdout and "1 record(s) of actorrt processes on other machines" in out.stdout
        time.sleep(0.5)  # a signal, had one been sent, lands at once
        assert elsewhere.poll() is None and record.exists()
    finally:
        os.kill(elsewhere.pid, signal.SIGKILL)
        elsewhere.wait()


def test_old_daemon_logs_are_pruned_but_never_a_running_daemons(fresh_home: Path, stop_by_pid: list[int]) -> None:
    """Every background start or connect logs to a new file set (up to 40 MiB each) and nothing
    ever removed them: a daily start/stop job filled the home. A background start keeps the
    newest DAEMON_LOGS_KEPT daemons' logs, and never a running daemon's, however old."""
    first = actorrt_cli("start", "--port", str(free_port()), "--cpus", "0")
    assert first.returncode == 0, first.stderr
    logs = fresh_home / "logs"
    (running,) = logs.glob("master-*.log")
    os.utime(running, (1, 1))  # older than every other
    for i in range(25):
        (logs / f"worker-{1000 + i}.log").write_text("old\n")
        (logs / f"worker-{1000 + i}.log.1").write_text("older\n")
        os.utime(logs / f"worker-{1000 + i}.log", (100 + i, 100 + i))
    second = actorrt_cli("start", "--port", str(free_port()), "--cpus", "0")
    assert second.returncode == 0, second.stderr
    kept = sorted(p.name for p in logs.glob("worker-*.log"))
    assert kept == [f"worker-{1000 + i}.log" for i in range(5, 25)]
    assert len(list(logs.glob("worker-*.log.1"))) == 20
    assert running.exists() and len(list(logs.glob("master-*.log"))) == 2


async def test_a_cluster_on_ipv6_loopback_serves(fresh_home: Path, stop_by_pid: list[int]) -> None:
    """`actorrt start --host ::1` failed ("the address is in use or not available"): addresses
    were joined as HOST:PORT, which gRPC reads as one IPv6 literal without a port. IPv6 hosts are
    written in brackets, the master's address and the actors' endpoints alike."""
    port = free_port()
    started = actorrt_cli("start", "--host", "::1", "--port", str(port), "--cpus", "1")
    assert started.returncode == 0, started.stderr
    assert f"[::1]:{port}" in started.stdout
    async with actorrt.connect(f"[::1]:{port}", log_to_driver=False, timeout=20) as c:
        status = await c.status()
        echo = await Printer.remote()
        assert await echo.spam(2) == 2
        [row] = (await c.status()).actors
        assert row["endpoint"].startswith("[::1]:") and len(status.nodes) == 1


# ---- 14: resource counts are bounded -----------------------------------------------------------


def test_absurd_resource_counts_are_refused_before_anything_starts(fresh_home: Path, stop_by_pid: list[int]) -> None:
    port = free_port()
    t0 = time.monotonic()
    out = actorrt_cli("start", "--port", str(port), "--gpus", "10000000")
    assert _one_line(out) and "--gpus 10000000" in out.stderr, out.stderr
    out = actorrt_cli("connect", "--address", f"127.0.0.1:{port}", "--cpus", str(10**7), "--token", "t")
    assert _one_line(out) and "--cpus 10000000" in out.stderr, out.stderr
    assert time.monotonic() - t0 < 20  # fails fast: nothing was started and waited for
    assert not (fresh_home / "processes").exists() or not _record_pids(fresh_home)
    with socket.socket() as s:  # nothing listens on the port
        assert s.connect_ex(("127.0.0.1", port)) != 0

    from actorrt.worker.daemon import WorkerDaemon

    with pytest.raises(ValueError, match=r"gpus 10000000 is out of range|gpus 10000000 is more than"):
        WorkerDaemon("127.0.0.1:1", cpus=1, gpus=10**7)
    with pytest.raises(ValueError, match="cpus 10000000 is out of range"):
        WorkerDaemon("127.0.0.1:1", cpus=10**7)


@pytest.mark.parametrize("field", ["gpus", "cpus"])
async def test_master_refuses_register_worker_with_absurd_counts(cluster: ProcCluster, field: str) -> None:
    counts: dict[str, Any] = {"cpus": 1, "gpus": 0, field: 10**7}
    async with grpc.aio.insecure_channel(cluster.address) as ch:
        call = master_pb2_grpc.MasterStub(ch).WorkerSession(metadata=_rpc.auth_metadata(cluster.token))
        await call.write(
            master_pb2.WorkerEvent(
                register_worker=master_pb2.RegisterWorker(
                    version=_rpc.PROTOCOL_VERSION, node="absurd", node_ip="127.0.0.1", **counts
                )
            )
        )
        with pytest.raises(grpc.RpcError) as info:
            await call.read()
        assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert f"RegisterWorker.{field}" in (info.value.details() or "")
    status = await asyncio.to_thread(cluster.status)
    assert len(status["nodes"]) == 2 and all(n["node"] != "absurd" for n in status["nodes"])


# ---- 15: the state directory is private -------------------------------------------------------


def test_state_dir_and_everything_under_it_is_private(fresh_home: Path, stop_by_pid: list[int]) -> None:
    assert not fresh_home.exists()
    out = actorrt_cli("start", "--port", str(free_port()), "--cpus", "1")
    assert out.returncode == 0, out.stderr
    assert actorrt_cli("stop").returncode == 0
    folders = [fresh_home, *(p for p in fresh_home.rglob("*") if p.is_dir())]
    assert len(folders) >= 3  # the home, logs, processes
    modes = {str(p): oct(stat.S_IMODE(p.stat().st_mode)) for p in folders}
    assert all(m == "0o700" for m in modes.values()), modes
    assert stat.S_IMODE((fresh_home / "token").stat().st_mode) == 0o600


# ---- a start that fails, or is interrupted, leaves the running cluster as it was -----------------


def test_a_start_that_fails_keeps_the_running_clusters_token(fresh_home: Path, stop_by_pid: list[int]) -> None:
    """A second `actorrt start` whose metrics port was taken wrote its new token over the running
    cluster's before it failed: every later `status`, `logs` or `connect` on this machine failed
    authentication against the cluster that still ran."""
    port, metrics_port = free_port(), free_port()
    started = actorrt_cli("start", "--port", str(port), "--cpus", "1", "--metrics-port", str(metrics_port))
    assert started.returncode == 0, started.stderr
    token = home.token_path().read_text()
    failed = actorrt_cli("start", "--port", str(free_port()), "--cpus", "0", "--metrics-port", str(metrics_port))
    assert failed.returncode == 1 and "metrics" in failed.stderr, failed.stderr
    assert home.token_path().read_text() == token
    status = actorrt_cli("status", "--json")
    assert status.returncode == 0, status.stderr
    assert json.loads(status.stdout)["slots"]["total"] == 1


def test_ctrl_c_while_start_waits_leaves_no_daemon(fresh_home: Path, tmp_path: Path, stop_by_pid: list[int]) -> None:
    """The daemon `actorrt start` runs in the background is in a session of its own, so the
    terminal's Ctrl-C never reached it: the command exited 130 and the master came up anyway,
    holding the port (the next start said "address in use")."""
    (tmp_path / "slow_preload.py").write_text("import time\ntime.sleep(30)\n")
    env = dict(os.environ, PYTHONPATH=f"{tmp_path}:{os.environ.get('PYTHONPATH', '')}")
    port = free_port()
    cli = subprocess.Popen(
        [sys.executable, "-m", "actorrt", "start", "--port", str(port), "--cpus", "1", "--preload", "slow_preload"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    stop_by_pid.append(cli.pid)
    assert wait_until(lambda: bool(_children({cli.pid})), timeout=20)
    daemons = _children({cli.pid})
    stop_by_pid.extend(daemons)
    time.sleep(1.0)
    cli.send_signal(signal.SIGINT)
    _, err = cli.communicate(timeout=30)
    logs = "".join(p.read_text(errors="replace")[-1500:] for p in (fresh_home / "logs").glob("*.log"))
    assert cli.returncode == 130, (err, logs)
    assert wait_until(lambda: not any(_alive(pid) for pid in daemons), timeout=15), (daemons, err, logs)
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as servers do: TIME_WAIT is no owner
        s.bind(("127.0.0.1", port))  # no listener left on it
        s.listen()
