"""Large buffers through the node's shared memory (/dev/shm) instead of the socket.

Two processes use it only after proving they share /dev/shm: the client names a probe file it
wrote in ``ConstructActor``, and the host answers whether it could read it as the same user
(the probe also names the client's pid namespace, so the host knows whether the client's pid
means the same process here). Never assumed from an IP address.

Fresh tmpfs pages are slow (allocating, zeroing and freeing 64 MiB costs ~60 ms here, more than
the copy), so each side of a stream keeps a ``Pool`` of reusable segments
``/dev/shm/actorrt-<pid>-<random>`` (0600): the sender copies a buffer into a free segment (warm
pages: one memcpy), the receiver maps it shared (no copy) and, once the value using it is gone,
names it in a ``released`` list on its next batch; the sender then reuses it. A segment is
never written while its receiver may still use it.

Nothing may be left behind: each side unlinks its pool's segments, and the peer's segments it
has seen, when the stream ends; a host whose client died removes every file that client wrote
(``remove_if_gone``), and so does the worker daemon once the host has exited; the daemon also
removes every file a host process wrote once it has exited (``remove_owned_by``). All functions
are synchronous and thread-safe.
"""

from __future__ import annotations

import asyncio
import glob
import mmap
import os
import re
import secrets
import threading
import weakref
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from actorrt.common.procfs import pid_namespace

if TYPE_CHECKING:
    from actorrt.v1.common_pb2 import SharedBuffer

__all__ = [
    "THRESHOLD",
    "Exchange",
    "Pool",
    "alive",
    "available",
    "check_probe",
    "make_probe",
    "map_pooled",
    "probe_owner",
    "remove_if_gone",
    "remove_owned_by",
    "unlink",
    "write",
]

SHM_DIR = "/dev/shm"
PREFIX = "actorrt-"
# Buffers at least this large go through shared memory; smaller ones are cheaper inline.
THRESHOLD = 1 << 20
_NAME = re.compile(r"^actorrt-[0-9]+-[0-9a-f]{16,}$")
_PROBE_TEXT = b"actorrt shared memory probe"


def available() -> bool:
    return os.path.isdir(SHM_DIR) and os.access(SHM_DIR, os.W_OK | os.X_OK)


def _path(name: str) -> str:
    if not _NAME.match(name):
        raise ValueError(f"not an actorrt shared-memory file name: {name!r}")
    return os.path.join(SHM_DIR, name)


def _new_name() -> str:
    return f"{PREFIX}{os.getpid()}-{secrets.token_hex(8)}"


def write(data: memoryview) -> str:
    """Write ``data`` to a new file in /dev/shm and return its name (the probe); raises OSError
    (e.g. no space), leaving no file behind."""
    name = _new_name()
    path = os.path.join(SHM_DIR, name)
    fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        view = data.cast("B") if data.format != "B" or data.ndim != 1 else data
        written = 0
        total = len(view)
        while written < total:
            written += os.write(fd, view[written:])
    except BaseException:
        os.close(fd)
        unlink([name])
        raise
    os.close(fd)
    return name


def unlink(names: Iterable[str]) -> None:
    """Remove these files where they still exist."""
    for name in names:
        try:
            os.unlink(_path(name))
        except (FileNotFoundError, ValueError):
            pass
        except OSError:
            pass


def make_probe() -> str | None:
    """Write a probe file and return its name, or None when this process has no /dev/shm (or
    ``ACTORRT_SHM=0`` turns shared memory off, e.g. to measure the socket path)."""
    if os.environ.get("ACTORRT_SHM", "1") == "0" or not available():
        return None
    try:
        return write(memoryview(_PROBE_TEXT + b" " + pid_namespace().encode()))
    except OSError:
        return None


def check_probe(name: str) -> bool:
    """True when the probe file ``name`` is there, ours (same user) and says what it should."""
    if not name:
        return False
    try:
        path = _path(name)
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except (OSError, ValueError):
        return False
    try:
        return os.fstat(fd).st_uid == os.getuid() and os.read(fd, 256).startswith(_PROBE_TEXT) and available()
    except OSError:
        return False
    finally:
        os.close(fd)


def probe_owner(name: str) -> int | None:
    """The pid of the process that wrote the probe ``name``, when it lives in this process's
    pid namespace (so that pid means the same process here); else None."""
    match = _NAME.match(name)
    ns = pid_namespace().encode()
    if not match or not ns:
        return None
    try:
        with open(_path(name), "rb") as f:
            if f.read(256) != _PROBE_TEXT + b" " + ns:
                return None
    except OSError:
        return None
    return int(name.split("-")[1])


def alive(pid: int) -> bool:
    """True while process ``pid`` runs (a zombie counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except (OSError, IndexError):
        return False


def remove_if_gone(pids: Iterable[int]) -> int:
    """``remove_owned_by`` for each of ``pids`` that no longer runs; returns how many files."""
    return sum(remove_owned_by(pid) for pid in set(pids) if not alive(pid))


def remove_owned_by(pid: int) -> int:
    """Remove every file process ``pid`` wrote (call once it has exited); returns how many."""
    removed = 0
    for path in glob.glob(os.path.join(SHM_DIR, f"{PREFIX}{pid}-*")):
        try:
            os.unlink(path)
            removed += 1
        except OSError:
            pass
    return removed


# ---- pooled segments ----------------------------------------------------------------------


class _Mapped(mmap.mmap):
    """An mmap that weak references (``weakref.finalize``) can watch."""


@dataclass
class _Segment:
    name: str
    capacity: int
    mem: mmap.mmap


class Pool:
    """A sender's reusable shared-memory segments. Thread-safe: ``put`` runs on the thread that
    makes a call, ``release`` and ``close`` on the event loop."""

    def __init__(self, max_free_bytes: int = 256 << 20) -> None:
        self.max_free_bytes = max_free_bytes
        self._lock = threading.Lock()
        self._free: list[_Segment] = []
        self._busy: dict[str, _Segment] = {}
        self._closed = False

    def put(self, data: memoryview) -> str:
        """Copy ``data`` into a free (or new) segment; returns its name. Raises OSError (e.g.
        /dev/shm full, or the pool closed)."""
        view = data.cast("B") if data.format != "B" or data.ndim != 1 else data
        n = len(view)
        with self._lock:
            if self._closed:
                raise OSError("shared-memory pool closed")
            seg = self._take_free(n)
        if seg is None:
            seg = self._create(max(THRESHOLD, -(-n // THRESHOLD) * THRESHOLD))
        seg.mem[:n] = view
        with self._lock:
            if self._closed:
                _drop(seg)
                raise OSError("shared-memory pool closed")
            self._busy[seg.name] = seg
        return seg.name

    def _take_free(self, n: int) -> _Segment | None:
        fits = [s for s in self._free if n <= s.capacity <= 2 * n + THRESHOLD]
        if not fits:
            return None
        seg = min(fits, key=lambda s: s.capacity)
        self._free.remove(seg)
        return seg

    def _create(self, capacity: int) -> _Segment:
        name = _new_name()
        path = os.path.join(SHM_DIR, name)
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        try:
            # Reserve the pages now: writing to a mapping of a full tmpfs is SIGBUS, not OSError.
            os.posix_fallocate(fd, 0, capacity)
            mem = mmap.mmap(fd, capacity, flags=mmap.MAP_SHARED, prot=mmap.PROT_READ | mmap.PROT_WRITE)
        except BaseException:
            os.close(fd)
            unlink([name])
            raise
        os.close(fd)
        return _Segment(name, capacity, mem)

    def release(self, names: Iterable[str]) -> None:
        """The receiver is done with these segments: reuse them (keeping at most
        ``max_free_bytes`` of free segments)."""
        with self._lock:
            for name in names:
                seg = self._busy.pop(name, None)
                if seg is None:
                    continue
                if self._closed:
                    _drop(seg)
                else:
                    self._free.append(seg)
            while self._free and sum(s.capacity for s in self._free) > self.max_free_bytes:
                _drop(self._free.pop(0))

    def names(self) -> list[str]:
        with self._lock:
            return [s.name for s in self._free] + list(self._busy)

    def close(self) -> None:
        """Unlink every segment (a receiver's own mapping stays valid). Idempotent."""
        with self._lock:
            self._closed = True
            segs, self._free = self._free, []
            busy, self._busy = self._busy, {}
        for seg in [*segs, *busy.values()]:
            _drop(seg)  # a receiver's map of it stays valid until it lets go


def _drop(seg: _Segment) -> None:
    unlink([seg.name])
    try:
        seg.mem.close()
    except BufferError:  # still exported somewhere: it unmaps when that goes
        pass


def map_pooled(name: str, size: int, on_release: Callable[[str], None]) -> memoryview:
    """Map the sender's segment ``name`` shared and writable; ``on_release(name)`` runs (on
    whatever thread drops the last reference) once nothing uses the returned view any more."""
    path = _path(name)
    try:
        fd = os.open(path, os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError as e:
        raise FileNotFoundError(f"shared-memory segment {name} is gone (its sender closed)") from e
    try:
        capacity = os.fstat(fd).st_size
        if capacity < size:
            raise ValueError(f"shared-memory segment {name} has {capacity} bytes, expected at least {size}")
        mem = _Mapped(fd, capacity, flags=mmap.MAP_SHARED, prot=mmap.PROT_READ | mmap.PROT_WRITE)
    finally:
        os.close(fd)
    weakref.finalize(mem, on_release, name)
    return memoryview(mem)[:size]


class Exchange:
    """The shared memory of one Calls stream, on either end (client or actor host).

    ``pool``: this end's reusable segments, for the large buffers it sends; the peer names them
    back in ``released`` (``peer_released``) once its values let go of them. The peer's segments
    this end maps are remembered (``saw``); when a value using one is gone, ``on_release`` (any
    thread, from the GC) has ``send_release(name)`` called on the loop, which names it in this
    end's next batch. ``close`` (when the stream ends) unlinks this end's segments and the
    peer's it has seen, and, on a host whose client shares its pid namespace (``peer_pid``),
    every file of that client once it is gone: segments of calls it had queued and never sent.
    Loop thread, except ``on_release``.
    """

    def __init__(
        self, loop: asyncio.AbstractEventLoop, send_release: Callable[[str], None], peer_pid: int | None = None
    ) -> None:
        self.pool = Pool()
        self.peer_pid = peer_pid
        self._seen: set[str] = set()
        self._loop = loop
        self._send_release = send_release
        self.closed = False

    def saw(self, shared: Iterable[SharedBuffer]) -> None:
        """The peer's segments a payload maps (its ``shared``)."""
        self._seen.update(s.name for s in shared)

    def unused(self, shared: Iterable[SharedBuffer]) -> None:
        """The peer's segments of a payload nobody will map (its call was cancelled): named back
        at once, or the peer keeps them busy until the stream ends. Loop thread."""
        for s in shared:
            self._released(s.name)

    def peer_released(self, names: Iterable[str]) -> None:
        self.pool.release(names)

    def on_release(self, name: str) -> None:
        """A peer segment this end mapped is no longer used (any thread, from the GC)."""
        try:
            self._loop.call_soon_threadsafe(self._released, name)
        except RuntimeError:  # the loop is closed: the segment went with the stream
            pass

    def _released(self, name: str) -> None:
        if not self.closed:
            self._send_release(name)

    def close(self) -> None:
        """Unlink what this stream leaves behind (idempotent)."""
        if self.closed:
            return
        self.closed = True
        self.pool.close()
        unlink(self._seen)
        self._seen.clear()
        if self.peer_pid is not None:
            self._remove_if_peer_gone(self.peer_pid)

    def _remove_if_peer_gone(self, pid: int, tries: int = 5) -> None:
        """A socket closes a moment before its process is reaped, so look again a few times."""
        if not alive(pid):
            remove_owned_by(pid)
        elif tries > 1:
            self._loop.call_later(0.5, self._remove_if_peer_gone, pid, tries - 1)
