"""The token stays with its owner: never on a command line, never in plaintext where TLS is asked for
(every client command opens its channel through one factory), and the home folder that holds it
is private. Real CLI processes on 127.0.0.1."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import stat
import threading
from pathlib import Path

import actorrt
from tests.cli.conftest import children, one_line, record_pids
from tests.conftest import ProcCluster, actorrt_cli, free_port, wait_until
from tests.transport.test_security import pki  # noqa: F401 - the fixture: a CA and certificates for 127.0.0.1


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
            assert one_line(plain), plain.stderr
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


def test_start_and_connect_keep_the_token_off_every_command_line(fresh_home: Path, stop_by_pid: list[int]) -> None:
    token = "cmdline-secret-" + os.urandom(8).hex()
    port = free_port()
    started = actorrt_cli("start", "--port", str(port), "--cpus", "1", "--token", token)
    assert started.returncode == 0, started.stderr
    joined = actorrt_cli("connect", "--address", f"127.0.0.1:{port}", "--cpus", "1", f"--token={token}")
    assert joined.returncode == 0, joined.stderr

    daemons = set(record_pids(fresh_home))
    assert len(daemons) == 2
    hosts = children(daemons)
    assert len(hosts) >= 2  # one warm actor host per slot, ready before start/connect return
    for pid in [*daemons, *hosts]:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        assert token.encode() not in cmdline, f"pid {pid}: {cmdline!r}"

    status = actorrt_cli("status", "--json", "--address", f"127.0.0.1:{port}", "--token", token)
    assert status.returncode == 0, status.stderr
    assert json.loads(status.stdout)["slots"]["total"] == 2  # both joined with the token


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
