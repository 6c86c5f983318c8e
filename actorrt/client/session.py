"""``MasterSession``: a client's ``ClientSession`` stream to the master, kept open.

It opens the stream with the ``OpenSession`` step (version, client id), is its only writer
(gRPC streams take one write at a time), hands every notice to ``on_notice``, and when the master
goes away reopens the stream with backoff and sends again the placement requests the new
master never saw (``unanswered``). What the notices mean is the client's business
(``ClientState``); this module only moves messages. Runs on the cluster's loop.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
from collections.abc import Callable

import grpc

from actorrt.common.errors import ClusterConnectionError, MasterUnreachableError
from actorrt.common.logs import RepeatedFailures
from actorrt.transport import rpc as _rpc
from actorrt.v1 import master_pb2 as pb
from actorrt.v1 import master_pb2_grpc as pb_grpc

__all__ = ["MasterSession"]

log = logging.getLogger("actorrt.client")

CLOSE_WAIT_S = 2.0  # what close() waits for queued steps to leave and the master to answer


class MasterSession:
    def __init__(
        self,
        address: str,
        *,
        token: str | None,
        tls: _rpc.TLS | None,
        client_id: str,
        timeout: float,
        mute_output: bool,
        on_notice: Callable[[pb.ClientNotice], None],
        unanswered: Callable[[], list[pb.ClientEvent]],
        actor_id: str = "",
    ) -> None:
        self.actor_id = actor_id
        self.address = address
        self.token = token
        self.tls = tls
        self.client_id = client_id
        self.timeout = timeout
        self.mute_output = mute_output
        self.on_notice = on_notice
        self._notice_failures = RepeatedFailures(log)  # by notice kind: the reader goes on
        self.unanswered = unanswered
        self.closed = False
        self._channel: grpc.aio.Channel | None = None
        self._call: grpc.aio.StreamStreamCall[pb.ClientEvent, pb.ClientNotice] | None = None
        self._outbox: asyncio.Queue[pb.ClientEvent] = asyncio.Queue()
        self._up = asyncio.Event()
        self._reader: asyncio.Task[None] | None = None
        self._writer: asyncio.Task[None] | None = None

    async def open(self) -> None:
        """Open the session; raises AuthenticationError, ProtocolVersionError,
        MasterUnreachableError or ClusterConnectionError."""
        self._channel = _rpc.open_channel(self.address, self.tls)
        await self._open_stream()
        self._up.set()
        self._reader = asyncio.create_task(self._read_forever())
        self._writer = asyncio.create_task(self._write_forever())

    def send(self, event: pb.ClientEvent) -> None:
        """Queue a step; it leaves in order, once the session is up."""
        if not self.closed:
            self._outbox.put_nowait(event)

    async def status(self) -> pb.GetClusterStatusResponse:
        assert self._channel is not None
        stub = pb_grpc.MasterStub(self._channel)
        try:
            response: pb.GetClusterStatusResponse = await stub.GetClusterStatus(
                pb.GetClusterStatusRequest(), metadata=_rpc.auth_metadata(self.token), timeout=self.timeout
            )
            return response
        except grpc.RpcError as e:
            raise _rpc.translate(e, "status", self.address) from e

    async def close(self) -> None:
        """Send what is queued (for at most ``CLOSE_WAIT_S``), then the ``CloseSession`` step,
        so the master frees this client's actors now instead of after its grace period."""
        if self.closed:
            return
        if self._writer is not None:
            try:
                async with asyncio.timeout(CLOSE_WAIT_S):
                    await self._outbox.join()
            except TimeoutError:
                pass
            self._writer.cancel()
        self.closed = True
        if self._call is not None:
            try:
                await self._call.write(pb.ClientEvent(close_session=pb.CloseSession()))
                await self._call.done_writing()
                if self._reader is not None:
                    async with asyncio.timeout(CLOSE_WAIT_S):
                        await asyncio.shield(self._reader)
            except (TimeoutError, grpc.RpcError, asyncio.InvalidStateError):
                pass
            self._call.cancel()
        if self._reader is not None:
            self._reader.cancel()
        if self._channel is not None:
            await self._channel.close(grace=None)

    # ---- the stream ---------------------------------------------------------------------------

    async def _open_stream(self) -> None:
        assert self._channel is not None
        stub = pb_grpc.MasterStub(self._channel)
        self._call = stub.ClientSession(metadata=_rpc.auth_metadata(self.token))
        opening = pb.OpenSession(
            version=_rpc.PROTOCOL_VERSION,
            client_id=self.client_id,
            hostname=socket.gethostname(),
            pid=os.getpid(),
            mute_actor_output=self.mute_output,
            actor_id=self.actor_id,
        )
        try:
            await self._call.write(pb.ClientEvent(open_session=opening))
            async with asyncio.timeout(self.timeout):
                first = await self._call.read()
        except grpc.RpcError as e:
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
        except TimeoutError as e:
            self._call.cancel()
            raise MasterUnreachableError(
                f"connect: no actorrt master answered at {self.address} within {self.timeout:g}s"
            ) from e
        if not isinstance(first, pb.ClientNotice) or not first.HasField("session_opened"):  # or EOF
            raise ClusterConnectionError(f"connect: the master at {self.address} closed the session")

    async def _read_forever(self) -> None:
        """Hand notices to ``on_notice``; reopen the session with backoff if the master goes."""
        backoff = 0.1
        while True:
            assert self._call is not None
            try:
                while isinstance(notice := await self._call.read(), pb.ClientNotice):  # else EOF
                    backoff = 0.1
                    try:
                        self.on_notice(notice)
                    except Exception:  # noqa: BLE001 - a bug handling one notice must not stop the ones after it
                        kind = notice.WhichOneof("notice")
                        self._notice_failures.failed(kind, "could not handle the master's %s notice", kind)
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
            self._up.clear()
            while not self.closed:
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, _rpc.RECONNECT_BACKOFF_MAX_S)
                try:
                    await self._open_stream()
                except (ClusterConnectionError, grpc.RpcError):
                    continue
                for msg in self.unanswered():  # the new master never saw these
                    self._outbox.put_nowait(msg)
                self._up.set()
                break

    async def _write_forever(self) -> None:
        while True:
            msg = await self._outbox.get()
            try:
                while True:
                    await self._up.wait()
                    call = self._call
                    assert call is not None
                    try:
                        await call.write(msg)
                        break
                    except (grpc.RpcError, asyncio.InvalidStateError):
                        if self.closed:
                            return
                        if self._call is call:  # the reader notices and reopens
                            self._up.clear()
            finally:
                self._outbox.task_done()
