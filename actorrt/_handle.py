"""Actor handles and their data-plane connection straight to the actor host.

``ActorConnection`` owns one ``ActorHost.Calls`` stream. A call is serialised on the caller's
thread (so ``SerializationError`` comes at the call site), queued, and sent on the next loop
iteration together with every other call made meanwhile: one gRPC message carries many calls,
and a lone call still leaves at once. Replies come back batched and resolve futures by seq.
Connection state is touched on the cluster's event loop only.
"""

from __future__ import annotations

import asyncio
import inspect
import itertools
import threading
from typing import TYPE_CHECKING, Any, Generic, TypeVar

import grpc

from actorrt import _rpc, _shm, _wire
from actorrt._errors import ActorDiedError, RemoteError, SerializationError, rebuild_remote_error
from actorrt._future import CallFuture
from actorrt._serialization import (
    RAW_MIN,
    describe_size,
    dump_args,
    dump_args_parts,
    loads,
    payload_size,
    shared_names,
    to_payload,
)
from actorrt.v1 import actor_host_pb2 as pb
from actorrt.v1 import common_pb2

if TYPE_CHECKING:
    from actorrt._client import Cluster

__all__ = ["ActorHandle", "ActorConnection"]

T = TypeVar("T")
_CALLS_METHOD = "/actorrt.v1.ActorHost/Calls"


def _remote_error(what: str, failure: pb.RemoteFailure) -> RemoteError:
    cause: BaseException | None = None
    if failure.exception.pickle:
        try:
            cause = loads(failure.exception)
        except Exception:  # noqa: BLE001 - the type does not exist here: keep name and text
            cause = None
    return rebuild_remote_error(what, failure.type_name, failure.message, failure.traceback, cause)


class ActorConnection:
    """One actor's Calls stream, pending futures and outgoing batch."""

    def __init__(
        self, cluster: Cluster, actor_id: str, endpoint: str, cls: type, class_name: str
    ) -> None:
        self.cluster = cluster
        self.loop = cluster.loop
        self.actor_id = actor_id
        self.endpoint = endpoint
        self.cls = cls
        self.class_name = class_name
        self.dead: ActorDiedError | None = None
        self.set_attr_error: RemoteError | None = None
        self._seq = itertools.count(1)
        self._pending: dict[int, tuple[CallFuture[Any], str, int]] = {}
        # Large buffers go through /dev/shm once the host proved it shares it with us: ours in
        # this pool's segments; the host's segments we mapped are named in _released once we
        # let go of them (sent with the next batch), and unlinked by us too when we close.
        self.shm = False
        self._pool: _shm.Pool | None = None
        self._released: list[str] = []
        self._seen_host_segments: set[str] = set()
        # Calls are added straight into the next batch (cheaper than building a Call and
        # copying it into a CallBatch).
        self._out = pb.CallBatch()
        # Messages to send before _out, in order: earlier batches, and hand-encoded one-call
        # batches of calls with large inline buffers (``_wire``).
        self._queue: list[pb.CallBatch | bytes] = []
        self._wake = asyncio.Event()
        self._channel: grpc.aio.Channel | None = None
        self._call: grpc.aio.StreamStreamCall | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._loop_thread = threading.get_ident()

    async def open(self, construct: pb.ConstructActor, timeout_s: float) -> None:
        """Construct the actor; raises RemoteError if its __init__ raised, ActorDiedError if gone."""
        self._channel = _rpc.open_channel(self.endpoint, self.cluster.tls)
        # The stub's own serializer, except that pre-encoded batches (bytes) pass through.
        self._call = self._channel.stream_stream(
            _CALLS_METHOD, request_serializer=_wire.passthrough, response_deserializer=pb.ReplyBatch.FromString
        )(metadata=_rpc.auth_metadata(self.cluster.token))
        probe = _shm.make_probe()
        if probe is not None:
            construct.shm_probe = probe
        try:
            await self._call.write(pb.CallBatch(construct=construct))
            reply = await asyncio.wait_for(self._call.read(), timeout_s if timeout_s > 0 else None)
        except (grpc.RpcError, asyncio.TimeoutError) as e:
            await self._teardown()
            detail = e.details() if isinstance(e, grpc.RpcError) else f"no answer within {timeout_s:g}s"
            raise ActorDiedError(self.actor_id, f"could not construct {self.class_name}: {detail}") from e
        finally:
            if probe is not None:
                _shm.unlink([probe])
                construct.shm_probe = ""
        if reply is grpc.aio.EOF or not reply.replies:
            await self._teardown()
            raise ActorDiedError(self.actor_id, f"actor host closed the stream while constructing {self.class_name}")
        first = reply.replies[0]
        if first.HasField("error"):
            await self._teardown()
            raise _remote_error(f"{self.class_name}.__init__", first.error)
        self.shm = reply.shared_memory
        if self.shm:
            self._pool = _shm.Pool()
        self._tasks = [asyncio.create_task(self._read()), asyncio.create_task(self._write())]

    # ---- calls (any thread) -----------------------------------------------------------------

    def submit(self, kind: int, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> CallFuture[Any]:
        what = f"{self.class_name}.{name}"
        payload: common_pb2.Payload | None = None
        pool = self._pool if self.shm and (args or kwargs) else None
        if pool is None and (args or kwargs):
            data, raws = dump_args_parts(what, args, kwargs)
            inline = sum(r.nbytes for r in raws)
            self._check_size(what, len(data) + inline)
            if inline >= RAW_MIN:  # encoded now: the arguments are copied when the call is made
                seq = next(self._seq)
                encoded = _wire.call_batch(seq, name, kind, data, raws)
                del raws
                fut: CallFuture[Any] = CallFuture(loop=self.loop)
                if threading.get_ident() == self._loop_thread:
                    self._enqueue_encoded(seq, kind, encoded, fut, what)
                else:
                    self.loop.call_soon_threadsafe(self._enqueue_encoded, seq, kind, encoded, fut, what)
                return fut
            payload = to_payload(data, raws)
        try:
            if payload is None:
                payload = dump_args(what, args, kwargs, pool)
                if payload.buffers or payload.shared or len(payload.pickle) > 65536:
                    self._check_size(what, payload_size(payload))
        except BaseException:
            if pool is not None and payload is not None:
                pool.release(shared_names(payload))
            raise
        fut = CallFuture(loop=self.loop)
        if threading.get_ident() == self._loop_thread:
            self._enqueue(kind, name, payload, fut, what)
        else:
            self.loop.call_soon_threadsafe(self._enqueue, kind, name, payload, fut, what)
        return fut

    def _check_size(self, what: str, size: int) -> None:
        if size > self.cluster.max_payload_bytes:
            raise SerializationError(
                f"arguments of {what} are {describe_size(size)}, over the limit of "
                f"{describe_size(self.cluster.max_payload_bytes)} (connect(max_payload_mb=...)); nothing was sent"
            )

    def _enqueue_encoded(self, seq: int, kind: int, encoded: bytes, fut: CallFuture[Any], what: str) -> None:
        if self.dead is not None:
            fut.set_exception(self.dead)
            return
        if self.set_attr_error is not None and kind != pb.CALL_KIND_SET_ATTR:
            err, self.set_attr_error = self.set_attr_error, None
            fut.set_exception(err)
            return
        if self._out.calls:  # calls made before this one go first
            self._queue.append(self._out)
            self._out = pb.CallBatch()
        self._queue.append(encoded)
        self._pending[seq] = (fut, what, kind)
        self._wake.set()

    def _enqueue(self, kind: int, name: str, payload: common_pb2.Payload, fut: CallFuture[Any], what: str) -> None:
        if self.dead is not None:
            fut.set_exception(self.dead)
            return
        if self.set_attr_error is not None and kind != pb.CALL_KIND_SET_ATTR:
            if payload.shared and self._pool is not None:
                self._pool.release(shared_names(payload))
            err, self.set_attr_error = self.set_attr_error, None
            fut.set_exception(err)
            return
        seq = next(self._seq)
        call = self._out.calls.add(seq=seq, method=name, kind=kind)  # type: ignore[arg-type]
        if payload.pickle:
            call.args.CopyFrom(payload)
        self._pending[seq] = (fut, what, kind)
        self._wake.set()

    # ---- loop tasks -------------------------------------------------------------------------

    async def _write(self) -> None:
        assert self._call is not None
        try:
            while True:
                await self._wake.wait()
                self._wake.clear()
                while self._queue or self._out.calls or self._released:
                    if self._queue:
                        await self._call.write(self._queue.pop(0))
                        continue
                    batch, self._out = self._out, pb.CallBatch()
                    if self._released:
                        batch.released.extend(self._released)
                        self._released = []
                    await self._call.write(batch)
        except (grpc.RpcError, asyncio.InvalidStateError):
            pass  # the reader sees the break and fails the pending calls

    async def _read(self) -> None:
        assert self._call is not None
        detail = "the actor host closed the stream"
        try:
            while (batch := await self._call.read()) is not grpc.aio.EOF:
                if batch.released and self._pool is not None:
                    self._pool.release(batch.released)
                for reply in batch.replies:
                    entry = self._pending.pop(reply.seq, None)
                    if entry is None:
                        continue
                    fut, what, kind = entry
                    if fut.done():
                        continue
                    if reply.HasField("error"):
                        err = _remote_error(what, reply.error)
                        fut.set_exception(err)
                        if kind == pb.CALL_KIND_SET_ATTR:  # nobody holds this future: keep it
                            fut.exception()
                            self.set_attr_error = err
                    else:
                        if reply.value.shared:
                            self._seen_host_segments.update(s.name for s in reply.value.shared if s.pooled)
                        try:
                            fut.set_result(loads(reply.value, self._on_release) if reply.value.pickle else None)
                        except Exception as e:  # noqa: BLE001 - e.g. a class missing here
                            fut.set_exception(e)
        except grpc.RpcError as e:
            detail = f"connection to its host lost ({e.code().name}: {e.details()})"
        except asyncio.CancelledError:
            return
        if self.dead is None:
            cause = await self.cluster.death_cause(self.actor_id, wait_s=0.5) or detail
            self.mark_dead(cause)

    def _on_release(self, name: str) -> None:
        """A host segment we mapped is no longer used (any thread, from the GC)."""
        try:
            self.loop.call_soon_threadsafe(self._queue_release, name)
        except RuntimeError:  # the loop is closed: the segment went with the connection
            pass

    def _queue_release(self, name: str) -> None:
        if self.dead is None:
            self._released.append(name)
            self._wake.set()

    def mark_dead(self, cause: str) -> None:
        """Fail every pending and later call with ActorDiedError(cause). Loop thread only."""
        if self.dead is None:
            self.dead = ActorDiedError(self.actor_id, cause)
        pending, self._pending = self._pending, {}
        self.shm = False
        if self._pool is not None:
            self._pool.close()
        _shm.unlink(self._seen_host_segments)
        self._seen_host_segments.clear()
        for fut, _, _ in pending.values():
            if not fut.done():
                fut.set_exception(self.dead)
                fut.exception()  # whoever awaits it still gets the error; nobody else is nagged
        self._out = pb.CallBatch()
        self._queue.clear()

    async def close(self, cause: str) -> None:
        self.mark_dead(cause)
        await self._teardown()

    async def _teardown(self) -> None:
        for task in self._tasks:
            task.cancel()
        if self._call is not None:
            self._call.cancel()
        if self._channel is not None:
            await self._channel.close(grace=None)
        self._tasks = []


def _member_kinds(cls: type) -> dict[str, bool]:
    """name -> True for methods, False for other class attributes (properties, constants)."""
    kinds: dict[str, bool] = {}
    for name in dir(cls):
        if name.startswith("__"):
            continue
        attr = inspect.getattr_static(cls, name)
        kinds[name] = isinstance(attr, (staticmethod, classmethod)) or inspect.isfunction(attr) or (
            callable(attr) and not isinstance(attr, (property, type))
        )
    return kinds


class _Method:
    __slots__ = ("_conn", "_name")

    def __init__(self, conn: ActorConnection, name: str) -> None:
        self._conn = conn
        self._name = name

    def __call__(self, *args: Any, **kwargs: Any) -> CallFuture[Any]:
        return self._conn.submit(pb.CALL_KIND_METHOD, self._name, args, kwargs)

    def __repr__(self) -> str:
        return f"<remote method {self._conn.class_name}.{self._name} of actor {self._conn.actor_id}>"


class ActorHandle(Generic[T]):
    """A handle to a remote ``T``. Every use returns a ``CallFuture`` and never blocks the loop.

    - ``handle.method(*args)``: a call, sent now, run in the order made.
    - ``await handle.attr``: read a plain attribute of the remote object (also a call, in order).
    - ``handle.attr = value``: set it; ordered before every later call on this handle. If the
      remote assignment fails, the next call on the handle raises that ``RemoteError``.
    """

    __slots__ = ("_conn", "_kinds", "_methods")

    def __init__(self, conn: ActorConnection) -> None:
        object.__setattr__(self, "_conn", conn)
        object.__setattr__(self, "_kinds", _member_kinds(conn.cls))
        object.__setattr__(self, "_methods", {})

    @property
    def actor_id(self) -> str:
        return self._conn.actor_id

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        method = self._methods.get(name)
        if method is not None:
            return method
        if self._kinds.get(name, False):
            method = self._methods[name] = _Method(self._conn, name)
            return method
        return self._conn.submit(pb.CALL_KIND_GET_ATTR, name, (), {})

    def __setattr__(self, name: str, value: Any) -> None:
        if name.startswith("__"):
            raise AttributeError(f"cannot set {name} on an actor handle")
        self._conn.submit(pb.CALL_KIND_SET_ATTR, name, (value,), {})

    def __repr__(self) -> str:
        state = "dead" if self._conn.dead else "alive"
        return f"<ActorHandle {self._conn.class_name} {self._conn.actor_id} at {self._conn.endpoint} ({state})>"

    def __reduce__(self) -> Any:
        raise TypeError("actor handles cannot be pickled or sent to other actors yet")
