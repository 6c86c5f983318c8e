"""The master process's server (``actorrt start``, or embedded in a client's process): the gRPC
server, its lifecycle, and the periodic sweep that drives the servicer's housekeeping.

``Master`` owns a ``ClusterTable`` and the ``MasterServicer`` over it; ``async with Master(...)``
starts listening and stops on exit. Everything runs on the event loop that starts it.

Closing a master is a deliberate stop of its cluster: before it stops listening it tells every
worker ``ClusterStopped`` (they stop their actors and exit) and every client that its actors
died, and notes the workers that did not acknowledge in its ``unreached_file``. A master that
crashes (SIGKILL) sends nothing, and neither does one made with ``keep_workers=True`` (a master
restarted under its workers: they register again with the next one, their actors live on).
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import time
from pathlib import Path

import grpc
from prometheus_client import CollectorRegistry

from actorrt.common.lifecycle import Service, Status
from actorrt.master.heartbeats import HEARTBEATS_PER_S
from actorrt.master.metrics import MasterMetrics
from actorrt.master.servicer import MasterServicer
from actorrt.master.table import ClusterTable
from actorrt.master.unreached import Unreached
from actorrt.master.unreached import add as add_unreached
from actorrt.master.unreached import load as load_unreached
from actorrt.transport import addresses
from actorrt.transport import rpc as _rpc
from actorrt.v1 import master_pb2_grpc as pb_grpc

__all__ = ["Master"]

log = logging.getLogger("actorrt.master")

# How long a deliberate stop waits for its workers to acknowledge ClusterStopped (they end their
# sessions as they read it: milliseconds, unless one is cut off).
STOP_ACK_WAIT_S = 2.0


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
        keep_workers: bool = False,
        unreached_file: Path | None = None,
    ) -> None:
        """``metrics_registry``: where the master's metrics register (see ``actorrt.master.metrics``).
        ``heartbeats_per_s``: the heartbeat rate budgeted for all workers together.
        ``keep_workers``: closing stops this master alone, as a crash would; its workers keep
        their actors and register with the next master on this address. ``unreached_file``:
        where the workers a deliberate stop did not reach are noted, and read back at start
        (``actorrt.master.unreached``); None: nowhere (an embedded cluster's master)."""
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
        self.keep_workers = keep_workers
        self.unreached_file = unreached_file
        # What ClusterStopped tells the workers when this master closes; its owner may say
        # better (the CLI names the signal, an embedded cluster its script).
        self.stop_reason = f"the master (pid {os.getpid()} on {socket.gethostname()}) was closed"

    @property
    def address(self) -> str:
        return addresses.host_port(self.host, self.port)

    async def _start(self) -> None:
        if self.unreached_file is not None:
            self.servicer.unreached = load_unreached(self.unreached_file)
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
        if self.status is Status.CLOSING and not self.keep_workers:  # not a start that failed
            await self._stop_cluster()
        self.servicer.close()  # arms no timer from now on
        if self._sweeper is not None:
            self._sweeper.cancel()
        if self._server is not None:
            await self._server.stop(grace=1.0)

    async def _stop_cluster(self) -> None:
        """Tell every worker and client that the cluster stops (``MasterServicer.stop_cluster``);
        note the workers that did not acknowledge in ``unreached_file``. Master loop; raises
        nothing (a file that cannot be written is logged)."""
        reason = self.stop_reason
        missed = await self.servicer.stop_cluster(reason, STOP_ACK_WAIT_S)
        if not missed or self.unreached_file is None:
            return
        now = time.time()
        unreached = [Unreached(w.worker_id, w.node, w.pid, self.address, reason, now) for w in missed]
        try:
            add_unreached(self.unreached_file, unreached)
        except OSError as e:
            log.error(
                "could not note the %d workers the stop did not reach in %s: %s", len(missed), self.unreached_file, e
            )
