"""The master process's server (``actorrt start``, or embedded in a client's process): the gRPC
server, its lifecycle, and the periodic sweep that drives the servicer's housekeeping.

``Master`` owns a ``ClusterTable`` and the ``MasterServicer`` over it; ``async with Master(...)``
starts listening and stops on exit. Everything runs on the event loop that starts it.
"""

from __future__ import annotations

import asyncio
import logging

import grpc
from prometheus_client import CollectorRegistry

from actorrt.common.lifecycle import Service
from actorrt.master.heartbeats import HEARTBEATS_PER_S
from actorrt.master.metrics import MasterMetrics
from actorrt.master.servicer import MasterServicer
from actorrt.master.table import ClusterTable
from actorrt.transport import addresses
from actorrt.transport import rpc as _rpc
from actorrt.v1 import master_pb2_grpc as pb_grpc

__all__ = ["Master"]

log = logging.getLogger("actorrt.master")


class Master(Service):
    """The master process's server. ``async with Master(...) as m: m.address``."""

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        token: str | None = None,
        tls: _rpc.TLS | None = None,
        heartbeat_interval_s: float = 1.0,
        worker_timeout_s: float = 10.0,
        client_grace_s: float = 10.0,
        metrics_registry: CollectorRegistry | None = None,
        heartbeats_per_s: float = HEARTBEATS_PER_S,
    ) -> None:
        """``metrics_registry``: where the master's metrics register (see ``actorrt.master.metrics``).
        ``heartbeats_per_s``: the heartbeat rate budgeted for all workers together."""
        self.host = host
        self.port = port
        self.token = token
        self.tls = tls
        self.table = ClusterTable()
        self.servicer = MasterServicer(
            self.table,
            heartbeat_interval_s=heartbeat_interval_s,
            worker_timeout_s=worker_timeout_s,
            client_grace_s=client_grace_s,
            metrics=MasterMetrics(self.table, metrics_registry),
            heartbeats_per_s=heartbeats_per_s,
        )
        self._server: grpc.aio.Server | None = None
        self._sweeper: asyncio.Task[None] | None = None

    @property
    def address(self) -> str:
        return addresses.host_port(self.host, self.port)

    async def _start(self) -> None:
        interceptors = [_rpc.TokenInterceptor(self.token)] if self.token else []
        self._server = grpc.aio.server(interceptors=interceptors, options=_rpc.server_options(_rpc.MASTER_MAX_RECEIVE))
        pb_grpc.add_MasterServicer_to_server(self.servicer, self._server)
        self.port = _rpc.listen(self._server, addresses.host_port(self.host, self.port), self.tls)
        self.servicer.address = self.address
        await self._server.start()
        self.servicer.recovery.started_at = self.table.clock()  # a restarted master's workers register from now
        self._sweeper = asyncio.create_task(self._sweep_forever())
        log.info("master listening on %s", self.address)

    async def _sweep_forever(self) -> None:
        period = min(1.0, self.servicer.worker_timeout_s / 4, self.servicer.client_grace_s / 4)
        clock = self.table.clock
        due = clock() + period
        while True:
            await asyncio.sleep(max(0.0, due - clock()))
            now = clock()
            self.servicer.sweep(period, stalled_s=now - due)
            due = now + period

    async def _close(self) -> None:
        self.servicer.close()  # arms no timer from now on
        if self._sweeper is not None:
            self._sweeper.cancel()
        if self._server is not None:
            await self._server.stop(grace=1.0)
