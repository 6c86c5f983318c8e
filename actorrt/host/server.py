"""The actor host: one OS process per slot, serving one actor on its own gRPC port.

Started by a worker daemon as ``python -m actorrt.host.server``; prints one ready line with its port on
stdout, then serves ``ActorHost.Calls``. The first stream's first batch constructs the actor. The
actor ends when its daemon stops the process (SIGTERM, on the master's word), never because a
stream ended: a broken stream may be a client that comes back. The process then exits, so no
state leaks to the next user. It exits as well when its daemon dies (EOF on stdin).

Everything here runs on the host's single event loop; synchronous methods run inline on it, in
the order their calls were made.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib
import os
import signal
import stat
import sys
import threading
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import grpc

from actorrt.client import current as _current
from actorrt.client import pickling as _pickling
from actorrt.common import loop
from actorrt.common import resources as _resources
from actorrt.common.errors import ClusterConnectionError
from actorrt.host.actor import HostedActor
from actorrt.host.calls import CallStream
from actorrt.host.failures import failure_of
from actorrt.host.stats import CallStats
from actorrt.transport import addresses
from actorrt.transport import bulk as _bulk
from actorrt.transport import rpc as _rpc
from actorrt.transport import shm as _shm
from actorrt.transport import wire as _wire
from actorrt.transport.codec import decode
from actorrt.transport.serialization import EMPTY
from actorrt.transport.stats_pipe import metrics_fd_from_env, report_line
from actorrt.v1 import actor_host_pb2 as pb
from actorrt.v1 import actor_host_pb2_grpc as pb_grpc
from actorrt.worker.fork_server_link import HOST_NAME, set_process_name

if TYPE_CHECKING:
    from actorrt.client.cluster import Cluster
    from actorrt.host.calls import CallsContext

# How long a stream that attaches to this host's actor waits for the actor's construction (its
# creator constructs it once placed; others holding a handle may attach first).
ATTACH_WAIT_S = 60.0


_NODE_DEVICES = os.environ.get("CUDA_VISIBLE_DEVICES")
"""The devices the worker daemon was given (inherited by its hosts), before an actor's override."""


class ActorHostServicer(pb_grpc.ActorHostServicer):
    """Serves one actor; ``finished`` is set when its constructor failed."""

    def __init__(self, token: str | None = None, tls: _rpc.TLS | None = None, bind: str = "127.0.0.1") -> None:
        self.actor: HostedActor | None = None
        self.bind = bind  # where the bulk listener (``_bulk``) binds, beside the gRPC port
        self.bulk_server: _bulk.Server | None = None
        self.finished = asyncio.Event()
        self.constructed = asyncio.Event()  # set once the actor is built (or its constructor failed)
        self.token = token  # for the actor's own connection to its cluster (_actor_cluster)
        self.tls = tls
        self.stats = CallStats()  # the actor's, once constructed; bytes are counted from the start
        self.report_fd: int | None = None  # the daemon's statistics pipe, if it gave one

    def parse(self, data: bytes) -> pb.CallBatch | memoryview:
        """The request deserializer: a chunk's data as a view (``_wire``), else the CallBatch.
        Counts the bytes as they arrive (cheaper than ByteSize)."""
        self.stats.bytes_in += len(data)
        chunk = _wire.chunk_data(data, _wire.CALL_CHUNK)
        return chunk if chunk is not None else pb.CallBatch.FromString(data)

    def encode(self, message: pb.ReplyBatch | bytes) -> bytes:
        """The response serializer: pre-encoded batches (``_wire``) pass through; counts bytes."""
        data = message if isinstance(message, bytes) else message.SerializeToString()
        self.stats.bytes_out += len(data)
        return data

    async def Calls(self, request_iterator: AsyncIterator[pb.CallBatch | memoryview], context: CallsContext) -> None:
        requests, joiner = request_iterator, _wire.Joiner(pb.CallBatch.FromString)
        try:
            first = await _next_message(requests, joiner)
        except StopAsyncIteration:
            return
        except ValueError as e:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(e))
        if not isinstance(first, pb.CallBatch):
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "a stream cannot start with a chunk")
        shm, client_pid = False, None
        if first.HasField("construct"):
            step = first.construct
            if step.version != _rpc.PROTOCOL_VERSION:
                await context.abort(grpc.StatusCode.FAILED_PRECONDITION, _rpc.version_mismatch(step.version))
            if self.actor is not None:
                await context.abort(
                    grpc.StatusCode.FAILED_PRECONDITION,
                    f"this actor host already serves actor {self.actor.actor_id}",
                )
            try:
                self.actor = self._construct(step)
                self.actor.report_fd = self.report_fd
            except (Exception, SystemExit) as e:  # noqa: BLE001 - construction failed: tell the owner, then end
                await context.write(pb.ReplyBatch(replies=[pb.Reply(seq=0, error=failure_of(e)[0])]))
                self.finished.set()
                self.constructed.set()
                return
            finally:
                self.constructed.set()
            shm, client_pid, links = await self._answer_open(context, step.shm_probe)
        elif first.HasField("attach"):
            if first.attach.version != _rpc.PROTOCOL_VERSION:
                await context.abort(grpc.StatusCode.FAILED_PRECONDITION, _rpc.version_mismatch(first.attach.version))
            try:  # its creator may not have constructed it yet
                async with asyncio.timeout(ATTACH_WAIT_S):
                    await self.constructed.wait()
            except TimeoutError:
                pass
            if self.actor is None or self.actor.actor_id != first.attach.actor_id:
                await context.abort(grpc.StatusCode.NOT_FOUND, f"no actor {first.attach.actor_id} here")
            shm, client_pid, links = await self._answer_open(context, first.attach.shm_probe)
        else:
            await context.abort(
                grpc.StatusCode.INVALID_ARGUMENT, "the first CallBatch of a stream must construct or attach"
            )
            return
        assert self.actor is not None
        first.ClearField("construct")
        first.ClearField("attach")
        stream = CallStream(self.actor, context, shm, client_pid, links)
        try:
            await stream.run(requests, joiner, first)
        finally:
            if links is not None:  # also when the stream never ran
                links.close()

    async def _answer_open(
        self, context: CallsContext, probe: str
    ) -> tuple[bool, int | None, _bulk.StreamLinks | None]:
        """Answer a construct or attach step (reply seq 0), saying whether the stream may use
        shared memory (the client's probe file is readable here) and, when it may not, offering
        a bulk connection (``_bulk``): ``(shm, the client's pid, the stream's bulk connections)``."""
        shm = _shm.check_probe(probe)
        client_pid = _shm.probe_owner(probe) if shm else None
        if client_pid is not None and self.report_fd is not None:
            report_line(self.report_fd, {"shm_peer": client_pid})
        answer = pb.ReplyBatch(replies=[pb.Reply(seq=0, value=EMPTY)], shared_memory=shm)
        links: _bulk.StreamLinks | None = None
        if not shm and _bulk.enabled() and self.actor is not None and (server := self._bulk_server()) is not None:
            links = _bulk.StreamLinks(
                server, asyncio.get_running_loop(), self.actor.max_payload_bytes, self.actor.actor_id
            )
            answer.bulk_port, answer.bulk_key = links.offer() or (0, b"")
        try:
            await context.write(answer)
        except BaseException:
            if links is not None:
                links.close()
            raise
        return shm, client_pid, links

    def _bulk_server(self) -> _bulk.Server | None:
        """The bulk listener, started by the first stream without shared memory; None (large
        payloads then stream in chunks) when it cannot listen."""
        if self.bulk_server is None:
            try:
                self.bulk_server = _bulk.Server(self.bind, asyncio.get_running_loop(), self.tls)
            except (OSError, ValueError) as e:
                print(f"actorrt: no bulk connection for large payloads ({e}); they go on gRPC", file=sys.stderr)
                return None
        return self.bulk_server

    def _construct(self, step: pb.ConstructActor) -> HostedActor:
        os.environ["CUDA_VISIBLE_DEVICES"] = _resources.visible_devices(list(step.gpu_ids), _NODE_DEVICES)
        os.environ["ACTORRT_ACTOR_ID"] = step.actor_id
        _pickling.in_actor_host = True
        max_payload_mb = max(1, step.max_payload_bytes // 2**20) if step.max_payload_bytes else 1024
        _current.set_fallback(lambda: _actor_cluster(step.actor_id, self.token, self.tls, max_payload_mb))
        _write_shipped(step.files)
        claimed = _pickling.claimed_before.set(step.restarts > 0)
        try:
            cls, args, kwargs = decode(step.spec)
        finally:
            _pickling.claimed_before.reset(claimed)
        instance = cls(*args, **kwargs)
        return HostedActor(
            step.actor_id,
            step.class_name or cls.__name__,
            instance,
            step.max_concurrency,
            step.max_payload_bytes,
            self.stats,
        )


def _actor_cluster(actor_id: str, token: str | None, tls: _rpc.TLS | None, max_payload_mb: int) -> Cluster:
    """The actor's own connection to its cluster, opened the first time the actor needs one
    (it received a handle, creates an actor, or looks one up). It runs on its own loop thread,
    so plain methods can block on ``.result()`` while the host's loop is theirs; the actors it
    creates belong to this actor and die with it."""
    from actorrt.client.cluster import Cluster  # the client is loaded only by actors that use it

    address = os.environ.get("ACTORRT_ADDRESS", "")
    if not address:
        raise ClusterConnectionError("this actor's host was not told its cluster's address (ACTORRT_ADDRESS)")
    cluster = Cluster(
        address,
        token=token,
        files=(),
        timeout=30.0,
        placement_timeout=300.0,
        embedded_cpus=None,
        tls=tls,
        max_payload_mb=max_payload_mb,
        actor_id=actor_id,
    )
    cluster.__enter__()
    return cluster


async def _next_message(
    requests: AsyncIterator[pb.CallBatch | memoryview], joiner: _wire.Joiner
) -> pb.CallBatch | memoryview:
    """The next message of the stream, a split batch joined (``_wire.Joiner``). Raises
    StopAsyncIteration at the end, ValueError on a malformed sequence."""
    while (message := joiner.feed(await anext(requests))) is None:
        pass
    return message  # type: ignore[no-any-return]


def _write_shipped(files: Sequence[pb.ShippedFile]) -> None:
    """Write ``connect(files=...)`` into the working folder: files, and folders (``mode`` with
    ``S_IFDIR``; their permissions are set last, so a read-only folder still gets its files).
    Every entry must stay inside the folder, also through a symlink already there."""
    root = Path.cwd().resolve()
    folders: list[tuple[Path, int]] = []
    for f in files:
        path = Path(f.path)
        target = (root / path).resolve()
        if path.is_absolute() or ".." in path.parts or not path.parts or not target.is_relative_to(root):
            raise ValueError(f"shipped file path must be relative and inside the actor's folder: {f.path!r}")
        if stat.S_ISDIR(f.mode):
            target.mkdir(parents=True, exist_ok=True)
            folders.append((target, f.mode & 0o777))
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(f.data)
        if f.mode:
            target.chmod(f.mode & 0o777)
    for folder, mode in reversed(folders):
        folder.chmod(mode)


def _exit_when_parent_dies() -> None:
    """The daemon holds our stdin; EOF means it is gone, so we go too (no orphans), taking our
    shared-memory segments along (the daemon that would have removed them is gone)."""
    try:
        while sys.stdin.buffer.read(4096):
            pass
    finally:
        _shm.remove_owned_by(os.getpid())
        if os.getpgid(0) == os.getpid():  # what the actor started (a pool, a Popen) goes too
            with contextlib.suppress(OSError):
                os.killpg(os.getpid(), signal.SIGKILL)  # this process with it
        os._exit(70)


async def serve(bind: str, token: str | None, tls: _rpc.TLS | None) -> None:
    interceptors = [_rpc.TokenInterceptor(token)] if token else []
    server = grpc.aio.server(interceptors=interceptors, options=_rpc.server_options(_rpc.HOST_MAX_RECEIVE))
    servicer = ActorHostServicer(token, tls, bind)
    # What add_ActorHostServicer_to_server does, except that the servicer's (de)serializers count
    # bytes and let pre-encoded reply batches (bytes) pass through.
    handlers = {
        "Calls": grpc.stream_stream_rpc_method_handler(
            servicer.Calls, request_deserializer=servicer.parse, response_serializer=servicer.encode
        )
    }
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler("actorrt.v1.ActorHost", handlers),))
    server.add_registered_method_handlers("actorrt.v1.ActorHost", handlers)
    port = _rpc.listen(server, addresses.host_port(bind, 0), tls)
    metrics_fd = servicer.report_fd = metrics_fd_from_env()
    await server.start()
    print(f"{_rpc.HOST_READY_PREFIX} {port}", flush=True)
    reporter = asyncio.create_task(_report_stats(servicer, metrics_fd)) if metrics_fd is not None else None
    if metrics_fd is not None:
        _report_on_sigterm(servicer, metrics_fd)
    await servicer.finished.wait()
    if reporter is not None and metrics_fd is not None:  # now: the daemon's SIGTERM may come before the stop below ends
        reporter.cancel()
        if servicer.actor is not None:
            servicer.actor.stats.report(metrics_fd)
    await server.stop(grace=1.0)


def _report_on_sigterm(servicer: ActorHostServicer, fd: int) -> None:
    """On SIGTERM (the daemon stopping this actor) send the last call statistics, then die of
    the signal as before, so the exit status and its cause read the same."""

    def handler(signum: int, frame: Any) -> None:
        if servicer.actor is not None:
            servicer.actor.stats.report(fd)
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)

    signal.signal(signal.SIGTERM, handler)


async def _report_stats(servicer: ActorHostServicer, fd: int, period_s: float = 1.0) -> None:
    """Send the actor's call statistics to the daemon's pipe about once a second."""
    while True:
        await asyncio.sleep(period_s)
        if servicer.actor is not None:
            servicer.actor.stats.report(fd)


# Imported by every warm host, before the ones ``--preload`` / ``preload=`` name: the module of
# almost every real actor class imports numpy (~50 ms), which would otherwise be paid when the
# class arrives, on the creation's critical path (``bench/actor_calls.py --only create_numpy``).
DEFAULT_PRELOAD = ("numpy",)


def preload(names: str, report: bool = True) -> None:
    """Import ``DEFAULT_PRELOAD`` and the comma-separated module ``names`` now, while the host
    waits in the warm pool, not when an actor is placed on it. A named module that fails to
    import is reported on stderr (unless not ``report``) and the host starts without it (it is
    the actor's problem, not ours); a default one that is not installed is skipped without a
    word."""
    named = [name.strip() for name in names.split(",") if name.strip()]
    for module in DEFAULT_PRELOAD:
        if module in named:
            continue
        try:
            importlib.import_module(module)
        except ImportError:
            pass
        except Exception as e:  # noqa: BLE001 - installed but broken: say so, start without it
            if report:
                print(f"actorrt: preloading {module!r} (a default) failed: {e}", file=sys.stderr, flush=True)
    for module in named:
        try:
            importlib.import_module(module)
        except Exception as e:  # noqa: BLE001 - reported; the host starts without it
            if report:
                print(f"actorrt: preloading {module!r} failed: {e}", file=sys.stderr, flush=True)


def main(argv: Sequence[str] | None = None) -> None:
    """``python -m actorrt.host.server``, or a host a fork server forked (``actorrt.host.forkserver``)."""
    parser = argparse.ArgumentParser(prog="python -m actorrt.host.server")
    parser.add_argument("--bind", default="127.0.0.1")
    args = parser.parse_args(argv)
    set_process_name(HOST_NAME)
    threading.Thread(target=_exit_when_parent_dies, name="parent-watch", daemon=True).start()
    preload(os.environ.get("ACTORRT_PRELOAD", ""))
    token = os.environ.pop("ACTORRT_TOKEN", None)
    tls = _rpc.TLS.from_env()
    loop.run(serve(args.bind, token, tls))
    sys.stdout.flush()
    sys.stderr.flush()
    # Skip interpreter teardown: user code may have left non-daemon threads behind.
    os._exit(0)


if __name__ == "__main__":
    main()
