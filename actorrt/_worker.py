"""The worker daemon: registers its node with the master and keeps a warm pool of actor hosts.

One host process per CPU slot, started with ``subprocess`` (never fork after gRPC exists). The
daemon reaps them, enforces per-actor memory limits (over each actor's whole process tree),
reports exits with their cause (an idle warm host's too, as ``SlotLost``), and starts a fresh
host after each exit. It drains every host's output whatever its shape, so no actor blocks in a
print. If the master goes away the daemon reconnects with backoff and re-reports its live
actors, so a restarted master rebuilds its table; if the master refuses it (a new token), it
stops its hosts and ends. Slots work in folders under one temp folder per daemon, which a later
daemon removes should this one die uncleanly. Runs on one event loop.
"""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
import signal
import socket
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import grpc
from prometheus_client import CollectorRegistry

from actorrt import _logs, _metrics, _resources, _rpc, _shm
from actorrt._errors import ClusterConnectionError
from actorrt._host import READY_PREFIX
from actorrt._lifecycle import Service, Status
from actorrt._table import SLOT_NOT_READY
from actorrt.v1 import master_pb2 as pb
from actorrt.v1 import master_pb2_grpc as pb_grpc

__all__ = ["WorkerDaemon", "describe_exit"]

log = logging.getLogger("actorrt.worker")
_PAGE = os.sysconf("SC_PAGE_SIZE")
OUTPUT_CHUNK = 256 * 2**10  # bytes read from an actor's pipe at a time


def describe_exit(returncode: int) -> str:
    if returncode == 0:
        return "its owner closed it"
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = "unknown signal"
        return f"killed by signal {-returncode} ({name})"
    return f"its process exited with code {returncode}"


@dataclass(frozen=True)
class _Proc:
    ppid: int
    session: int
    rss_bytes: int


def _process_table() -> dict[int, _Proc]:
    """Every live process of this machine, from one pass over ``/proc`` (Linux)."""
    table = {}
    try:
        names = os.listdir("/proc")
    except OSError:
        return {}
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
            table[int(name)] = _Proc(int(fields[1]), int(fields[3]), int(fields[21]) * _PAGE)
        except (OSError, IndexError, ValueError):
            continue  # it just ended
    return table


def _process_tree(root: int, table: dict[int, _Proc]) -> list[int]:
    """``root`` and every process it started: its descendants and the members of its session
    (an actor host leads its own, ``start_new_session``), so a child that re-parented to init
    when its parent exited still counts."""
    children: dict[int, list[int]] = {}
    for pid, proc in table.items():
        children.setdefault(proc.ppid, []).append(pid)
    tree = {root} | {pid for pid, proc in table.items() if proc.session == root}
    todo = list(tree)
    while todo:
        for child in children.get(todo.pop(), ()):
            if child not in tree:
                tree.add(child)
                todo.append(child)
    return sorted(tree & table.keys())


def _memory_bytes() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (OSError, ValueError):
        return 0


@dataclass
class _Slot:
    index: int
    proc: asyncio.subprocess.Process | None = None
    endpoint: str = ""
    workdir: str = ""
    ready: bool = False
    actor: pb.StartActor | None = None
    stop_cause: str = ""
    tasks: list[asyncio.Task[None]] = field(default_factory=list)

    @property
    def started(self) -> bool:
        """Its host came up: it is warm, or already hosting an actor (no longer 'ready')."""
        return self.ready or self.actor is not None

    @property
    def label(self) -> str:
        pid = self.proc.pid if self.proc else 0
        if self.actor is None:
            return f"(idle pid={pid})"
        return _logs.prefix(self.actor.class_name, self.actor.actor_id, pid)


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
        ``wait_ready``: ``start()`` returns only once every slot's host is warm.
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
        _resources.check_counts(self.cpus, gpus)  # before a slot per cpu is made
        self.gpus = gpus
        self.node_ip = node_ip
        self.node = node or socket.gethostname()
        self.connect_timeout_s = connect_timeout_s
        self.reconnect = reconnect
        self.wait_ready = wait_ready
        self.preload = tuple(preload)
        self.worker_id = ""
        self.heartbeat_interval_s = 1.0
        self.slots = [_Slot(i) for i in range(self.cpus)]
        self._events: asyncio.Queue[pb.WorkerEvent] = asyncio.Queue()
        self._registered = asyncio.Event()
        self._session_task: asyncio.Task[None] | None = None
        self._monitor_task: asyncio.Task[None] | None = None
        self._channel: grpc.aio.Channel | None = None
        self._fatal: BaseException | None = None
        # Set once a master we had joined refused us and our hosts are stopped: the daemon is done.
        self.refused = asyncio.Event()
        self._closing = False
        self._workdirs = ""  # this daemon's folder of slot working directories (_make_workdirs)
        self.echo_output = echo_output
        self.output = _logs.ActorOutput(
            lambda msg: self._emit(pb.WorkerEvent(actor_output=msg)), log_dir
        )
        self.metrics = _metrics.WorkerMetrics(self._slot_views, metrics_registry)

    # ---- lifecycle --------------------------------------------------------------------------

    async def _start(self) -> None:
        if self.cpus < 1:
            raise ValueError(f"a worker needs at least 1 cpu, got {self.cpus}")
        for dead in _remove_dead_workdirs():
            log.info("removed %s, left behind by a worker daemon that is gone", dead)
        self._workdirs = _make_workdirs()
        for slot in self.slots:
            slot.tasks.append(asyncio.create_task(self._run_slot(slot)))
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
        while self.wait_ready and not all(s.started for s in self.slots):
            if self._fatal is not None:
                raise self._fatal
            if asyncio.get_running_loop().time() > deadline:
                started = sum(s.started for s in self.slots)
                if not started:
                    raise ClusterConnectionError("actor hosts did not start in time; see the log for their errors")
                log.warning("%d of %d actor hosts did not start in time; serving with the others meanwhile",
                            len(self.slots) - started, len(self.slots))
                break
            await asyncio.sleep(0.02)

    async def _close(self) -> None:
        for task in (self._session_task, self._monitor_task):
            if task is not None and task is not asyncio.current_task():
                task.cancel()
        await self._stop_hosts()
        _remove_dir(self._workdirs)
        self.output.close()
        if self._channel is not None:
            await self._channel.close(grace=None)
        if self._fatal is not None and self.status is not Status.FAILED:  # refused after joining
            raise self._fatal

    async def _stop_hosts(self) -> None:
        """End every actor host (SIGTERM, then SIGKILL) and keep none warm any more."""
        self._closing = True
        for slot in self.slots:
            for task in slot.tasks:
                task.cancel()
        every_pid = [s.proc.pid for s in self.slots if s.proc is not None]
        procs = [s.proc for s in self.slots if s.proc is not None and s.proc.returncode is None]
        for proc in procs:
            _signal(proc, signal.SIGTERM)
        if procs:
            _, pending = await asyncio.wait([asyncio.create_task(p.wait()) for p in procs], timeout=3.0)
            for proc in procs:
                if proc.returncode is None:
                    _signal(proc, signal.SIGKILL)
            if pending:
                await asyncio.wait(pending, timeout=2.0)
        for pid in every_pid:  # _run_slot, which would have, is cancelled
            _shm.remove_owned_by(pid)
        for slot in self.slots:
            if slot.tasks:
                await asyncio.gather(*slot.tasks, return_exceptions=True)
            _remove_dir(slot.workdir)

    # ---- actor host processes ---------------------------------------------------------------

    async def _run_slot(self, slot: _Slot) -> None:
        """Keep one warm host in this slot: spawn, wait for exit, report, repeat."""
        failures = 0
        while not self._closing:
            try:
                await self._spawn(slot)
                failures = 0
            except (OSError, ValueError, asyncio.IncompleteReadError) as e:
                failures += 1
                log.error("slot %d: actor host failed to start: %s", slot.index, e)
                await asyncio.sleep(min(5.0, 0.2 * 2**failures))
                continue
            assert slot.proc is not None
            returncode = await slot.proc.wait()
            if slot.ready and slot.actor is None:  # tell the master at once: it must not place here
                slot.ready = False
                self._emit(pb.WorkerEvent(slot_lost=pb.SlotLost(slot=slot.index, cause=describe_exit(returncode))))
                log.warning("slot %d: its warm actor host exited: %s; starting another", slot.index,
                            describe_exit(returncode), extra=_logs.ids(worker_id=self.worker_id, slot=slot.index))
            _shm.remove_owned_by(slot.proc.pid)  # replies its client never took
            _shm.remove_if_gone(self.metrics.shm_peers.pop(slot.proc.pid, ()))  # calls of a dead client
            _kill_group(slot.proc.pid)  # whatever the actor started dies with it
            # Output readers end at EOF, normally at once; a process that inherited the pipes
            # must not hold back the exit report.
            readers = slot.tasks[1:]
            if readers:
                _, late = await asyncio.wait(readers, timeout=1.0)
                for task in late:
                    task.cancel()
                await asyncio.gather(*readers, return_exceptions=True)
            del slot.tasks[1:]
            own_cause = self.metrics.exit_causes.pop(slot.proc.pid, "")  # sys.exit in a method
            actor, cause = slot.actor, slot.stop_cause or own_cause or describe_exit(returncode)
            slot.proc, slot.ready, slot.actor, slot.stop_cause = None, False, None, ""
            _remove_dir(slot.workdir)
            if actor is not None:
                log.info("actor %s (%s) exited: %s", actor.actor_id, actor.class_name, cause,
                         extra=_logs.ids(actor_id=actor.actor_id, worker_id=self.worker_id, slot=slot.index))
                self.output.actor_ended(actor.actor_id)  # its last lines go before its exit
                self._emit(
                    pb.WorkerEvent(
                        actor_exited=pb.ActorExited(
                            actor_id=actor.actor_id, slot=slot.index, cause=cause, exit_code=returncode
                        )
                    )
                )

    async def _spawn(self, slot: _Slot) -> None:
        slot.workdir = tempfile.mkdtemp(prefix=f"slot{slot.index}-", dir=self._workdirs)
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
                cwd=slot.workdir,
                env=env,
                pass_fds=(stats_w,),
                start_new_session=True,  # its own process group: the daemon can end all it started
            )
        except BaseException:
            os.close(stats_r)
            raise
        finally:
            os.close(stats_w)
        slot.proc = proc
        assert proc.stdout is not None and proc.stderr is not None
        slot.tasks.append(asyncio.create_task(_metrics.read_host_stats(stats_r, proc, self.metrics)))
        slot.tasks.append(asyncio.create_task(self._pump(slot, proc.stderr, sys.stderr)))
        line = (await proc.stdout.readline()).decode(errors="replace").strip()
        if not line.startswith(READY_PREFIX):
            _signal(proc, signal.SIGKILL)
            await proc.wait()
            raise ValueError(f"unexpected first line from actor host: {line!r}")
        port = int(line.split()[1])
        slot.endpoint = f"{self.node_ip}:{port}"
        slot.tasks.append(asyncio.create_task(self._pump(slot, proc.stdout, sys.stdout)))
        slot.ready = True
        self._emit(pb.WorkerEvent(slot_ready=pb.SlotReady(slot=slot.index, endpoint=slot.endpoint)))

    async def _pump(self, slot: _Slot, stream: asyncio.StreamReader, sink: object) -> None:
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
                self._route(slot, texts, sink)
            except Exception:  # noqa: BLE001 - the pipe must keep draining, or the actor blocks
                if not complained:
                    log.exception("slot %d: could not route actor output; still draining", slot.index)
                    complained = True
            if not chunk:
                return

    def _route(self, slot: _Slot, texts: list[str], sink: object) -> None:
        if not texts:
            return
        actor, pid = slot.actor, slot.proc.pid if slot.proc else 0
        if actor is not None:
            self.output.lines(actor.actor_id, actor.class_name, pid, texts, stderr=sink is sys.stderr)
        if actor is None or self.echo_output:
            label = slot.label
            echoed = "\n".join(f"{label} {text}" for text in texts)
            try:
                print(echoed, file=sink, flush=True)  # type: ignore[call-overload]
            except (OSError, ValueError):
                pass

    def _slot_views(self) -> list[_metrics.SlotView]:
        """The pool as the metrics collector sees it (called on the metrics HTTP thread)."""
        views = []
        for slot in list(self.slots):
            actor, proc = slot.actor, slot.proc
            state = "busy" if actor is not None else "ready" if slot.ready else "starting"
            views.append(_metrics.SlotView(state, proc.pid if proc else 0,
                                           actor.actor_id if actor else "", actor.class_name if actor else ""))
        return views

    def _start_actor(self, cmd: pb.StartActor) -> None:
        slot = self.slots[cmd.slot] if cmd.slot < len(self.slots) else None
        if slot is None or not slot.ready or slot.actor is not None or slot.proc is None:
            self._emit(
                pb.WorkerEvent(
                    actor_exited=pb.ActorExited(
                        actor_id=cmd.actor_id, slot=cmd.slot, cause=SLOT_NOT_READY, exit_code=-1
                    )
                )
            )
            return
        slot.actor = cmd
        slot.ready = False

    def _stop_actor(self, cmd: pb.StopActor) -> None:
        for slot in self.slots:
            if slot.actor is not None and slot.actor.actor_id == cmd.actor_id and slot.proc is not None:
                slot.stop_cause = slot.stop_cause or f"stopped: {cmd.reason or 'asked by the master'}"
                _signal(slot.proc, signal.SIGTERM)
                asyncio.get_running_loop().call_later(2.0, _signal, slot.proc, signal.SIGKILL)
                return

    async def _monitor_forever(self) -> None:
        """Enforce memory limits often; send a heartbeat with RSS per actor every interval."""
        period = 0.2
        ticks = 0
        while True:
            await asyncio.sleep(period)
            ticks += 1
            heartbeat = ticks * period >= self.heartbeat_interval_s
            live = [s for s in self.slots if s.actor is not None and s.proc is not None and s.proc.returncode is None]
            if not heartbeat and not any(s.actor and s.actor.resources.max_memory_mb for s in live):
                continue
            table = _process_table()
            rss: dict[str, int] = {}
            for slot in live:
                assert slot.actor is not None and slot.proc is not None
                tree = _process_tree(slot.proc.pid, table)
                used = sum(table[pid].rss_bytes for pid in tree)
                rss[slot.actor.actor_id] = used
                limit_mb = slot.actor.resources.max_memory_mb
                if limit_mb and used > limit_mb * 2**20 and not slot.stop_cause:
                    slot.stop_cause = (
                        f"memory limit exceeded: {used / 2**20:.0f} MB used, max_memory_mb={limit_mb} "
                        f"(over the actor's {len(tree)} processes)"
                    )
                    log.warning("actor %s: %s", slot.actor.actor_id, slot.stop_cause)
                    for pid in tree:  # the children too: one may have left the host's group
                        _kill_pid(pid)
            if heartbeat:
                ticks = 0
                self._emit(pb.WorkerEvent(heartbeat=pb.Heartbeat(load=os.getloadavg()[0], actor_rss_bytes=rss)))

    # ---- the session with the master -----------------------------------------------------------

    def _emit(self, event: pb.WorkerEvent) -> None:
        self._events.put_nowait(event)

    def _registration(self) -> pb.WorkerEvent:
        live = [
            pb.LiveActor(
                actor_id=s.actor.actor_id,
                slot=s.index,
                endpoint=s.endpoint,
                client_id=s.actor.client_id,
                class_name=s.actor.class_name,
                resources=s.actor.resources,
                gpu_ids=s.actor.gpu_ids,
            )
            for s in self.slots
            if s.actor is not None and s.proc is not None and s.proc.returncode is None
        ]
        return pb.WorkerEvent(
            register_worker=pb.RegisterWorker(
                version=_rpc.PROTOCOL_VERSION,
                node=self.node,
                node_ip=self.node_ip,
                cpus=self.cpus,
                gpus=self.gpus,
                memory_bytes=_memory_bytes(),
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
        hosted = sum(s.actor is not None for s in self.slots)
        log.error("%s; stopping this worker and its %d actor hosts (%d actors)", err, len(self.slots), hosted,
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
        for slot in self.slots:
            if slot.ready and slot.actor is None:
                self._emit(pb.WorkerEvent(slot_ready=pb.SlotReady(slot=slot.index, endpoint=slot.endpoint)))
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
                elif kind == "worker_registered":  # mid-session: the master retuned the interval
                    self.heartbeat_interval_s = cmd.worker_registered.heartbeat_interval_s or self.heartbeat_interval_s
        finally:
            writer.cancel()
            call.cancel()

    async def _write_events(self, call: grpc.aio.StreamStreamCall) -> None:
        while True:
            event = await self._events.get()
            await call.write(event)


def _signal(proc: asyncio.subprocess.Process, sig: int) -> None:
    if proc.returncode is None:
        try:
            proc.send_signal(sig)
        except ProcessLookupError:
            pass


def _kill_pid(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


_WORKDIRS_PREFIX = "actorrt-worker-"
_OWNER_FILE = "owner"


def _start_time(pid: int) -> str:
    """When ``pid`` started (clock ticks since boot), or "" if no such process: a pid plus its
    start time names one process even after the pid is reused."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[19].decode()
    except (OSError, IndexError):
        return ""


def _make_workdirs() -> str:
    """This daemon's folder in the temp dir, ``actorrt-worker-<pid>-*``, holding one working
    directory per slot (shipped files land there) and an ``owner`` file naming this process, so
    a later daemon can remove it should this one die without cleaning up (SIGKILL)."""
    path = tempfile.mkdtemp(prefix=f"{_WORKDIRS_PREFIX}{os.getpid()}-")
    Path(path, _OWNER_FILE).write_text(f"{os.getpid()} {_start_time(os.getpid())}\n")
    return path


def _remove_dead_workdirs(grace_s: float = 60.0) -> list[str]:
    """Remove the folders of worker daemons of this machine that are gone; returns them. A folder
    whose owner file is missing or unreadable is removed once older than ``grace_s`` (it may be
    one that is being made right now)."""
    removed = []
    for path in Path(tempfile.gettempdir()).glob(_WORKDIRS_PREFIX + "*"):
        try:
            pid, started = (path / _OWNER_FILE).read_text().split()
            alive = _start_time(int(pid)) == started
        except (OSError, ValueError):
            try:
                alive = time.time() - path.stat().st_mtime < grace_s
            except OSError:
                continue
        if not alive:
            shutil.rmtree(path, ignore_errors=True)
            if not path.exists():
                removed.append(str(path))
    return removed


def _remove_dir(path: str) -> None:
    if path:
        shutil.rmtree(path, ignore_errors=True)


