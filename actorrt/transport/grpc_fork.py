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
``grpc``, sets the variable to ``false`` unless the user set it. When ``grpc`` was imported first
(TensorBoard, the google-cloud libraries and Ray import it) the cached copy was read already,
so it also drops that cache (``cygrpc.reset_grpc_config_vars``) while no gRPC thread runs yet:
the first ``grpc_init`` then reads ``false``. Processes that import actorrt first (every actor
host, the fork server, the worker daemon, the master, the CLI) only set the variable.
"""

from __future__ import annotations

import os
import sys

__all__ = ["GRPC_VAR", "configure"]

GRPC_VAR = "GRPC_ENABLE_FORK_SUPPORT"
_CYGRPC = "grpc._cython.cygrpc"
# The names gRPC's C core gives its threads (comm, 15 characters): timer manager, event engine
# pool and its lifeguard, iomgr executors.
_GRPC_THREADS = ("grpc_", "event_engine", "lifeguard", "default-execut", "resolver-execu")
# What the C core reads as false (absl::ParseFlag, any case); anything else that is not true
# either leaves it at its built-in default: on.
_CORE_FALSE = {"0", "f", "false", "n", "no"}


def _core_reads_on(value: str) -> bool:
    return value.strip().lower() not in _CORE_FALSE


def configure() -> None:
    """Turn gRPC's fork support off for this process, before gRPC reads it where it still can.

    Import time, the importing thread; raises nothing. Must run before actorrt imports ``grpc``."""
    preloaded = _CYGRPC in sys.modules
    given = os.environ.get(GRPC_VAR)
    os.environ.setdefault(GRPC_VAR, "false")  # inherited by every process this one starts
    if (given is not None and _core_reads_on(given)) or not preloaded:
        return  # the user's choice; or grpc is first imported by actorrt, just below: it reads "false"
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
        return True  # unknown: leave gRPC's configuration alone
    for tid in tids:
        try:
            with open(f"/proc/self/task/{tid}/comm") as f:
                name = f.read().strip()
        except OSError:
            continue  # that thread ended
        if name.startswith(_GRPC_THREADS):
            return True
    return False


configure()  # on import: actorrt/__init__ imports this module before anything that imports grpc
