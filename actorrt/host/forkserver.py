"""Actor hosts forked from a fork server instead of each started as a new interpreter.

A host started as ``python -m actorrt.host.server`` pays an interpreter's start and the imports of the
host's code, numpy and the daemon's ``preload`` modules: about half a second of CPU on a 2-core
machine, seconds with torch, and it is paid on every actor's turnover (a host exits with its
actor, and the slot's next host starts then). A fork server pays it once per daemon: a process
started as ``python -m actorrt.host.forkserver`` that imports all that, then forks a fresh host per
request. It never opens a gRPC channel or server, runs no event loop and starts no thread of its
own, so forking it is safe (fork is never done in the daemon, where gRPC threads run).

The daemon asks over a Unix seqpacket socket (``_forked.ForkServer.spawn``), passing the new host's
stdin, stdout and stderr pipes, its statistics pipe and a status socket; on the status socket the
server answers the host's pid with a pidfd, and, once it reaped the host, its exit status.

A forked host is what ``python -m actorrt.host.server`` would be: its own session, the daemon's pipes,
its own working folder and environment, fresh random seeds (``random`` reseeds itself after a
fork; numpy's global generator is reseeded here), the process name ``actorrt-host``. It dies with
its fork server (``PR_SET_PDEATHSIG``): should the server die, its hosts are killed, reported so,
and the daemon starts another server for the next ones. When the daemon dies, the server waits
until its hosts exit (they do on their stdin's EOF, removing their shared memory) and then exits.
"""

from __future__ import annotations

import ctypes
import gc
import json
import os
import select
import signal
import socket
import sys
import threading
import traceback
from typing import Any

from actorrt.host import server as _host
from actorrt.transport.stats_pipe import METRICS_FD_ENV
from actorrt.worker.fork_server_link import MAX_REQUEST, PID, READY, REQUEST, SERVER_NAME, read_memfd, set_process_name

__all__ = ["serve"]

_PR_SET_PDEATHSIG = 1


def serve(ctl_fd: int) -> None:
    """The fork server's main loop: fork a host per request on ``ctl_fd``, report each one's
    pid and exit status; after the request socket's EOF, exit once no host is left."""
    ctl = socket.socket(fileno=ctl_fd)
    _host.preload(os.environ.get("ACTORRT_PRELOAD", ""), report=False)  # each host reports its own
    set_process_name(SERVER_NAME)
    answer = READY
    if threading.active_count() > 1:  # a preload started threads: a fork would copy their locks, not them
        names = sorted(t.name for t in threading.enumerate() if t is not threading.current_thread())
        answer = f"a preloaded module started threads ({', '.join(names)}): forking is not safe".encode()
    try:
        ctl.sendall(answer)
    except OSError:  # the daemon gave up waiting, or is gone
        return
    if answer != READY:
        return
    # What the server imported stays shared with its hosts: a host's garbage collector would
    # otherwise walk (and write to) every inherited object, copying their pages.
    gc.freeze()
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda signum, frame: None)  # only wakes the poll below
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    hosts: dict[int, socket.socket] = {}  # pid -> its status socket
    poller = select.poll()
    poller.register(ctl, select.POLLIN)
    poller.register(wake_r, select.POLLIN)
    listening = True
    while listening or hosts:
        for fd, _ in poller.poll():
            if fd == wake_r:
                os.read(wake_r, 4096)
            elif listening:
                try:
                    data, fds, _, _ = socket.recv_fds(ctl, MAX_REQUEST, 8)
                except OSError:
                    data, fds = b"", []
                if data:
                    _fork(data, fds, hosts, close_in_host=(ctl.fileno(), wake_r, wake_w))
                else:  # the daemon closed it, or died: wait for the hosts, then leave
                    listening = False
                    poller.unregister(ctl)
                    ctl.close()
        _reap(hosts)


def _fork(data: bytes, fds: list[int], hosts: dict[int, socket.socket], close_in_host: tuple[int, ...]) -> None:
    """One request: fork a host from its body (argv, cwd, env, in a memfd) with ``fds``
    (stdin, stdout, stderr, statistics, status socket, body); tell its status socket its pid
    and a pidfd."""
    if len(fds) != 6 or data != REQUEST:
        for fd in fds:
            os.close(fd)
        return
    *pipes, status_fd, body_fd = fds
    status = socket.socket(fileno=status_fd)
    server = os.getpid()
    try:
        try:
            request = json.loads(read_memfd(body_fd))
        finally:
            os.close(body_fd)
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
    except (OSError, ValueError):  # no answer: the daemon's spawn raises, its host start is retried
        status.close()
        for fd in pipes:
            os.close(fd)
        return
    if pid == 0:
        code = 1
        try:
            for fd in close_in_host:
                os.close(fd)
            for sock in hosts.values():
                sock.close()
            status.close()
            stdin, stdout, stderr, stats = pipes
            _become_host(request, stdin, stdout, stderr, stats, server=server)
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else 1
        except BaseException:  # noqa: BLE001 - said on the host's stderr, which the daemon reads
            traceback.print_exc()
        finally:
            os._exit(code)
    for fd in pipes:
        os.close(fd)
    pidfd = os.pidfd_open(pid)  # before it can have been reaped: it names this process only
    try:
        socket.send_fds(status, [PID.pack(pid)], [pidfd])
    except OSError:
        pass  # the daemon gave up on it; the host exits on its stdin's EOF
    finally:
        os.close(pidfd)
    hosts[pid] = status


def _become_host(request: dict[str, Any], stdin: int, stdout: int, stderr: int, stats: int, server: int) -> None:
    """In a forked child: become the actor host ``request`` describes, as if started with
    ``python -m actorrt.host.server`` (its own session, pipes, folder, environment and seeds)."""
    signal.set_wakeup_fd(-1)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != server:  # the server died before the line above
        os._exit(1)
    os.setsid()
    for fd, target in ((stdin, 0), (stdout, 1), (stderr, 2)):
        os.dup2(fd, target)
        os.close(fd)
    os.chdir(str(request["cwd"]))
    os.environ.clear()
    os.environ.update(request["env"])
    os.environ[METRICS_FD_ENV] = str(stats)
    if "numpy" in sys.modules:  # its global generator was seeded once, in the server
        sys.modules["numpy"].random.seed()
    argv = [str(a) for a in request["argv"]]
    sys.argv = [_host.__file__, *argv]  # as ``python -m actorrt.host.server`` would have it
    _host.main(argv)


def _reap(hosts: dict[int, socket.socket]) -> None:
    """Reap every host that exited and send its exit status on its status socket."""
    while hosts:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        sock = hosts.pop(pid, None)
        if sock is not None:
            try:
                sock.send(PID.pack(os.waitstatus_to_exitcode(status)))
            except OSError:
                pass
            sock.close()


if __name__ == "__main__":
    if len(sys.argv) != 2 or not sys.argv[1].isdigit():
        print("actorrt.host.forkserver is started by a worker daemon, given its request socket's fd", file=sys.stderr)
        sys.exit(2)
    serve(int(sys.argv[1]))
