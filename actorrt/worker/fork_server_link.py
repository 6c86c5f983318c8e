"""The worker daemon's side of its fork server (``actorrt.host.forkserver``, whose docstring says
why hosts are forked): ``ForkServer`` starts the server and asks it for hosts, ``ForkedHost`` is
one host it forked, as the daemon sees it. Also what both sides share: the protocol's constants
and the processes' names."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import socket
import struct
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

__all__ = [
    "HOST_NAME",
    "MAX_REQUEST",
    "PID",
    "READY",
    "SERVER_NAME",
    "ForkServer",
    "ForkServerStartError",
    "ForkedHost",
    "available",
    "set_process_name",
]

HOST_NAME = "actorrt-host"  # /proc/<pid>/comm of every actor host, as ps and top show it
SERVER_NAME = "actorrt-forksrv"  # and of a fork server (15 characters at most)
READY = b"ready"
PID = struct.Struct("!i")  # a host's pid, then its exit status (-N: killed by signal N)
# A request is a datagram naming its file descriptors; its body (the host's argv, folder and
# environment: hundreds of KB where a pod's environment is large) travels in a memfd among them,
# since one SEQPACKET datagram can carry no more than the socket's send buffer (~208 KB here).
REQUEST = b"spawn"
MAX_REQUEST = 64  # bytes of the datagram itself
# How long a new fork server may take to import its preloads (torch: seconds, more on a cold disk).
START_TIMEOUT_S = 300.0
SPAWN_TIMEOUT_S = 30.0  # from a request to the forked host's pid


def available() -> bool:
    """Whether hosts can be forked here: Linux with pidfds (5.3+), and not turned off with
    ``ACTORRT_FORK_SERVER=0`` (for preloaded modules that are not safe to fork, such as one that
    initialises CUDA when imported)."""
    if os.environ.get("ACTORRT_FORK_SERVER", "1") == "0" or not sys.platform.startswith("linux"):
        return False
    try:
        os.close(os.pidfd_open(os.getpid()))
        os.close(os.memfd_create("actorrt-probe", os.MFD_CLOEXEC))  # a seccomp filter may forbid it
    except (AttributeError, OSError):
        return False
    return hasattr(socket, "send_fds") and hasattr(signal, "pidfd_send_signal")


def set_process_name(name: str) -> None:
    """Name this process in /proc/<pid>/comm (what ps, top and the tests see); best effort."""
    try:
        Path("/proc/self/comm").write_text(name[:15])
    except OSError:
        pass


# ---- daemon side -----------------------------------------------------------------------------


class ForkServerStartError(OSError):
    """A fork server exited or said nothing before it was ready (a preload that crashes it)."""


def _readable(sock_or_fd: socket.socket | int, *, write: bool = False) -> asyncio.Future[None]:
    """Daemon loop: a future done once ``sock_or_fd`` is readable (data, EOF or a hang-up), or
    writable with ``write``."""
    loop = asyncio.get_running_loop()
    fut: asyncio.Future[None] = loop.create_future()
    fd = sock_or_fd if isinstance(sock_or_fd, int) else sock_or_fd.fileno()
    add, remove = (loop.add_writer, loop.remove_writer) if write else (loop.add_reader, loop.remove_reader)

    def ready() -> None:
        remove(fd)
        if not fut.done():
            fut.set_result(None)

    add(fd, ready)
    fut.add_done_callback(lambda _: remove(fd))
    return fut


def _memfd(name: str, data: bytes) -> int:
    """An anonymous in-memory file holding ``data`` (its offset at the end: read it with pread)."""
    fd = os.memfd_create(name, os.MFD_CLOEXEC)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_memfd(fd: int) -> bytes:
    """The whole content of a file descriptor from :func:`_memfd` (whatever its offset)."""
    size = os.fstat(fd).st_size
    parts, offset = [], 0
    while offset < size:
        part = os.pread(fd, size - offset, offset)
        if not part:
            break
        parts.append(part)
        offset += len(part)
    return b"".join(parts)


async def _send_fds(sock: socket.socket, data: bytes, fds: list[int]) -> None:
    """Daemon loop: send ``data`` with ``fds`` on the non-blocking ``sock``, waiting while its
    buffer is full (many hosts asked for at once)."""
    while True:
        try:
            socket.send_fds(sock, [data], fds)
            return
        except BlockingIOError:
            await _readable(sock, write=True)


class _PipeProtocol(asyncio.StreamReaderProtocol):
    def eof_received(self) -> bool:
        super().eof_received()
        return False  # close the pipe at its EOF: uvloop would keep it open (asyncio closes it)


async def _stream(fd: int) -> asyncio.StreamReader:
    """Daemon loop: an asyncio reader of the pipe's read end ``fd`` (which it then owns and
    closes at EOF)."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=2**16)
    await loop.connect_read_pipe(lambda: _PipeProtocol(reader), os.fdopen(fd, "rb", 0))
    return reader


class ForkedHost:
    """One host a fork server started: the part of ``asyncio.subprocess.Process`` the daemon uses
    (``pid``, ``returncode``, ``wait``, ``send_signal``, ``stdout``, ``stderr``). Its stdin's write
    end stays open here until it exited: the host leaves when it sees that pipe's EOF."""

    def __init__(
        self,
        pid: int,
        pidfd: int,
        status: socket.socket,
        stdin_w: int,
        stdout: asyncio.StreamReader,
        stderr: asyncio.StreamReader,
    ) -> None:
        self.pid = pid
        self.returncode: int | None = None
        self.stdout = stdout
        self.stderr = stderr
        self._pidfd = pidfd
        self._status = status
        self._stdin_w = stdin_w
        self._exited = asyncio.ensure_future(self._watch())

    async def wait(self) -> int:
        return await asyncio.shield(self._exited)

    def send_signal(self, sig: int) -> None:
        """Signal the host; through its pidfd, so never another process that took its pid."""
        if self.returncode is None:
            signal.pidfd_send_signal(self._pidfd, sig)

    async def _watch(self) -> int:
        """Its exit status, from the fork server once it reaped the host; SIGKILL's if the server
        died first (the host dies with it: its pidfd turns readable once it is gone)."""
        try:
            while True:
                await _readable(self._status)
                try:
                    data = self._status.recv(PID.size)
                except BlockingIOError:
                    continue
                except OSError:
                    data = b""
                break
            if len(data) == PID.size:
                code: int = PID.unpack(data)[0]
            else:
                await _readable(self._pidfd)
                code = -signal.SIGKILL
            self.returncode = code
            return code
        finally:
            self.returncode = -signal.SIGKILL if self.returncode is None else self.returncode
            self._status.close()
            os.close(self._stdin_w)
            os.close(self._pidfd)


class ForkServer:
    """The daemon's side of its fork server: started on the first ``spawn``, started again when
    it died, ended by ``close``. Daemon loop only."""

    def __init__(self, workdir: str) -> None:
        self.workdir = workdir  # the server's own working folder (the daemon's folder of hosts)
        self.proc: asyncio.subprocess.Process | None = None
        self._ctl: socket.socket | None = None
        self._lock = asyncio.Lock()
        self._failed: ForkServerStartError | None = None  # it could not start: never tried again

    async def spawn(self, argv: Sequence[str], cwd: str, env: dict[str, str], stats_w: int) -> ForkedHost:
        """Fork a host running ``python -m actorrt.host.server *argv`` in ``cwd`` with ``env``, its call
        statistics written to ``stats_w`` (the caller keeps and closes its copy). Raises OSError
        if the server cannot be started or does not answer."""
        async with self._lock:
            if self._failed is not None:  # the hosts that waited for that try
                raise self._failed
            if self.proc is None or self.proc.returncode is not None:
                await self._start(env)
            assert self._ctl is not None
            body = json.dumps({"argv": list(argv), "cwd": cwd, "env": env}).encode()
            status, status_theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
            ours: list[int] = []  # stdin's write end, stdout's and stderr's read ends
            theirs: list[int] = []
            sending = False
            try:
                for host_reads in (True, False, False):  # stdin, stdout, stderr
                    r, w = os.pipe()
                    ours.append(w if host_reads else r)
                    theirs.append(r if host_reads else w)
                theirs.append(_memfd("actorrt-request", body))
                sending = True
                await _send_fds(self._ctl, REQUEST, [*theirs[:3], stats_w, status_theirs.fileno(), theirs[3]])
            except BaseException as e:
                status.close()
                for fd in ours:
                    os.close(fd)
                # The server takes no more requests after a failed send: the next spawn starts
                # another. (Out of descriptors before sending is not the server's fault.)
                if sending and isinstance(e, OSError) and self.proc is not None and self.proc.returncode is None:
                    self.proc.kill()
                raise
            finally:
                status_theirs.close()
                for fd in theirs:
                    os.close(fd)
            stdin_w, stdout_r, stderr_r = ours
        # From here a host may exist that nobody else knows of. Not answered in time, or
        # cancelled (the daemon closing): our pipe ends close, and such a host, reading its
        # stdin's EOF, leaves. (asyncio.timeout, not wait_for: Python 3.11's wait_for returns
        # the answer and drops a cancellation that comes as the answer does, and the daemon's
        # close then waited for a host it never signalled.)
        try:
            status.setblocking(False)
            async with asyncio.timeout(SPAWN_TIMEOUT_S):
                pid, pidfd = await self._answer(status)
        except BaseException as e:
            status.close()
            for fd in ours:
                os.close(fd)
            if isinstance(e, OSError):  # TimeoutError too
                raise OSError(f"the fork server did not start a host: {e or 'no answer'}") from e
            raise
        unowned = [stdout_r, stderr_r]  # until _stream owns each
        try:
            stdout = await _stream(unowned.pop(0))
            stderr = await _stream(unowned.pop(0))
        except BaseException:  # cancelled: end the host it answered with
            with contextlib.suppress(ProcessLookupError):  # gone already
                signal.pidfd_send_signal(pidfd, signal.SIGKILL)
            for fd in (pidfd, stdin_w, *unowned):
                os.close(fd)
            status.close()
            raise
        return ForkedHost(pid, pidfd, status, stdin_w, stdout, stderr)

    @staticmethod
    async def _answer(status: socket.socket) -> tuple[int, int]:
        while True:
            await _readable(status)
            try:
                data, fds, _, _ = socket.recv_fds(status, PID.size, 1)
            except BlockingIOError:
                continue
            if len(data) != PID.size or len(fds) != 1:
                for fd in fds:
                    os.close(fd)
                raise OSError("it closed the request unanswered")
            return PID.unpack(data)[0], fds[0]

    async def _start(self, env: dict[str, str]) -> None:
        await self.close()
        ctl, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            self.proc = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "actorrt.host.forkserver",  # serve()
                str(theirs.fileno()),
                stdin=asyncio.subprocess.DEVNULL,
                cwd=self.workdir,
                env=env,
                pass_fds=(theirs.fileno(),),
                start_new_session=True,  # a Ctrl-C at the daemon's terminal is the daemon's to handle
            )
        except BaseException:
            ctl.close()
            raise
        finally:
            theirs.close()
        self._ctl = ctl
        ctl.setblocking(False)
        ready = _readable(ctl)
        exited = asyncio.ensure_future(self.proc.wait())
        either: set[asyncio.Future[Any]] = {ready, exited}
        try:
            await asyncio.wait(either, timeout=START_TIMEOUT_S, return_when=asyncio.FIRST_COMPLETED)
            answer = ctl.recv(4096) if ready.done() else b""
        except OSError:
            answer = b""
        finally:
            ready.cancel()
            exited.cancel()
        if answer != READY:
            proc = self.proc
            await self.close()  # it exits on the socket's EOF, if it did not already
            why = answer.decode(errors="replace") or f"exit status {proc.returncode}"
            self._failed = ForkServerStartError(f"the fork server did not start ({why})")
            raise self._failed

    async def close(self) -> None:
        """End the server: it exits once its last host did (hosts are the daemon's to end)."""
        if self._ctl is not None:
            self._ctl.close()
            self._ctl = None
        proc, self.proc = self.proc, None
        if proc is not None and proc.returncode is None:
            try:
                async with asyncio.timeout(5.0):
                    await proc.wait()
            except TimeoutError:
                proc.kill()
                await proc.wait()
