"""The worker daemon: registers its node with the master and keeps a warm pool of actor hosts.

Three parts: ``HostPool`` (``_host_pool``) is the pool's state, with no I/O; ``HostRunner``
(``_host_runner``) runs the pool's hosts as processes, one per CPU, and sends what the pool's
transitions return; this module is the daemon around them: its lifecycle, the heartbeat and the
session with the master. If the master goes away the daemon reconnects with backoff and
re-reports its live actors, so a restarted master rebuilds its table; if the master refuses it
(a new token), or says the cluster was stopped on purpose (``ClusterStopped``: ``actorrt stop``
on the head, an embedded cluster closing), it stops its hosts and ends. Hosts work in folders
under one temp folder per daemon, which a later daemon removes should this one die uncleanly. Runs on one event loop;
with ``ACTORRT_VALIDATE=1`` the pool checks its invariants after every transition, and
``close()`` raises the first violation.
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

from actorrt.common import logs as _logs
from actorrt.common import resources as _resources
from actorrt.common.errors import ClusterConnectionError
from actorrt.common.lifecycle import Service, Status
from actorrt.transport import rpc as _rpc
from actorrt.v1 import master_pb2 as pb
from actorrt.v1 import master_pb2_grpc as pb_grpc
from actorrt.worker.host_pool import HostPool, describe_exit
from actorrt.worker.host_runner import HostRunner
from actorrt.worker.load import LoadMeter
from actorrt.worker.metrics import WorkerMetrics
from actorrt.worker.output import OutputRelay, answer_log_read
from actorrt.worker.procs import (
    CLOCK_TICKS,
    ProcInfo,
    make_workdirs,
    memory_bytes,
    memory_used_bytes,
    node_cpu_ticks,
    process_table,
    reap_orphans,
    remove_dead_workdirs,
    remove_dir,
)

__all__ = ["VALIDATE_ENV", "WorkerDaemon", "describe_exit"]

log = logging.getLogger("actorrt.worker")
VALIDATE_ENV = "ACTORRT_VALIDATE"  # "1": check the pool's invariants after every transition


class WorkerDaemon(Service):
    """``async with WorkerDaemon(master_address, token=...)``: joins the cluster and serves actors
    on its warm pool of actor hosts (``pool``: their states; ``hosts``: their processes)."""

    def __init__(
        self,
        master_address: str,
        *,
        token: str | None = None,
        tls: _rpc.TLS | None = None,
        cpus: int | None = None,
        gpus: int = 0,
        node_ip: str = "127.0.0.1",
        node: str | None = None,
        connect_timeout_s: float = 15.0,
        reconnect: bool = True,
        wait_ready: bool = False,
        preload: tuple[str, ...] = (),
        metrics_registry: CollectorRegistry | None = None,
        log_dir: Path | None = None,
        echo_output: bool = True,
        reap_orphans: bool = False,
    ) -> None:
        """Join the cluster at ``master_address``.

        ``tls``: this node's certificate and key, which its actor hosts serve with; with a CA,
        hosts require client certificates (mutual TLS) and the master is verified with the CA,
        else with the certificate itself (one self-signed certificate for the whole cluster).
        ``wait_ready``: ``start()`` returns only once every actor host is warm.
        ``preload``: modules every warm actor host imports before it is ready (e.g. ``torch``).
        ``metrics_registry``: where the daemon's metrics register. ``log_dir``: per-actor log
        files (default ``ACTORRT_HOME/logs/actors``). ``echo_output``: also print actors' lines
        on this process's stdout/stderr (off in an embedded cluster, whose client prints the
        forwarded copy). ``reap_orphans``: reap, every heartbeat, the processes re-parented to
        this process that ended (for a daemon that is PID 1, a container's entry point: the CLI
        turns it on then; never in a user's process, whose own children it would take).
        """
        self.master_address = master_address
        self.reap_orphans = reap_orphans
        self.token = token
        self.tls = tls
        self.cpus = cpus or os.cpu_count() or 1
        _resources.check_counts(self.cpus, gpus)  # before a host per cpu is made
        self.gpus = gpus
        self.node_ip = node_ip
        self.node = node or socket.gethostname()
        self.connect_timeout_s = connect_timeout_s
        self.reconnect = reconnect
        self.wait_ready = wait_ready
        self.preload = tuple(preload)
        self.worker_id = ""
        self.heartbeat_interval_s = 1.0
        self.pool = HostPool(self.cpus, validate_each=os.environ.get(VALIDATE_ENV) == "1")
        self._events: asyncio.Queue[pb.WorkerEvent] = asyncio.Queue()
        self._in_flight: pb.WorkerEvent | None = None  # being written when the session broke?
        self._connected = False  # a session is up: events queued now are written to it
        self._unsent_exits: list[pb.ActorExited] = []  # drained, until a registration carried them
        self._registered = asyncio.Event()
        self._session_task: asyncio.Task[None] | None = None
        self._monitor_task: asyncio.Task[None] | None = None
        self._channel: grpc.aio.Channel | None = None
        self._fatal: BaseException | None = None
        # Why the master stopped the cluster on purpose (ClusterStopped), once it said so.
        self.cluster_stopped = ""
        # Set once the daemon is done, its hosts stopped: a master we had joined refused us, or
        # said the cluster was stopped on purpose. Whoever runs the daemon then closes it.
        self.ended = asyncio.Event()
        self._closing = False
        self._workdirs = ""  # this daemon's folder of host working directories (make_workdirs)
        self.echo_output = echo_output
        self.output = OutputRelay(lambda msg: self._emit(pb.WorkerEvent(actor_output=msg)), log_dir)
        self.metrics = WorkerMetrics(lambda: self.hosts.views(), metrics_registry)
        self.meter = LoadMeter(CLOCK_TICKS)  # the heartbeat's rates: node and actors' CPU %, calls/s
        self.hosts: HostRunner = HostRunner(
            self.pool,
            emit=self._emit,
            output=self.output,
            metrics=self.metrics,
            node_ip=node_ip,
            token=token,
            tls=tls,
            preload=self.preload,
            echo_output=echo_output,
            master_address=master_address,
        )

    # ---- lifecycle --------------------------------------------------------------------------

    async def _start(self) -> None:
        for dead in remove_dead_workdirs():
            log.info("removed %s, left behind by a worker daemon that is gone", dead)
        self._workdirs = make_workdirs()
        self.hosts.start(self._workdirs)
        self._session_task = asyncio.create_task(self._session_forever())
        registered = asyncio.create_task(self._registered.wait())
        done, _ = await asyncio.wait(
            {registered, self._session_task}, timeout=self.connect_timeout_s, return_when=asyncio.FIRST_COMPLETED
        )
        if registered not in done:
            registered.cancel()
            if self._fatal is not None:
                raise self._fatal
            raise ClusterConnectionError(
                f"worker could not register with the master at {self.master_address} within {self.connect_timeout_s:g}s"
            )
        self._monitor_task = asyncio.create_task(self._monitor_forever())
        deadline = asyncio.get_running_loop().time() + self.connect_timeout_s * 2
        while self.wait_ready and self.pool.started() < len(self.pool):
            if self._fatal is not None:
                raise self._fatal
            if self.cluster_stopped:  # its hosts are stopping: none will be ready
                raise ClusterConnectionError(self._stopped_text())
            if asyncio.get_running_loop().time() > deadline:
                started = self.pool.started()
                if not started:
                    raise ClusterConnectionError("actor hosts did not start in time; see the log for their errors")
                log.warning(
                    "%d of %d actor hosts did not start in time; serving with the others meanwhile",
                    len(self.pool) - started,
                    len(self.pool),
                )
                break
            await asyncio.sleep(0.02)

    async def _close(self) -> None:
        for task in (self._session_task, self._monitor_task):
            if task is not None and task is not asyncio.current_task():
                task.cancel()
        await self._stop_hosts()
        remove_dir(self._workdirs)
        self.output.close()
        if self._channel is not None:
            await self._channel.close(grace=None)
        if self.pool.violation is not None:  # ACTORRT_VALIDATE=1 found a bug: fail loudly
            raise self.pool.violation
        if self._fatal is not None and self.status is not Status.FAILED:  # refused after joining
            raise self._fatal

    async def _stop_hosts(self) -> None:
        """Daemon loop: end every actor host and start none again."""
        self._closing = True
        await self.hosts.stop()

    async def _monitor_forever(self) -> None:
        """Daemon loop: enforce memory limits often; send a heartbeat with the node's and each
        actor's load every interval; with ``reap_orphans``, reap the processes re-parented to us
        that ended (an actor's orphans) as often."""
        period = 0.2
        ticks = 0
        if self.reap_orphans:
            log.info("running as PID 1: processes whose parents end are reaped here")
        while True:
            await asyncio.sleep(period)
            ticks += 1
            heartbeat = ticks * period >= self.heartbeat_interval_s
            if not heartbeat and not self.pool.limits_set():
                continue
            table = process_table()
            rss = self.hosts.measure(table)
            if heartbeat:
                ticks = 0
                self._emit(pb.WorkerEvent(heartbeat=self._heartbeat(table, rss)))
                if self.reap_orphans:
                    reap_orphans(process_table(), self.hosts.waited())

    def _heartbeat(self, table: dict[int, ProcInfo], rss: dict[str, int]) -> pb.Heartbeat:
        """Daemon loop, after ``hosts.measure(table)``: the heartbeat: the node's load, CPU % and
        memory in use; each actor's RSS, and the CPU % and calls/s of those that had any
        (``LoadMeter``, over its last few seconds)."""
        now = time.monotonic()
        loads = self.hosts.load(self.meter, table, now)
        return pb.Heartbeat(
            load=os.getloadavg()[0],
            actor_rss_bytes=rss,
            cpu_percent=self.meter.node(now, *node_cpu_ticks()),
            memory_used_bytes=memory_used_bytes(),
            actor_load={
                actor_id: pb.ActorLoad(cpu_percent=cpu, calls_per_s=calls)
                for actor_id, (cpu, calls) in loads.items()
                if cpu > 0 or calls > 0
            },
        )

    # ---- the session with the master -----------------------------------------------------------

    def _emit(self, event: pb.WorkerEvent) -> None:
        # With no session, only exits are kept (the registration carries them; it re-reports
        # the rest): an outage of the master must not grow the daemon by its actors' output
        # (that stays in their log files) and heartbeats.
        if self._connected or event.HasField("actor_exited"):
            self._events.put_nowait(event)

    def _start_actor(self, cmd: pb.StartActor) -> None:
        """Daemon loop: the master placed an actor on one of our hosts."""
        effects = self.pool.assign(cmd)
        if effects.refused:
            log.info(
                "actor host %d: not starting actor %s: %s",
                cmd.slot,
                cmd.actor_id,
                effects.refused,
                extra=_logs.ids(actor_id=cmd.actor_id, worker_id=self.worker_id, slot=cmd.slot),
            )
        self.hosts.apply(effects)

    def _stop_actor(self, cmd: pb.StopActor) -> None:
        """Daemon loop: the master asks an actor to end (unknown ones are ignored)."""
        self.hosts.apply(self.pool.stop(cmd.actor_id, cmd.reason))

    def _registration(self) -> pb.WorkerEvent:
        live = [
            pb.LiveActor(
                actor_id=h.actor.actor_id,
                slot=h.index,
                endpoint=h.endpoint,
                client_id=h.actor.client_id,
                class_name=h.actor.class_name,
                resources=h.actor.resources,
                gpu_ids=h.actor.gpu_ids,
                name=h.actor.name,
                detached=h.actor.detached,
                max_restarts=h.actor.max_restarts,
                restarts=h.actor.restarts,
                shape=h.actor.shape,
            )
            for h in self.pool.serving()
            if h.actor is not None and self.hosts.running(h.index)
        ]
        return pb.WorkerEvent(
            register_worker=pb.RegisterWorker(
                version=_rpc.PROTOCOL_VERSION,
                node=self.node,
                node_ip=self.node_ip,
                cpus=self.cpus,
                gpus=self.gpus,
                memory_bytes=memory_bytes(),
                worker_id=self.worker_id,
                live_actors=live,
                pid=os.getpid(),
            )
        )

    async def _session_forever(self) -> None:
        backoff = 0.1
        while not self._closing:
            try:
                await self._session_once()
                backoff = 0.1
                if self.cluster_stopped:
                    await self._stopped_by_master()
                    return
            except grpc.RpcError as e:
                err = _rpc.translate(e, "worker session", self.master_address)
                if e.code() in (
                    grpc.StatusCode.UNAUTHENTICATED,
                    grpc.StatusCode.FAILED_PRECONDITION,
                    grpc.StatusCode.INVALID_ARGUMENT,
                ):
                    self._fatal = err
                    if self._registered.is_set():
                        await self._refused(err)
                    else:
                        log.error("%s", err)
                    return
                if not self._registered.is_set() and not self.reconnect:
                    self._fatal = err
                    return
                log.warning("lost the master (%s); reconnecting in %.1fs", e.code(), backoff)
            except ClusterConnectionError as e:
                log.warning("%s; reconnecting in %.1fs", e, backoff)
            except Exception as e:  # a bug of ours: say so loudly, then register again (reporting our actors)
                log.exception("the worker session failed (%s: %s)", type(e).__name__, e)
                if not self.reconnect:
                    self._fatal = e
            if self._closing or not self.reconnect:
                return
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, _rpc.RECONNECT_BACKOFF_MAX_S)

    async def _refused(self, err: BaseException) -> None:
        """The master we had joined refuses us now (a new token, another version): the actors
        we host must not keep running code sent under the old trust. Stop every host and set
        ``ended``; whoever runs the daemon then closes it, and ``close()`` raises ``err`` (so
        ``actorrt connect`` exits non-zero saying why)."""
        hosted = sum(1 for _ in self.pool.serving())
        log.error(
            "%s; stopping this worker and its %d actor hosts (%d actors)",
            err,
            len(self.pool),
            hosted,
            extra=_logs.ids(worker_id=self.worker_id, address=self.master_address),
        )
        await self._stop_hosts()
        self.ended.set()

    async def _stopped_by_master(self) -> None:
        """The master said the cluster was stopped on purpose (``cluster_stopped`` says why):
        stop every host and set ``ended``; whoever runs the daemon then closes it (``actorrt
        connect`` exits with status 3). Before it ever joined, ``start()`` raises instead."""
        hosted = sum(1 for _ in self.pool.serving())
        if not self._registered.is_set():
            self._fatal = ClusterConnectionError(self._stopped_text())
        log.warning(
            "the master at %s stopped the cluster on purpose (%s): stopping this worker's %d actor hosts "
            "(%d actors) and exiting",
            self.master_address,
            self.cluster_stopped,
            len(self.pool),
            hosted,
            extra=_logs.ids(worker_id=self.worker_id, address=self.master_address),
        )
        await self._stop_hosts()
        self.ended.set()

    def _stopped_text(self) -> str:
        return f"the master at {self.master_address} says its cluster was stopped: {self.cluster_stopped}"

    async def _session_once(self) -> None:
        if self._channel is None:
            tls = self.tls and _rpc.TLS(self.tls.ca or self.tls.cert, self.tls.cert, self.tls.key)
            self._channel = _rpc.open_channel(self.master_address, tls)
        stub = pb_grpc.MasterStub(self._channel)
        call = stub.WorkerSession(metadata=_rpc.auth_metadata(self.token))
        # Anything queued for the old master is stale: the registration re-reports the truth,
        # with the exits it may not have heard of (their causes).
        pending = [self._in_flight] if self._in_flight is not None else []
        self._in_flight = None
        while not self._events.empty():
            pending.append(self._events.get_nowait())
        self._unsent_exits += [e.actor_exited for e in pending if e.HasField("actor_exited")]
        registration = self._registration()
        registration.register_worker.exited.extend(self._unsent_exits)
        await call.write(registration)
        reply = await call.read()
        if reply is not grpc.aio.EOF and reply.HasField("cluster_stopped"):  # while we were cut off
            self.cluster_stopped = reply.cluster_stopped.reason or "no reason given"
            call.cancel()
            return
        if reply is grpc.aio.EOF or not reply.HasField("worker_registered"):
            raise ClusterConnectionError("the master closed the worker session during registration")
        self._unsent_exits = []
        self.worker_id = self.hosts.worker_id = reply.worker_registered.worker_id
        self.heartbeat_interval_s = reply.worker_registered.heartbeat_interval_s or 1.0
        log.info("registered with %s as %s", self.master_address, self.worker_id)
        self._connected = True
        for event in self.pool.ready_events():
            self._emit(event)
        self._registered.set()
        writer = asyncio.create_task(self._write_events(call))
        try:
            while (cmd := await call.read()) is not grpc.aio.EOF:
                kind = cmd.WhichOneof("command")
                if kind == "start_actor":
                    self._start_actor(cmd.start_actor)
                elif kind == "stop_actor":
                    self._stop_actor(cmd.stop_actor)
                elif kind == "read_actor_log":
                    self._emit(pb.WorkerEvent(actor_log=answer_log_read(self.output, cmd.read_actor_log)))
                elif kind == "worker_registered":  # mid-session: the master retuned the interval
                    self.heartbeat_interval_s = cmd.worker_registered.heartbeat_interval_s or self.heartbeat_interval_s
                elif kind == "cluster_stopped":  # ending the session says we heard it
                    self.cluster_stopped = cmd.cluster_stopped.reason or "no reason given"
                    return
        finally:
            self._connected = False
            writer.cancel()
            call.cancel()

    async def _write_events(self, call: grpc.aio.StreamStreamCall[pb.WorkerEvent, pb.WorkerCommand]) -> None:
        while True:
            self._in_flight = event = await self._events.get()
            await call.write(event)
            self._in_flight = None
