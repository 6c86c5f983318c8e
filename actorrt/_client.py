"""The client: ``actorrt.connect()`` and the ``Cluster`` it yields.

``Cluster`` holds one ``ClientSession`` stream to the master (placements, deaths) and one data
connection per actor. With no address it first starts an embedded cluster: a master and one
worker daemon with all local cores, in this process, on the same loop.

Used as ``async with connect()`` everything runs on the caller's loop. Used as ``with connect()``
(a plain script) the cluster runs on a background loop thread, and ``CallFuture.result()``
blocks the caller's thread only.
"""

from __future__ import annotations

import asyncio
import atexit
import errno
import fnmatch
import glob
import itertools
import logging
import os
import socket
import stat
import threading
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any, Iterable, Sequence

import grpc
from google.protobuf.descriptor import FieldDescriptor

from actorrt import _rpc
from actorrt._errors import ActorDiedError, ClusterConnectionError, MasterUnreachableError, PlacementError
from actorrt._future import CallFuture, spawn
from actorrt._handle import ActorConnection, ActorHandle
from actorrt._logs import print_actor_output
from actorrt._serialization import describe_size, dumps, ship_local_modules
from actorrt._table import SLOT_NOT_READY
from actorrt.v1 import actor_host_pb2
from actorrt.v1 import common_pb2
from actorrt.v1 import master_pb2 as pb
from actorrt.v1 import master_pb2_grpc as pb_grpc

__all__ = ["connect", "Cluster", "ClusterStatus", "current_cluster", "kill"]

log = logging.getLogger("actorrt.client")

_current: Cluster | None = None
PLACE_ATTEMPTS = 5  # placements of one actor whose host was gone before its constructor ran
DEATH_GRACE_S = 2.0  # how long a construction reported dead may still say how it ended


def current_cluster() -> Cluster:
    """The cluster of the innermost open ``connect()``; raises if there is none."""
    if _current is None or _current.closed:
        raise ClusterConnectionError("not connected: open a cluster first with 'async with actorrt.connect():'")
    return _current


@dataclass
class ClusterStatus:
    """A snapshot of the cluster table. ``str()`` gives the table ``actorrt status`` prints."""

    address: str
    uptime_s: float
    nodes: list[dict[str, Any]] = field(default_factory=list)
    actors: list[dict[str, Any]] = field(default_factory=list)
    clients: list[dict[str, Any]] = field(default_factory=list)
    placements_waiting: int = 0

    @property
    def slots_total(self) -> int:
        return sum(n["cpus"] for n in self.nodes)

    @property
    def slots_used(self) -> int:
        return sum(n["cpus_used"] for n in self.nodes)

    @property
    def slots_free(self) -> int:
        return self.slots_total - self.slots_used

    @classmethod
    def from_proto(cls, msg: pb.GetClusterStatusResponse) -> ClusterStatus:
        def rows(items: Iterable[Any]) -> list[dict[str, Any]]:
            return [_to_dict(m) for m in items]

        return cls(
            address=msg.address,
            uptime_s=msg.uptime_s,
            nodes=rows(msg.nodes),
            actors=rows(msg.actors),
            clients=rows(msg.clients),
            placements_waiting=msg.placements_waiting,
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "address": self.address,
            "uptime_s": round(self.uptime_s, 1),
            "slots": {"total": self.slots_total, "used": self.slots_used, "free": self.slots_free},
            "placements_waiting": self.placements_waiting,
            "nodes": self.nodes,
            "actors": self.actors,
            "clients": self.clients,
        }

    def __str__(self) -> str:
        from actorrt._ops import format_status

        return format_status(self)


_INT64_TYPES = frozenset(
    {
        FieldDescriptor.TYPE_INT64, FieldDescriptor.TYPE_UINT64, FieldDescriptor.TYPE_SINT64,
        FieldDescriptor.TYPE_FIXED64, FieldDescriptor.TYPE_SFIXED64,
    }
)
_FIELDS: dict[str, list[tuple[str, str]]] = {}


def _to_dict(m: Any) -> dict[str, Any]:
    """What ``MessageToDict(m, preserving_proto_field_name=True,
    always_print_fields_with_no_presence=True)`` gives for the status messages (64-bit integers
    as strings, every field present), about 10x faster: ``status`` at 20,000 actors converts
    each row. Scalars, nested messages and repeated scalars only (all the status rows hold)."""
    desc = m.DESCRIPTOR
    fields = _FIELDS.get(desc.full_name)
    if fields is None:
        fields = []
        for f in desc.fields:
            if f.type == FieldDescriptor.TYPE_MESSAGE:
                kind = "msg"
            elif f.type in _INT64_TYPES:
                kind = "int64"
            elif f.type == FieldDescriptor.TYPE_ENUM:
                raise TypeError(f"{desc.full_name}.{f.name}: enums are not converted")
            else:
                kind = "plain"
            if f.is_repeated:
                if kind == "msg":
                    raise TypeError(f"{desc.full_name}.{f.name}: repeated messages are not converted")
                kind = "list_" + kind
            fields.append((f.name, kind))
        _FIELDS[desc.full_name] = fields
    out: dict[str, Any] = {}
    for name, kind in fields:
        value = getattr(m, name)
        if kind == "plain":
            out[name] = value
        elif kind == "int64":
            out[name] = str(value)
        elif kind == "msg":
            out[name] = _to_dict(value)
        elif kind == "list_int64":
            out[name] = [str(v) for v in value]
        else:
            out[name] = list(value)
    return out


MAX_FILES_BYTES = 2**31 - 2**24  # ConstructActor carries the files, and a protobuf message holds < 2 GiB


@dataclass
class _Found:
    """What ``files=`` patterns found: entries keyed by their path in the actor's folder."""

    entries: dict[str, tuple[Path | None, int]] = field(default_factory=dict)  # rel -> (file or None: a folder, mode)
    total_bytes: int = 0
    skipped: list[str] = field(default_factory=list)  # "path (why)": loops, broken links, devices
    skipped_now: list[str] = field(default_factory=list)  # those of the pattern at hand

    def skip(self, note: str) -> None:
        if note not in self.skipped_now:
            self.skipped_now.append(note)
        if note not in self.skipped:
            self.skipped.append(note)


def _collect_files(patterns: Sequence[str], max_bytes: int = MAX_FILES_BYTES) -> list[actor_host_pb2.ShippedFile]:
    """What ``connect(files=...)`` ships to every actor: the files that the glob patterns match,
    and the folders they match with everything in them (empty folders too, hidden files too),
    at the same relative paths; absolute and ``..`` patterns land under their last fixed folder.

    Symlinks are followed; one that loops (a folder linking to itself or to a folder above it)
    or leads nowhere is skipped with a warning, as are devices and pipes. A pattern that matches
    nothing, or nothing but such entries, raises ``FileNotFoundError``; files that add up to
    more than ``max_bytes`` raise ``ValueError`` before anything is read.
    """
    found = _Found()
    for pattern in patterns:
        found.skipped_now, entries_before = [], len(found.entries)
        matches = _glob(pattern, found)
        if not matches and not found.skipped_now:
            raise FileNotFoundError(f"files=: {pattern!r} matches no file (relative to {os.getcwd()})")
        base = _fixed_base(pattern)
        for match in matches:
            rel = os.path.normpath(os.path.relpath(match, base) if base is not None else match)
            if rel in found.entries:  # already shipped, e.g. inside a folder that '**' matched too
                continue
            _add_path(match, "" if rel == "." else rel, _real_chain(os.path.dirname(os.path.abspath(match))), found)
        if len(found.entries) == entries_before and found.skipped_now:
            what = found.skipped_now
            more = f" and {len(what) - 3} more" if len(what) > 3 else ""
            raise FileNotFoundError(f"files=: {pattern!r} matches nothing to ship, only {', '.join(what[:3])}{more}")
    if found.skipped:
        log.warning("files=: skipped %d entries: %s", len(found.skipped), ", ".join(found.skipped[:5]))
    if found.total_bytes > max_bytes:
        files = sum(1 for source, _ in found.entries.values() if source is not None)
        raise ValueError(
            f"files=: the {files} matched files add up to {describe_size(found.total_bytes)}, over the "
            f"{describe_size(max_bytes)} that every actor's construction may carry; ship less (or raise "
            f"connect(max_payload_mb=...), up to 2 GiB)"
        )
    shipped = []
    for rel, (source, mode) in found.entries.items():
        try:
            data = source.read_bytes() if source is not None else b""
        except OSError as e:
            raise OSError(e.errno, f"files=: cannot read {str(source)!r}: {e.strerror}") from e
        shipped.append(actor_host_pb2.ShippedFile(path=rel, data=data, mode=mode))
    return shipped


def _fixed_base(pattern: str) -> str | None:
    """For an absolute pattern or one that leaves the working folder (``..``), the folder that
    its matches are named relative to: its part before the first wildcard (a plain path: its
    parent). None for the others, whose matches keep their relative paths."""
    norm = os.path.normpath(pattern)
    if not os.path.isabs(norm) and norm != ".." and not norm.startswith("../"):
        return None
    if not glob.has_magic(norm):  # its parent; '..' has no name of its own: its contents ship
        return norm if os.path.basename(norm) == ".." else os.path.dirname(norm)
    parts = norm.split("/")
    fixed = list(itertools.takewhile(lambda p: not glob.has_magic(p), parts))
    return "/".join(fixed) or "/"


def _why(path: str, e: OSError) -> str:
    if e.errno == errno.ELOOP:
        return f"{path} (a symlink loop)"
    if e.errno == errno.ENOENT and os.path.islink(path):
        return f"{path} (a broken symlink)"
    return f"{path} ({e.strerror or e})"


def _real_chain(folder: str) -> frozenset[tuple[int, int]]:
    """(device, inode) of the real ``folder`` and of each folder above it, up to ``/``."""
    chain = set()
    real = Path(os.path.realpath(folder))
    for d in (real, *real.parents):
        try:
            st = d.stat()
        except OSError:
            continue
        chain.add((st.st_dev, st.st_ino))
    return frozenset(chain)


def _add_path(path: str, rel: str, chain: frozenset[tuple[int, int]], found: _Found) -> None:
    """Add the file or folder (with everything below) at ``path`` as ``rel``; ``chain``: the
    folders above it, which a folder in it must not be (that would loop)."""
    try:
        st = os.stat(path)
    except OSError as e:
        found.skip(_why(path, e))
        return
    if stat.S_ISREG(st.st_mode):
        if rel not in found.entries:
            found.entries[rel] = (Path(path), st.st_mode & 0o777)
            found.total_bytes += st.st_size
        return
    if not stat.S_ISDIR(st.st_mode):
        found.skip(f"{path} (not a file or folder)")
        return
    if (st.st_dev, st.st_ino) in chain:
        found.skip(f"{path} (a symlink loop)")
        return
    if rel:
        found.entries.setdefault(rel, (None, stat.S_IFDIR | (st.st_mode & 0o777)))
    try:
        names = sorted(os.listdir(path))
    except OSError as e:
        found.skip(_why(path, e))
        return
    below = chain | {(st.st_dev, st.st_ino)}
    for name in names:
        _add_path(os.path.join(path, name), f"{rel}/{name}" if rel else name, below, found)


def _glob(pattern: str, found: _Found) -> list[str]:
    """``glob.glob(pattern, recursive=True)``, except that ``**`` never goes round a symlink
    loop (such links are noted in ``found.skipped``), so a loop cannot make it hang or fail."""
    if not glob.has_magic(pattern):
        return [pattern] if os.path.lexists(pattern) else []
    parts = [p for p in pattern.split("/") if p not in ("", ".")]
    current = ["/" if pattern.startswith("/") else ""]
    for i, part in enumerate(parts):
        last = i == len(parts) - 1
        following: list[str] = []
        for base in current:
            if part == "**":
                chain = _real_chain(os.path.dirname(os.path.abspath(base or ".")))
                following.extend(_descendants(base, chain, found, dirs_only=not last))
            elif not glob.has_magic(part):
                path = os.path.join(base, part)
                if os.path.lexists(path) if last else os.path.isdir(path):
                    following.append(path)
            else:
                try:
                    names = sorted(e.name for e in os.scandir(base or ".") if last or e.is_dir())
                except OSError:
                    continue
                show_hidden = part.startswith(".")
                following.extend(
                    os.path.join(base, n)
                    for n in names
                    if (show_hidden or not n.startswith(".")) and fnmatch.fnmatchcase(n, part)
                )
        current = following
    return sorted({p for p in current if p})


def _descendants(base: str, chain: frozenset[tuple[int, int]], found: _Found, dirs_only: bool) -> list[str]:
    """What ``base/**`` matches: ``base`` itself and every entry below it that is not hidden
    (only the folders if ``dirs_only``), never descending into a folder that contains itself."""
    try:
        st = os.stat(base or ".")
    except OSError as e:
        found.skip(_why(base, e))
        return []
    if not stat.S_ISDIR(st.st_mode):
        return []
    if (st.st_dev, st.st_ino) in chain:
        found.skip(f"{base} (a symlink loop)")
        return []
    out = [os.path.join(base, "")]
    try:
        entries = sorted(os.scandir(base or "."), key=lambda e: e.name)
    except OSError:
        return out
    below = chain | {(st.st_dev, st.st_ino)}
    for entry in entries:
        if entry.name.startswith("."):
            continue
        path = os.path.join(base, entry.name)
        try:
            is_dir = entry.is_dir()
        except OSError:
            is_dir = False
        if is_dir:
            out.extend(_descendants(path, below, found, dirs_only))
        elif not dirs_only:
            out.append(path)
    return out


class Cluster:
    """A connection to an actorrt cluster. Get one from ``actorrt.connect()``."""

    def __init__(
        self,
        address: str | None,
        *,
        token: str | None,
        files: Sequence[str],
        timeout: float,
        placement_timeout: float,
        embedded_cpus: int | None,
        tls: _rpc.TLS | None,
        max_payload_mb: int,
        preload: Sequence[str] = (),
        log_to_driver: bool = True,
    ) -> None:
        self._preload = tuple(preload)
        self.address = address or os.environ.get("ACTORRT_ADDRESS") or ""
        self.tls = tls if self.address else None  # the embedded cluster stays on loopback, in-process
        if max_payload_mb < 1:
            raise ValueError(f"connect: max_payload_mb must be >= 1, got {max_payload_mb}")
        self.max_payload_bytes = max_payload_mb * 2**20
        self.token = _rpc.load_token(token) if self.address else (token or _rpc.new_token())
        self.client_id = uuid.uuid4().hex[:16]
        self.timeout = timeout
        self.placement_timeout = placement_timeout
        self.closed = False
        self.log_to_driver = log_to_driver
        self.loop: asyncio.AbstractEventLoop = None  # type: ignore[assignment]
        self._files_patterns = tuple(files)
        self._files: list[actor_host_pb2.ShippedFile] = []
        self._embedded_cpus = embedded_cpus
        self._embedded: list[Any] = []
        self._channel: grpc.aio.Channel | None = None
        self._session: grpc.aio.StreamStreamCall | None = None
        self._reader: asyncio.Task[None] | None = None
        self._writer: asyncio.Task[None] | None = None
        self._outbox: asyncio.Queue[pb.ClientEvent] | None = None
        self._session_up: asyncio.Event | None = None
        self._requests = itertools.count(1)
        self._placing: dict[int, asyncio.Future[pb.ActorPlaced]] = {}
        self._place_msgs: dict[int, pb.ClientEvent] = {}
        self._actors: dict[str, ActorConnection] = {}
        self._deaths: dict[str, str] = {}
        self._death_waiters: dict[str, list[asyncio.Future[str]]] = {}
        self._thread: threading.Thread | None = None
        self._previous: Cluster | None = None

    @property
    def embedded(self) -> bool:
        return bool(self._embedded)

    # ---- lifecycle (cluster loop) -------------------------------------------------------------

    async def _start(self) -> None:
        self.loop = asyncio.get_running_loop()
        self._files = _collect_files(self._files_patterns, min(self.max_payload_bytes, MAX_FILES_BYTES))
        if not self.address:
            await self._start_embedded()
        self._channel = _rpc.open_channel(self.address, self.tls)
        await self._open_session()
        self._outbox = asyncio.Queue()
        self._session_up = asyncio.Event()
        self._session_up.set()
        self._reader = asyncio.create_task(self._read_notices())
        self._writer = asyncio.create_task(self._write_events())

    async def _start_embedded(self) -> None:
        from actorrt._master import Master
        from actorrt._worker import WorkerDaemon

        master = Master("127.0.0.1", 0, token=self.token)
        await master.start()
        self._embedded.append(master)
        self.address = master.address
        # The daemon does not echo actors' lines here: they reach this process's terminal as
        # forwarded ActorOutput, like on a real cluster, so log_to_driver=False silences them.
        worker = WorkerDaemon(
            self.address, token=self.token, cpus=self._embedded_cpus, reconnect=False, preload=self._preload,
            echo_output=False,
        )
        self._embedded.append(worker)
        await worker.start()

    async def _open_session(self) -> None:
        assert self._channel is not None
        stub = pb_grpc.MasterStub(self._channel)
        self._session = stub.ClientSession(metadata=_rpc.auth_metadata(self.token))
        try:
            await self._session.write(
                pb.ClientEvent(
                    open_session=pb.OpenSession(
                        version=_rpc.PROTOCOL_VERSION,
                        client_id=self.client_id,
                        hostname=socket.gethostname(),
                        pid=os.getpid(),
                        mute_actor_output=not self.log_to_driver,
                    )
                )
            )
            first = await asyncio.wait_for(self._session.read(), self.timeout)
        except grpc.RpcError as e:
            # A write that races the server's refusal fails with INTERNAL; the call's own
            # status says why it really ended.
            # A write that races the server's refusal can fail with INTERNAL and hide why; a
            # unary call gets the real status (UNAUTHENTICATED, say).
            if e.code() in (grpc.StatusCode.INTERNAL, grpc.StatusCode.UNKNOWN):
                try:
                    await stub.GetClusterStatus(
                        pb.GetClusterStatusRequest(), metadata=_rpc.auth_metadata(self.token), timeout=self.timeout
                    )
                except grpc.RpcError as probe:
                    e = probe
            raise _rpc.translate(e, "connect", self.address) from e
        except asyncio.TimeoutError as e:
            self._session.cancel()
            raise MasterUnreachableError(
                f"connect: no actorrt master answered at {self.address} within {self.timeout:g}s"
            ) from e
        if first is grpc.aio.EOF or not first.HasField("session_opened"):
            raise ClusterConnectionError(f"connect: the master at {self.address} closed the session")

    async def _read_notices(self) -> None:
        """Handle master notices; reopen the session with backoff if the master goes away."""
        backoff = 0.1
        while True:
            assert self._session is not None
            try:
                while (notice := await self._session.read()) is not grpc.aio.EOF:
                    backoff = 0.1
                    self._on_notice(notice)
                if self.closed:
                    return
                reason = "the master closed the session"
            except grpc.RpcError as e:
                if self.closed:
                    return
                reason = f"{e.code().name}: {e.details()}"
            except asyncio.CancelledError:
                return
            log.warning("lost the master at %s (%s); reconnecting", self.address, reason)
            assert self._session_up is not None and self._outbox is not None
            self._session_up.clear()
            while not self.closed:
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, 2.0)
                try:
                    await self._open_session()
                except (ClusterConnectionError, grpc.RpcError):
                    continue
                for msg in self._place_msgs.values():  # the new master never saw these
                    self._outbox.put_nowait(msg)
                self._session_up.set()
                break

    async def _write_events(self) -> None:
        """The session's only writer: gRPC streams take one write at a time."""
        assert self._outbox is not None and self._session_up is not None
        while True:
            msg = await self._outbox.get()
            try:
                while True:
                    await self._session_up.wait()
                    session = self._session
                    assert session is not None
                    try:
                        await session.write(msg)
                        break
                    except (grpc.RpcError, asyncio.InvalidStateError):
                        if self.closed:
                            return
                        if self._session is session:  # the reader notices and reopens
                            self._session_up.clear()
            finally:
                self._outbox.task_done()

    def _on_notice(self, notice: pb.ClientNotice) -> None:
        kind = notice.WhichOneof("notice")
        if kind == "actor_placed":
            fut = self._placing.pop(notice.actor_placed.request_id, None)
            self._place_msgs.pop(notice.actor_placed.request_id, None)
            if fut is not None and not fut.done():
                fut.set_result(notice.actor_placed)
            elif fut is None or fut.done():  # nobody waits any more: give the slot back
                self._send_release(notice.actor_placed.actor_id, "its placement was abandoned")
        elif kind == "placement_failed":
            fut = self._placing.pop(notice.placement_failed.request_id, None)
            self._place_msgs.pop(notice.placement_failed.request_id, None)
            if fut is not None and not fut.done():
                fut.set_exception(PlacementError(notice.placement_failed.reason))
        elif kind == "actor_output":
            if self.log_to_driver:
                print_actor_output(notice.actor_output)
        elif kind == "actor_died":
            died = notice.actor_died
            self._deaths[died.actor_id] = died.cause
            conn = self._actors.pop(died.actor_id, None)
            if conn is not None:
                conn.mark_dead(died.cause)
                asyncio.ensure_future(conn.close(died.cause))
            for waiter in self._death_waiters.pop(died.actor_id, []):
                if not waiter.done():
                    waiter.set_result(died.cause)

    async def death_cause(self, actor_id: str, wait_s: float) -> str | None:
        """Why the master says ``actor_id`` died, waiting up to ``wait_s`` for the notice."""
        if actor_id in self._deaths:
            return self._deaths[actor_id]
        waiter: asyncio.Future[str] = self.loop.create_future()
        self._death_waiters.setdefault(actor_id, []).append(waiter)
        try:
            return await asyncio.wait_for(waiter, wait_s)
        except asyncio.TimeoutError:
            return None

    async def _close(self) -> None:
        if self.closed:
            return
        self.closed = True
        for conn in list(self._actors.values()):
            await conn.close("its client closed the cluster connection")
        for fut in self._placing.values():
            if not fut.done():
                fut.set_exception(ClusterConnectionError("the cluster connection was closed"))
        if self._outbox is not None:
            try:
                await asyncio.wait_for(self._outbox.join(), 2.0)
            except asyncio.TimeoutError:
                pass
        if self._writer is not None:
            self._writer.cancel()
        if self._session is not None:
            try:
                await self._session.write(pb.ClientEvent(close_session=pb.CloseSession()))
                await self._session.done_writing()
                if self._reader is not None:
                    await asyncio.wait_for(asyncio.shield(self._reader), 2.0)
            except (grpc.RpcError, asyncio.TimeoutError, asyncio.InvalidStateError):
                pass
            self._session.cancel()
        if self._reader is not None:
            self._reader.cancel()
        if self._channel is not None:
            await self._channel.close(grace=None)
        for service in reversed(self._embedded):
            await service.close()

    # ---- placement and actors (cluster loop) ----------------------------------------------------

    def _send_release(self, actor_id: str, reason: str) -> None:
        if self._outbox is not None and not self.closed:
            self._outbox.put_nowait(pb.ClientEvent(release_actor=pb.ReleaseActor(actor_id=actor_id, reason=reason)))

    async def create_actor(self, cls: type, args: tuple[Any, ...], kwargs: dict[str, Any]) -> ActorHandle[Any]:
        """Place an actor and construct it on its host (cluster loop); every wait is bounded.

        A placement whose host was gone before the constructor ran (its warm host had just
        died: connection refused, or the worker said the slot was not ready) is released and
        placed again, up to ``PLACE_ATTEMPTS`` times within the placement timeout. Only a
        constructor that ran and raised, or a host that went away while constructing, fails it.
        """
        from actorrt._remote import options_of

        opts = options_of(cls)
        class_name = cls.__qualname__
        ship_local_modules()
        spec = _dump_spec(cls, args, kwargs)
        if self.closed:
            raise ClusterConnectionError("the cluster connection is closed")
        timeout = opts.placement_timeout if opts.placement_timeout is not None else self.placement_timeout
        deadline = self.loop.time() + timeout if timeout > 0 else None
        resources = common_pb2.Resources(
            num_cpus=opts.num_cpus, num_gpus=opts.num_gpus, max_memory_mb=opts.max_memory_mb or 0
        )
        for attempt in range(1, PLACE_ATTEMPTS + 1):
            left = max(0.001, deadline - self.loop.time()) if deadline is not None else 0.0
            placed = await self._request_placement(class_name, resources, left, timeout)
            conn = ActorConnection(self, placed.actor_id, placed.endpoint, cls, class_name)
            construct = actor_host_pb2.ConstructActor(
                version=_rpc.PROTOCOL_VERSION,
                actor_id=placed.actor_id,
                class_name=class_name,
                spec=spec,
                max_concurrency=opts.max_concurrency,
                gpu_ids=placed.gpu_ids,
                files=self._files,
                max_payload_bytes=self.max_payload_bytes,
            )
            try:
                await self._construct(conn, construct)
            except ActorDiedError as e:
                retry = _never_constructed(e, self._deaths.get(placed.actor_id))
                out_of_time = deadline is not None and self.loop.time() >= deadline
                if not retry or attempt == PLACE_ATTEMPTS or out_of_time:
                    self._send_release(placed.actor_id, "its constructor failed" if not retry else
                                       "its host was gone before its constructor ran")
                    raise
                self._send_release(placed.actor_id, "its host was gone before its constructor ran")
                log.info("placing %s again (attempt %d of %d): %s", class_name, attempt + 1, PLACE_ATTEMPTS, e.cause)
                await asyncio.sleep(0.05 * attempt)  # the worker's SlotLost reaches the master meanwhile
                continue
            except BaseException:
                self._send_release(placed.actor_id, "its constructor failed")
                raise
            if self.closed:  # closed while constructing: _close did not see this connection
                await conn.close("its client closed the cluster connection")
                raise ClusterConnectionError("the cluster connection was closed")
            self._actors[placed.actor_id] = conn
            return ActorHandle(conn)
        raise AssertionError("unreachable")  # the last attempt returns or raises

    async def _request_placement(
        self, class_name: str, resources: common_pb2.Resources, timeout_s: float, asked_s: float
    ) -> pb.ActorPlaced:
        """Ask the master for a slot; waits at most ``timeout_s`` (0: forever) plus a margin."""
        request_id = next(self._requests)
        msg = pb.ClientEvent(
            place_actor=pb.PlaceActor(
                request_id=request_id, resources=resources, class_name=class_name, timeout_s=timeout_s
            )
        )
        fut: asyncio.Future[pb.ActorPlaced] = self.loop.create_future()
        self._placing[request_id] = fut
        self._place_msgs[request_id] = msg
        assert self._outbox is not None
        self._outbox.put_nowait(msg)
        try:
            # The master enforces the timeout; the margin covers a master that went away.
            return await asyncio.wait_for(fut, timeout_s + 10.0 if timeout_s > 0 else None)
        except asyncio.TimeoutError as e:
            raise PlacementError(f"no placement for {class_name} within {asked_s:g}s (no answer)") from e
        finally:
            self._placing.pop(request_id, None)
            self._place_msgs.pop(request_id, None)

    async def _construct(self, conn: ActorConnection, construct: actor_host_pb2.ConstructActor) -> None:
        """``conn.open``, bounded as a whole (the connect and the first write too). Raises
        ActorDiedError for every way the host is gone: its cause is the connection's own error
        where there is one (it tells a host never reached from one that died constructing), else
        the master's word that the actor died. ``conn`` joins ``self._actors`` only once built."""
        what = f"could not construct {conn.class_name}"
        bound = self.timeout + 5.0 if self.timeout > 0 else None
        died: asyncio.Future[str] = self.loop.create_future()
        if conn.actor_id in self._deaths:
            died.set_result(self._deaths[conn.actor_id])
        waiters = self._death_waiters.setdefault(conn.actor_id, [])
        waiters.append(died)
        opening = asyncio.ensure_future(conn.open(construct, self.timeout))
        try:
            await asyncio.wait({opening, died}, timeout=bound, return_when=asyncio.FIRST_COMPLETED)
            if died.done() and not opening.done():  # let the connection say how it ended
                await asyncio.wait({opening}, timeout=DEATH_GRACE_S)
        except asyncio.CancelledError:  # our caller cancelled us
            opening.cancel()
            await asyncio.gather(opening, return_exceptions=True)
            await conn.close("its construction was cancelled")
            raise
        finally:
            if died in waiters:
                waiters.remove(died)
            if not waiters:
                self._death_waiters.pop(conn.actor_id, None)
        if opening.done():
            opening.result()  # its error: RemoteError, ActorDiedError (the connection's own)
            if not died.done():
                return
            detail = died.result()  # constructed, but reported dead meanwhile
        else:
            opening.cancel()
            await asyncio.gather(opening, return_exceptions=True)
            detail = died.result() if died.done() else f"no answer within {bound:g}s"
        await conn.close(f"{what}: {detail}")
        raise ActorDiedError(conn.actor_id, f"{what}: {detail}")

    async def kill_actor(self, handle: ActorHandle[Any], wait_s: float = 10.0) -> None:
        conn = handle._conn
        actor_id = conn.actor_id
        if actor_id in self._deaths:
            return
        await conn.close("killed by actorrt.kill()")
        self._send_release(actor_id, "killed by actorrt.kill()")
        await self.death_cause(actor_id, wait_s)  # returns once the slot is free again

    async def _status(self) -> ClusterStatus:
        assert self._channel is not None
        stub = pb_grpc.MasterStub(self._channel)
        try:
            msg = await stub.GetClusterStatus(
                pb.GetClusterStatusRequest(), metadata=_rpc.auth_metadata(self.token), timeout=self.timeout
            )
        except grpc.RpcError as e:
            raise _rpc.translate(e, "status", self.address) from e
        return ClusterStatus.from_proto(msg)

    # ---- public API (any thread) ----------------------------------------------------------------

    def status(self) -> CallFuture[ClusterStatus]:
        """Nodes, slots (free/used), actors and clients. Await it, or ``.result()``."""
        return spawn(self.loop, self._status)

    def kill(self, handle: ActorHandle[Any]) -> CallFuture[None]:
        return spawn(self.loop, lambda: self.kill_actor(handle))

    # ---- context managers -------------------------------------------------------------------

    async def __aenter__(self) -> Cluster:
        global _current
        try:
            await self._start()
        except BaseException:
            await self._close()
            raise
        self._previous, _current = _current, self
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        global _current
        try:
            await self._close()
        finally:
            if _current is self:
                _current = self._previous

    def __enter__(self) -> Cluster:
        """Blocking use from a plain script: the cluster runs on a background loop thread."""
        ready: asyncio.Future[None] | None = None
        started = threading.Event()
        holder: dict[str, Any] = {}

        def run_loop() -> None:
            try:
                import uvloop

                loop = uvloop.new_event_loop()
            except ImportError:
                loop = asyncio.new_event_loop()
            asyncio.set_event_loop(loop)
            holder["loop"] = loop
            started.set()
            loop.run_forever()
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.close()

        self._thread = threading.Thread(target=run_loop, name="actorrt-loop", daemon=True)
        self._thread.start()
        started.wait()
        loop = holder["loop"]
        self.loop = loop
        ready = asyncio.run_coroutine_threadsafe(self.__aenter__(), loop)  # type: ignore[assignment]
        try:
            ready.result()  # type: ignore[union-attr]
        except BaseException:
            self._stop_thread()
            raise
        atexit.register(self._close_from_thread)
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        atexit.unregister(self._close_from_thread)
        self._close_from_thread()

    def _close_from_thread(self) -> None:
        if self._thread is None or not self._thread.is_alive():
            return
        try:
            asyncio.run_coroutine_threadsafe(self.__aexit__(None, None, None), self.loop).result(30)
        finally:
            self._stop_thread()

    def _stop_thread(self) -> None:
        if self._thread is not None:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(10)
            self._thread = None

    def __repr__(self) -> str:
        kind = "embedded" if self.embedded else "remote"
        return f"<Cluster {kind} {self.address} client={self.client_id}>"


def _dump_spec(cls: type, args: tuple[Any, ...], kwargs: dict[str, Any]) -> common_pb2.Payload:
    from actorrt._errors import SerializationError
    from actorrt._serialization import dump_args

    try:
        return dumps((cls, args, kwargs))
    except Exception as e:  # noqa: BLE001
        dump_args(f"{cls.__qualname__}.__init__", args, kwargs)  # names a bad argument if one is
        raise SerializationError(f"class {cls.__qualname__} cannot be pickled: {e}") from e


def _never_constructed(e: ActorDiedError, death: str | None) -> bool:
    """Whether a failed construction never reached a host, so placing again runs the constructor
    at most once: the connection was refused (the warm host had just died), or the worker said the
    slot was not ready."""
    if death is not None and death.startswith(SLOT_NOT_READY):
        return True
    cause = e.__cause__
    return (
        isinstance(cause, grpc.RpcError)
        and cause.code() == grpc.StatusCode.UNAVAILABLE
        and "failed to connect" in (cause.details() or "").lower()
    )


def connect(
    address: str | None = None,
    *,
    token: str | None = None,
    files: Sequence[str] = (),
    timeout: float = 30.0,
    placement_timeout: float = 300.0,
    num_cpus: int | None = None,
    tls_ca: str | None = None,
    tls_cert: str | None = None,
    tls_key: str | None = None,
    max_payload_mb: int = 1024,
    preload: Sequence[str] = (),
    log_to_driver: bool = True,
) -> Cluster:
    """Connect to a cluster: ``async with actorrt.connect() as cluster`` (or plain ``with``).

    Args:
        address: the master's ``host:port``; else ``ACTORRT_ADDRESS``; else start an embedded
            cluster (a master and a worker with ``num_cpus`` slots, default all cores) that stops
            when the block ends.
        token: the cluster token; else ``ACTORRT_TOKEN``; else the file ``actorrt start`` wrote.
        files: glob patterns of data files copied into every actor's working directory.
        timeout: seconds to wait for the master, and for an actor's constructor to answer.
        placement_timeout: default seconds an actor waits for a free slot (0: forever).
        num_cpus: slots of the embedded cluster (default: all cores); ignored with an address.
        tls_ca: CA certificate (PEM file) that the cluster's certificates must be signed by;
            with it, every connection uses TLS. Also ``ACTORRT_TLS_CA``.
        tls_cert, tls_key: this client's certificate and key, for clusters that require mutual
            TLS. Also ``ACTORRT_TLS_CERT`` / ``ACTORRT_TLS_KEY``.
        max_payload_mb: the largest arguments a call may send, and the largest value an actor
            may return; a call over it fails alone, with a clear error.
        preload: modules the embedded cluster's warm actor hosts import before they take an
            actor (e.g. ``["torch"]``), so actors that need them start fast.
        log_to_driver: print what this connection's actors print (stdout and stderr, line by
            line, prefixed ``(Class pid=N id=XXXXXXXX)``) on this process's terminal. False
            turns it off for this connection; the lines still go to the actor's log file on its
            node (``actorrt logs ACTOR_ID``).
    """
    return Cluster(
        address,
        token=token,
        files=files,
        timeout=timeout,
        placement_timeout=placement_timeout,
        embedded_cpus=num_cpus,
        tls=_rpc.TLS.from_env(tls_ca, tls_cert, tls_key),
        max_payload_mb=max_payload_mb,
        preload=preload,
        log_to_driver=log_to_driver,
    )


def kill(handle: ActorHandle[Any]) -> CallFuture[None]:
    """Stop an actor and free its slot. Await it (or ``.result()``); pending calls fail."""
    return handle._conn.cluster.kill(handle)
