"""The worker daemon: registers its node with the master and keeps a warm pool of actor hosts.

The I/O around ``HostPool`` (the pool's states and transitions): one actor host process per
CPU, started with ``subprocess`` (never fork after gRPC exists). The daemon reaps them, enforces
per-actor memory limits (over each actor's whole process tree), reports exits with their cause
(an idle warm host's too, as ``SlotLost``), and starts a fresh host after each exit. It drains
every host's output whatever its shape, so no actor blocks in a print. If the master goes away
the daemon reconnects with backoff and re-reports its live actors, so a restarted master
rebuilds its table; if the master refuses it (a new token), it stops its hosts and ends. Hosts
work in folders under one temp folder per daemon, which a later daemon removes should this one
die uncleanly. Runs on one event loop; with ``ACTORRT_VALIDATE=1`` the pool checks its
invariants after every transition, and ``close()`` raises the first violation.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import socket
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import grpc
from prometheus_client import CollectorRegistry

from actorrt import _logs, _metrics, _resources, _rpc, _shm
from actorrt._errors import ClusterConnectionError
from actorrt._host import READY_PREFIX
from actorrt._host_pool import Effects, HostPool, HostState, Signal, describe_exit
from actorrt._host_procs import (
    kill_group,
    kill_pid,
    make_workdirs,
    memory_bytes,
    process_table,
    process_tree,
    remove_dead_workdirs,
    remove_dir,
    signal_proc,
)
from actorrt._lifecycle import Service, Status
from actorrt.v1 import master_pb2 as pb
from actorrt.v1 import master_pb2_grpc as pb_grpc

__all__ = ["WorkerDaemon", "describe_exit"]

log = logging.getLogger("actorrt.worker")
OUTPUT_CHUNK = 256 * 2**10  # bytes read from an actor's pipe at a time
VALIDATE_ENV = "ACTORRT_VALIDATE"  # "1": check the pool's invariants after every transition


@dataclass
class _HostIO:
    """The daemon-loop side of one pool host: its process and the tasks that serve it."""

    keeper: asyncio.Task[None] | None = None  # _keep_host: start it, wait, report, start again
    proc: asyncio.subprocess.Process | None = None
    stats: asyncio.Task[None] | None = None  # its call statistics (read_host_stats)
    stderr: asyncio.Task[None] | None = None  # _pump of its stderr, from its start
    stdout: asyncio.Task[None] | None = None  # _pump of its stdout, once it said it is ready

    def readers(self) -> list[asyncio.Task[None]]:
        return [t for t in (self.stats, self.stderr, self.stdout) if t is not None]

    def tasks(self) -> list[asyncio.Task[None]]:
        return [t for t in (self.keeper, *self.readers()) if t is not None]


class WorkerDaemon(Service):
    """``async with WorkerDaemon(master_address, token=...)``: joins the cluster and serves slots."""

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
        forwarded copy).
        """
        self.master_address = master_address
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
        self._io = [_HostIO() for _ in range(self.cpus)]
        self._events: asyncio.Queue[pb.WorkerEvent] = asyncio.Queue()
        self._registered = asyncio.Event()
        self._session_task: asyncio.Task[None] | None = None
        self._monitor_task: asyncio.Task[None] | None = None
        self._channel: grpc.aio.Channel | None = None
        self._fatal: BaseException | None = None
        # Set once a master we had joined refused us and our hosts are stopped: the daemon is done.
        self.refused = asyncio.Event()
        self._closing = False
        self._workdirs = ""  # this daemon's folder of host working directories (make_workdirs)
        self.echo_output = echo_output
        self.output = _logs.ActorOutput(
            lambda msg: self._emit(pb.WorkerEvent(actor_output=msg)), log_dir
        )
        self.metrics = _metrics.WorkerMetrics(self._host_views, metrics_registry)

    # ---- lifecycle --------------------------------------------------------------------------

    async def _start(self) -> None:
        for dead in remove_dead_workdirs():
            log.info("removed %s, left behind by a worker daemon that is gone", dead)
        self._workdirs = make_workdirs()
        for index, io in enumerate(self._io):
            io.keeper = asyncio.create_task(self._keep_host(index))
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
                f"worker could not register with the master at {self.master_address} "
                f"within {self.connect_timeout_s:g}s"
            )
        self._monitor_task = asyncio.create_task(self._monitor_forever())
        deadline = asyncio.get_running_loop().time() + self.connect_timeout_s * 2
        while self.wait_ready and self.pool.started() < len(self.pool):
            if self._fatal is not None:
                raise self._fatal
            if asyncio.get_running_loop().time() > deadline:
                started = self.pool.started()
                if not started:
                    raise ClusterConnectionError("actor hosts did not start in time; see the log for their errors")
                log.warning("%d of %d actor hosts did not start in time; serving with the others meanwhile",
                            len(self.pool) - started, len(self.pool))
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
        """Daemon loop: end every actor host (SIGTERM, then SIGKILL) and start none again."""
        self._closing = True
        self.pool.close()
        for io in self._io:
            for task in io.tasks():
                task.cancel()
        every_pid = [io.proc.pid for io in self._io if io.proc is not None]
        procs = [io.proc for io in self._io if io.proc is not None and io.proc.returncode is None]
        for proc in procs:
            signal_proc(proc, signal.SIGTERM)
        if procs:
            _, pending = await asyncio.wait([asyncio.create_task(p.wait()) for p in procs], timeout=3.0)
            for proc in procs:
                if proc.returncode is None:
                    signal_proc(proc, signal.SIGKILL)
            if pending:
                await asyncio.wait(pending, timeout=2.0)
        for pid in every_pid:  # _keep_host, which would have, is cancelled
            _shm.remove_owned_by(pid)
        for io, host in zip(self._io, self.pool.hosts):
            tasks = io.tasks()
            if tasks:
                await asyncio.gather(*tasks, return_exceptions=True)
            remove_dir(host.workdir)

    # ---- actor host processes ---------------------------------------------------------------

    async def _keep_host(self, index: int) -> None:
        """Daemon loop, one task per host: keep a warm actor host at ``index``. Start it, wait
        for its exit, clean up after it, report, start a fresh one; until the daemon closes."""
        io = self._io[index]
        while not self.pool.closing:
            try:
                await self._spawn(index)
            except (OSError, ValueError, asyncio.IncompleteReadError) as e:
                await self._clean_up(index)
                delay = self.pool.start_failed(index)
                log.error("slot %d: actor host failed to start: %s", index, e)
                await asyncio.sleep(delay)
                continue
            assert io.proc is not None
            returncode = await io.proc.wait()
            effects = self.pool.exited(index, returncode)
            self._apply(effects)  # a warm host's SlotLost: tell the master at once
            if effects.events:
                log.warning("slot %d: its warm actor host exited: %s; starting another", index,
                            describe_exit(returncode), extra=_logs.ids(worker_id=self.worker_id, slot=index))
            own_cause = await self._clean_up(index)
            report = self.pool.reported(index, own_cause)
            if report is not None:
                actor = report.actor
                log.info("actor %s (%s) exited: %s", actor.actor_id, actor.class_name, report.cause,
                         extra=_logs.ids(actor_id=actor.actor_id, worker_id=self.worker_id, slot=index))
                self.output.actor_ended(actor.actor_id)  # its last lines go before its exit
                self._emit(report.event())
            if not self.pool.restart(index):
                return

    async def _spawn(self, index: int) -> None:
        """Daemon loop: start host ``index``'s process and wait until it says it is ready.
        Raises if it cannot start or says something else; ``_clean_up`` then ends it."""
        io = self._io[index]
        workdir = tempfile.mkdtemp(prefix=f"slot{index}-", dir=self._workdirs)
        env = dict(os.environ, PYTHONUNBUFFERED="1", ACTORRT_PRELOAD=",".join(self.preload))
        for name in ("ACTORRT_TOKEN", "ACTORRT_TLS_CA", "ACTORRT_TLS_CERT", "ACTORRT_TLS_KEY"):
            env.pop(name, None)
        if self.token:
            env["ACTORRT_TOKEN"] = self.token
        if self.tls is not None:  # actor hosts serve clients with this node's certificate
            env.update(self.tls.env())
        stats_r, stats_w = _metrics.stats_pipe()  # call statistics; never mixed with user output
        env[_metrics.METRICS_FD_ENV] = str(stats_w)
        try:
            proc = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "actorrt._host",
                "--bind",
                self.node_ip,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                cwd=workdir,
                env=env,
                pass_fds=(stats_w,),
                start_new_session=True,  # its own process group: the daemon can end all it started
            )
        except BaseException:
            os.close(stats_r)
            remove_dir(workdir)
            raise
        finally:
            os.close(stats_w)
        io.proc = proc
        self.pool.spawned(index, proc.pid, workdir)
        assert proc.stdout is not None and proc.stderr is not None
        io.stats = asyncio.create_task(_metrics.read_host_stats(stats_r, proc, self.metrics))
        io.stderr = asyncio.create_task(self._pump(index, proc.stderr, sys.stderr))
        line = (await proc.stdout.readline()).decode(errors="replace").strip()
        if not line.startswith(READY_PREFIX):
            raise ValueError(f"unexpected first line from actor host: {line!r}")
        port = int(line.split()[1])
        io.stdout = asyncio.create_task(self._pump(index, proc.stdout, sys.stdout))
        self._apply(self.pool.ready(index, f"{self.node_ip}:{port}"))

    async def _clean_up(self, index: int) -> str:
        """Daemon loop: after host ``index``'s process ended (or failed to start; it is killed
        then), end what it started, remove its shared memory and folder, and let its output
        readers finish (at most 1s: a process that inherited the pipes must not hold back the
        exit report). Returns why its actor said it ended itself, if it did."""
        io, host = self._io[index], self.pool.hosts[index]
        proc, own_cause = io.proc, ""
        if proc is not None:
            if proc.returncode is None:  # it never became ready
                signal_proc(proc, signal.SIGKILL)
                await proc.wait()
            _shm.remove_owned_by(proc.pid)  # replies its client never took
            _shm.remove_if_gone(self.metrics.shm_peers.pop(proc.pid, ()))  # calls of a dead client
            kill_group(proc.pid)  # whatever the actor started dies with it
        readers = io.readers()
        if readers:
            _, late = await asyncio.wait(readers, timeout=1.0)
            for task in late:
                task.cancel()
            await asyncio.gather(*readers, return_exceptions=True)
        io.stats = io.stderr = io.stdout = None
        if proc is not None:
            own_cause = self.metrics.exit_causes.pop(proc.pid, "")  # sys.exit in a method
        remove_dir(host.workdir)
        io.proc = None
        return own_cause

    async def _pump(self, index: int, stream: asyncio.StreamReader, sink: object) -> None:
        """Drain one of an actor host's output pipes until EOF, whatever comes (huge lines,
        binary, no newline, floods), so the actor never blocks in a write. Lines, each cut to
        ``_logs.MAX_LINE_BYTES`` kept bytes, go to its log file and owner (``self.output``), and
        to ours prefixed with its class, pid and id when echoing. Runs on the daemon's loop; a
        routing error is logged once and draining goes on."""
        splitter = _logs.LineSplitter()
        complained = False
        while True:
            chunk = await stream.read(OUTPUT_CHUNK)
            texts = splitter.feed(chunk) if chunk else splitter.finish()
            try:
                self._route(index, texts, sink)
            except Exception:  # noqa: BLE001 - the pipe must keep draining, or the actor blocks
                if not complained:
                    log.exception("slot %d: could not route actor output; still draining", index)
                    complained = True
            if not chunk:
                return

    def _route(self, index: int, texts: list[str], sink: object) -> None:
        """Daemon loop: lines of host ``index`` to its actor's log and owner, and/or echoed."""
        if not texts:
            return
        host = self.pool.hosts[index]
        actor, pid = host.actor, host.pid
        if actor is not None:
            self.output.lines(actor.actor_id, actor.class_name, pid, texts, stderr=sink is sys.stderr)
        if actor is None or self.echo_output:
            label = f"(idle pid={pid})" if actor is None else _logs.prefix(actor.class_name, actor.actor_id, pid)
            echoed = "\n".join(f"{label} {text}" for text in texts)
            try:
                print(echoed, file=sink, flush=True)  # type: ignore[call-overload]
            except (OSError, ValueError):
                pass

    def _host_views(self) -> list[_metrics.SlotView]:
        """The pool as the metrics collector sees it (called on the metrics HTTP thread)."""
        views = []
        for host in list(self.pool.hosts):
            actor, state = host.actor, host.state
            shown = "busy" if actor is not None else "ready" if state is HostState.READY else "starting"
            views.append(_metrics.SlotView(shown, host.pid, actor.actor_id if actor else "",
                                           actor.class_name if actor else ""))
        return views

    def _apply(self, effects: Effects) -> None:
        """Daemon loop: send a transition's events to the master and its signals to processes."""
        for event in effects.events:
            self._emit(event)
        for sig in effects.signals:
            if sig.delay_s:
                asyncio.get_running_loop().call_later(sig.delay_s, self._send_signal, sig)
            else:
                self._send_signal(sig)

    def _send_signal(self, sig: Signal) -> None:
        if sig.host is None:
            kill_pid(sig.pid, sig.signum)
            return
        proc = self._io[sig.host].proc
        if proc is not None and proc.pid == sig.pid:  # not a fresh host's process since
            signal_proc(proc, sig.signum)

    def _running(self, index: int) -> bool:
        proc = self._io[index].proc
        return proc is not None and proc.returncode is None

    async def _monitor_forever(self) -> None:
        """Daemon loop: enforce memory limits often; send a heartbeat with RSS per actor every
        interval."""
        period = 0.2
        ticks = 0
        while True:
            await asyncio.sleep(period)
            ticks += 1
            heartbeat = ticks * period >= self.heartbeat_interval_s
            if not heartbeat and not self.pool.limits_set():
                continue
            live = [h for h in self.pool.serving() if self._running(h.index)]
            table = process_table()
            rss: dict[str, int] = {}
            for host in live:
                assert host.actor is not None
                actor_id = host.actor.actor_id
                tree = process_tree(host.pid, table)
                used = sum(table[pid].rss_bytes for pid in tree)
                rss[actor_id] = used
                effects = self.pool.memory_used(host.index, used, tuple(tree))
                if effects.signals:
                    log.warning("actor %s: %s", actor_id, host.stop_cause)
                self._apply(effects)
            if heartbeat:
                ticks = 0
                self._emit(pb.WorkerEvent(heartbeat=pb.Heartbeat(load=os.getloadavg()[0], actor_rss_bytes=rss)))

    # ---- the session with the master -----------------------------------------------------------

    def _emit(self, event: pb.WorkerEvent) -> None:
        self._events.put_nowait(event)

    def _start_actor(self, cmd: pb.StartActor) -> None:
        """Daemon loop: the master placed an actor on one of our hosts."""
        effects = self.pool.assign(cmd)
        if effects.refused:
            log.info("slot %d: not starting actor %s: %s", cmd.slot, cmd.actor_id, effects.refused,
                     extra=_logs.ids(actor_id=cmd.actor_id, worker_id=self.worker_id, slot=cmd.slot))
        self._apply(effects)

    def _stop_actor(self, cmd: pb.StopActor) -> None:
        """Daemon loop: the master asks an actor to end (unknown ones are ignored)."""
        self._apply(self.pool.stop(cmd.actor_id, cmd.reason))

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
            )
            for h in self.pool.serving()
            if h.actor is not None and self._running(h.index)
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
            except grpc.RpcError as e:
                err = _rpc.translate(e, "worker session", self.master_address)
                if e.code() in (grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.FAILED_PRECONDITION,
                                grpc.StatusCode.INVALID_ARGUMENT):
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
            if self._closing or not self.reconnect:
                return
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, 2.0)

    async def _refused(self, err: BaseException) -> None:
        """The master we had joined refuses us now (a new token, another version): the actors
        we host must not keep running code sent under the old trust. Stop every host and set
        ``refused``; whoever runs the daemon then closes it, and ``close()`` raises ``err`` (so
        ``actorrt connect`` exits non-zero saying why)."""
        hosted = sum(1 for _ in self.pool.serving())
        log.error("%s; stopping this worker and its %d actor hosts (%d actors)", err, len(self.pool), hosted,
                  extra=_logs.ids(worker_id=self.worker_id, address=self.master_address))
        await self._stop_hosts()
        self.refused.set()

    async def _session_once(self) -> None:
        if self._channel is None:
            tls = self.tls and _rpc.TLS(self.tls.ca or self.tls.cert, self.tls.cert, self.tls.key)
            self._channel = _rpc.open_channel(self.master_address, tls)
        stub = pb_grpc.MasterStub(self._channel)
        call = stub.WorkerSession(metadata=_rpc.auth_metadata(self.token))
        # Anything queued for the old master is stale: the registration re-reports the truth.
        while not self._events.empty():
            self._events.get_nowait()
        await call.write(self._registration())
        reply = await call.read()
        if reply is grpc.aio.EOF or not reply.HasField("worker_registered"):
            raise ClusterConnectionError("the master closed the worker session during registration")
        self.worker_id = reply.worker_registered.worker_id
        self.heartbeat_interval_s = reply.worker_registered.heartbeat_interval_s or 1.0
        log.info("registered with %s as %s", self.master_address, self.worker_id)
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
                    self._emit(pb.WorkerEvent(actor_log=_logs.answer_log_read(self.output, cmd.read_actor_log)))
        finally:
            writer.cancel()
            call.cancel()

    async def _write_events(self, call: grpc.aio.StreamStreamCall) -> None:
        while True:
            event = await self._events.get()
            await call.write(event)
