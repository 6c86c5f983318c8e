"""gRPC's fork support, kept off wherever actorrt runs: a forked child must never crash.

Why. grpcio's wheels build gRPC with fork support on by default. Its C core reads
``GRPC_ENABLE_FORK_SUPPORT`` once, when ``grpc`` is imported (a static initialiser of the shared
library ``cygrpc`` caches its whole configuration), and latches the value at its first
``grpc_init`` (the first channel or server). On, it registers ``pthread_atfork`` handlers, and in
every forked child they restart its event engine's threads and poller, which run the callbacks of
the parent's connections (their sockets closed on fork) over state copied mid-flight: the
child, which never used gRPC, dies within milliseconds with SIGSEGV or SIGABRT
(``ev_epoll1_linux.cc: Check failed: next_worker->state == KICKED``). The asyncio stack actorrt
uses always has a thread inside gRPC, so gRPC's own pre-fork quiescing gives up ("Other threads
are currently calling into gRPC, skipping fork() handlers") while the event engine's handlers
run anyway. Off, no handler is registered: a child that only computes, or starts a fresh client
process (the PARL layer's relay), never touches what it inherited.

What. ``configure()``, run when ``actorrt/__init__`` imports this module before anything imports
``grpc``, sets the variable to ``false`` unless the user set it. When ``grpc`` was imported
first (TensorBoard, the google-cloud libraries and Ray import it) the cached copy was read
already, so it also drops that cache (``cygrpc.reset_grpc_config_vars``) while no gRPC thread
runs yet: the first ``grpc_init`` then reads ``false``. What no configuration undoes, gRPC
initialised with fork support on before actorrt was imported (a channel made, even closed
again), or the user's own ``GRPC_ENABLE_FORK_SUPPORT=true``, ``check()`` finds before
``connect`` opens anything: a process that imported ``grpc`` first forks one child, which exits
at once, and gRPC's handlers are on when that child has more than its one thread (or dies);
``connect`` then raises ``ClusterConnectionError`` saying what to change, so no child of a
connected process can crash. ``ACTORRT_ALLOW_GRPC_FORK_SUPPORT=1`` connects anyway (a process
that never forks while connected). Processes that import actorrt first (every actor host, the
fork server, the worker daemon, the master, the CLI) only set the variable: no reset, no probe;
an actor's own connection is not checked (its host serves over gRPC already).
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
import time

from actorrt.common.errors import ClusterConnectionError

__all__ = ["ALLOW_VAR", "GRPC_VAR", "check", "configure"]

log = logging.getLogger("actorrt")

GRPC_VAR = "GRPC_ENABLE_FORK_SUPPORT"
ALLOW_VAR = "ACTORRT_ALLOW_GRPC_FORK_SUPPORT"
_CYGRPC = "grpc._cython.cygrpc"
# The names gRPC's C core gives its threads (comm, 15 characters): timer manager, event engine
# pool and its lifeguard, iomgr executors.
_GRPC_THREADS = ("grpc_", "event_engine", "lifeguard", "default-execut", "resolver-execu")
# What the C core reads as false (absl::ParseFlag, any case); anything else that is not true
# either leaves it at its built-in default: on.
_CORE_FALSE = {"0", "f", "false", "n", "no"}
_PROBE_WAIT_S = 10.0  # a probe child that has not exited by then is killed and counts as crashed
_PROBE = "probe"  # _verdict: decide at the first check (grpc was imported before actorrt)

_verdict: str | None = None  # None: gRPC's fork handlers are off; else why they are on, or _PROBE
_lock = threading.Lock()
_warned = False  # ALLOW_VAR's warning was logged


def _core_reads_on(value: str) -> bool:
    return value.strip().lower() not in _CORE_FALSE


def configure() -> None:
    """Turn gRPC's fork support off for this process, before gRPC reads it where it still can.

    Import time, the importing thread; raises nothing. Must run before actorrt imports ``grpc``."""
    global _verdict
    preloaded = _CYGRPC in sys.modules
    given = os.environ.get(GRPC_VAR)
    os.environ.setdefault(GRPC_VAR, "false")  # inherited by every process this one starts
    if given is not None and _core_reads_on(given):
        _verdict = f"{GRPC_VAR}={given} in the environment turns it on"
        return
    if not preloaded:
        return  # grpc is first imported by actorrt, just below: the C core reads "false"
    _verdict = _PROBE
    if not _grpc_threads_running():
        # No gRPC thread: nothing reads the cached configuration while it is dropped, and a
        # gRPC never initialised reads "false" at its first grpc_init.
        reset = getattr(sys.modules[_CYGRPC], "reset_grpc_config_vars", None)
        if reset is not None:
            reset()


def _grpc_threads_running() -> bool:
    """Whether a thread of gRPC's C core runs in this process (then gRPC is initialised)."""
    try:
        tids = os.listdir("/proc/self/task")
    except OSError:
        return True  # unknown: leave gRPC's configuration alone, the probe decides
    for tid in tids:
        try:
            with open(f"/proc/self/task/{tid}/comm") as f:
                name = f.read().strip()
        except OSError:
            continue  # that thread ended
        if name.startswith(_GRPC_THREADS):
            return True
    return False


def check() -> None:
    """Refuse to connect a process whose forked children gRPC would crash.

    Caller's thread, before ``connect`` opens any channel or server; the first call in a process
    that imported ``grpc`` before actorrt forks one probe child (a few ms), later calls cost a
    lookup. Raises ``ClusterConnectionError`` naming the cause and the fix, unless
    ``ACTORRT_ALLOW_GRPC_FORK_SUPPORT=1`` (then it logs a warning, once)."""
    global _warned
    reason = _reason()
    if reason is None:
        return
    message = (
        f"gRPC's fork support is on in this process ({reason}): every process forked from it "
        "while it is connected (multiprocessing's 'fork' start method, os.fork) would run gRPC's "
        "fork handlers, which crash it (SIGSEGV, SIGABRT) or end it. Start Python with "
        f"{GRPC_VAR}=false in the environment, or import actorrt before anything that uses "
        f"gRPC; {ALLOW_VAR}=1 connects anyway (for a process that never forks while connected)"
    )
    if os.environ.get(ALLOW_VAR) != "1":
        raise ClusterConnectionError(f"connect: {message}")
    if not _warned:
        _warned = True
        log.warning("%s=1: %s", ALLOW_VAR, message)


def _reason() -> str | None:
    """Why gRPC's fork handlers are on in this process, or None when they are off."""
    global _verdict
    with _lock:
        if _verdict == _PROBE:
            _verdict = None if _forks_cleanly() else "gRPC was set up before actorrt was imported, with it on"
        return _verdict


def _forks_cleanly() -> bool:
    """Fork one child that exits at once: whether it kept a single thread and exited 0.

    With gRPC's fork support latched on, its ``pthread_atfork`` handlers start threads in the
    child before ``fork`` returns there (or crash it). A channel is opened first so that gRPC is
    initialised and its event engine registered, as it will be once actorrt connects."""
    import grpc

    channel = grpc.insecure_channel("127.0.0.1:9")  # never used: only makes gRPC start
    try:
        pid = os.fork()
        if pid == 0:  # the probe child: nothing but count its threads and leave
            code = 1
            try:
                code = 0 if len(os.listdir("/proc/self/task")) == 1 else 1
            finally:
                os._exit(code)
        deadline = time.monotonic() + _PROBE_WAIT_S
        while (done := os.waitpid(pid, os.WNOHANG))[0] == 0:
            if time.monotonic() > deadline:  # stuck in a fork handler: kill it, count it as crashed
                os.kill(pid, signal.SIGKILL)
                done = os.waitpid(pid, 0)
                break
            time.sleep(0.002)
        return done[1] == 0
    finally:
        channel.close()


configure()  # on import: actorrt/__init__ imports this module before anything that imports grpc
