"""PARL's process-wide client: ``connect``, ``disconnect``, ``get_global_client``.

One client per process, as in PARL: ``connect(address)`` makes it, a second ``connect`` in the
same process does nothing, and every remote object of the process is created through it. A
forked child (``multiprocessing`` with the fork start method, ``os.fork``) gets a client of its
own the first time it connects or creates a remote object, to the master its parent used: in
a forked process gRPC cannot run (the parent's threads are gone), so the child's client is a
relay process of its own (``_relay``). Processes started fresh (``spawn``, ``forkserver``) are
like any other.
"""

from __future__ import annotations

import atexit
import logging
import os
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field

from actorrt.compat.parl._backend import Backend, DirectBackend
from actorrt.transport import addresses

__all__ = ["ActorCount", "GlobalClient", "connect", "disconnect", "get_global_client"]

log = logging.getLogger("actorrt.compat.parl")

NOT_CONNECTED = (
    "not connected to a cluster: call parl.connect(master_address) first "
    "(e.g. parl.connect('localhost:8010') after 'actorrt start --port 8010')"
)


class ActorCount:
    """PARL's ``client.actor_num``: ``.value`` is how many remote objects this client holds."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.value = 0

    def add(self, n: int) -> None:
        with self._lock:
            self.value += n

    def __repr__(self) -> str:
        return f"<actor_num {self.value}>"


@dataclass
class GlobalClient:
    """The process's connection, as PARL's client shows it: ``master_address``,
    ``actor_num.value``, ``distributed_files``; ``pid`` is the process it belongs to."""

    master_address: str
    distributed_files: list[str]
    backend: Backend
    token: str | None = field(default=None, repr=False)
    """The token ``connect`` was given (a forked child's client connects with it too)."""
    pid: int = field(default_factory=os.getpid)
    actor_num: ActorCount = field(default_factory=ActorCount)

    @property
    def closed(self) -> bool:
        return self.backend.closed

    def __repr__(self) -> str:
        return f"<parl client of {self.master_address}, pid {self.pid}, {self.actor_num.value} remote objects>"


_client: GlobalClient | None = None
_lock = threading.Lock()
# Set in a process made by fork: gRPC cannot run there, the client must be a relay process.
_forked = False


def _after_fork_in_child() -> None:
    global _lock, _forked
    _lock = threading.Lock()  # another thread of the parent may have held it at the fork
    _forked = True


os.register_at_fork(after_in_child=_after_fork_in_child)


def _make(master_address: str, files: list[str], token: str | None) -> GlobalClient:
    if _forked:
        from actorrt.compat.parl._relay import RelayBackend

        backend: Backend = RelayBackend(master_address, files, token)
    else:
        backend = DirectBackend(master_address, files, token)
    return GlobalClient(master_address, files, backend, token)


def connect(master_address: str, distributed_files: Sequence[str] = (), *, token: str | None = None) -> None:
    """Connect this process to the cluster whose master is at ``master_address`` (``host:port``).

    ``distributed_files``: glob patterns of files and folders copied into every remote object's
    working folder, at the same relative paths (folders whole, empty ones too). A second call in
    the same process does nothing (as PARL's), even with another address: ``disconnect()``
    first. ``token``: the cluster's token (else ``ACTORRT_TOKEN``, else the one ``actorrt
    start`` wrote on this machine); PARL had none.
    """
    global _client
    addresses.check_address(master_address, "connect: master_address")
    files = [distributed_files] if isinstance(distributed_files, str) else list(distributed_files or ())
    with _lock:
        if _client is not None and _client.pid == os.getpid() and not _client.closed:
            log.info("already connected to %s: parl.connect(%r) does nothing", _client.master_address, master_address)
            return
        _client = _make(master_address, files, token)
    log.info("connected to the actorrt master at %s", master_address)


def get_global_client() -> GlobalClient:
    """This process's client. In a forked child of a connected process, a new client of the
    child's own, to the same master. Raises ``AssertionError`` (PARL's) when not connected."""
    global _client
    with _lock:
        client = _client
        if client is None or (client.closed and client.pid == os.getpid()):
            raise AssertionError(NOT_CONNECTED)
        if client.pid != os.getpid():
            _client = client = _make(client.master_address, client.distributed_files, client.token)
            log.info("forked process %d: its own client of %s", os.getpid(), client.master_address)
        return client


def disconnect() -> None:
    """Close this process's client: its remote objects stop. ``connect`` may be called again."""
    global _client
    with _lock:
        client, _client = _client, None
    if client is not None and client.pid == os.getpid():
        client.backend.close()


@atexit.register
def _close_at_exit() -> None:
    """At exit the client closes, and its remote objects stop (a forked child's copy of its
    parent's client is not its own: left alone)."""
    client = _client
    if client is not None and client.pid == os.getpid():
        client.backend.close()
