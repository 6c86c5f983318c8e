"""The processes of a worker daemon's actor host pool: the I/O around ``HostPool``.

One task per host (``_keep_host``) starts its process (forked by the daemon's fork server,
``_forkserver``, or as a new interpreter where there is none; never forked here, where gRPC's
threads run), waits for its exit, cleans up after it (its process group, shared memory, working
folder), reports, and starts a fresh one. Every host's output is drained whatever its shape, so
no actor blocks in a print. ``measure`` enforces memory limits over each actor's whole process
tree. Whatever the pool's transitions return (``Effects``) is sent here: events through the
daemon's ``emit``, signals to processes. Runs on the daemon's event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from actorrt.common import actor_output
from actorrt.common import logs as _logs
from actorrt.transport import addresses, stats_pipe
from actorrt.transport import rpc as _rpc
from actorrt.transport import shm as _shm
from actorrt.v1 import master_pb2 as pb
from actorrt.worker import fork_server_link as _forked
from actorrt.worker.host_pool import Effects, HostPool, HostState, Signal, describe_exit
from actorrt.worker.load import LoadMeter
from actorrt.worker.metrics import SlotView, WorkerMetrics, read_host_stats
from actorrt.worker.output import LineSplitter, OutputRelay
from actorrt.worker.procs import (
    HostProcess,
    ProcInfo,
    kill_group,
    kill_pid,
    process_table,
    process_tree,
    remove_dir,
    signal_proc,
    tree_proportional_bytes,
)

__all__ = ["OUTPUT_CHUNK", "HostRunner"]

log = logging.getLogger("actorrt.worker")
OUTPUT_CHUNK = 256 * 2**10  # bytes read from an actor's pipe at a time
# A host may print this many lines (a preloaded module's banner) before its ready line ...
_MAX_LINES_BEFORE_READY = 1000
_SHOWN_BEFORE_READY = 500
# ... within this many seconds of its start (a new interpreter importing torch on a loaded
# machine takes a few); one that did not is killed and started again, as one that failed.
HOST_READY_TIMEOUT_S = 120.0
PSS_EVERY_S = 1.0  # how often an actor over its memory limit by RSS has its PSS read


@dataclass
class _HostIO:
    """The daemon-loop side of one pool host: its process and the tasks that serve it."""

    keeper: asyncio.Task[None] | None = None  # _keep_host: start it, wait, report, start again
    proc: HostProcess | None = None
    stats: asyncio.Task[None] | None = None  # its call statistics (read_host_stats)
    stderr: asyncio.Task[None] | None = None  # _pump of its stderr, from its start
    stdout: asyncio.Task[None] | None = None  # _pump of its stdout, once it said it is ready

    def readers(self) -> list[asyncio.Task[None]]:
        return [t for t in (self.stats, self.stderr, self.stdout) if t is not None]

    def tasks(self) -> list[asyncio.Task[None]]:
        return [t for t in (self.keeper, *self.readers()) if t is not None]


class HostRunner:
    """Keeps ``pool``'s hosts running as processes; see the module docstring."""

    def __init__(
        self,
        pool: HostPool,
        *,
        emit: Callable[[pb.WorkerEvent], None],
        output: OutputRelay,
        metrics: WorkerMetrics,
        node_ip: str,
        token: str | None,
        tls: _rpc.TLS | None,
        preload: tuple[str, ...],
        echo_output: bool,
        master_address: str = "",
    ) -> None:
        """``emit`` sends an event to the master; ``output`` routes actors' lines to their log
        files and owners; ``echo_output`` also prints them on this process's stdout/stderr."""
        self.pool = pool
        self._io = [_HostIO() for _ in pool.hosts]
        self._pss: dict[int, tuple[float, frozenset[int], int, int]] = {}  # host pid: (when, tree, RSS, PSS)
        self._trees: dict[str, tuple[int, list[int]]] = {}  # actor id: (host pid, tree), as last measured
        self._emit = emit
        self.output = output
        self.metrics = metrics
        self.node_ip = node_ip
        self.token = token
        self.tls = tls
        self.preload = preload
        self.echo_output = echo_output
        self.master_address = master_address  # actors reach their cluster there (handles, children)
        self.worker_id = ""  # for log records, once the daemon registered
        self._workdirs = ""
        self._forks: _forked.ForkServer | None = None

    @staticmethod
    async def _remove_dir(path: str) -> None:
        """Remove a slot's folder off the loop (many files can take seconds: heartbeats would
        stall), in a thread that ends with it: an executor's would stay in an embedded
        cluster's process."""
        loop = asyncio.get_running_loop()
        done: asyncio.Future[None] = loop.create_future()

        def removed() -> None:
            if not done.done():
                done.set_result(None)

        def remove() -> None:
            try:
                remove_dir(path)
            finally:
                with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
                    loop.call_soon_threadsafe(removed)

        threading.Thread(target=remove, name="actorrt-remove", daemon=True).start()
        await done

    def start(self, workdirs: str) -> None:
        """Daemon loop: start every host, each working in a folder under ``workdirs``."""
        self._workdirs = workdirs
        if _forked.available():
            self._forks = _forked.ForkServer(workdirs)
        for index, io in enumerate(self._io):
            io.keeper = asyncio.create_task(self._keep_host(index))

    async def stop(self) -> None:
        """Daemon loop: end every actor host (SIGTERM, then SIGKILL) and start none again."""
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
            kill_group(pid)  # what its actor started (a pool, a Popen) goes too
        for index, (io, host) in enumerate(zip(self._io, self.pool.hosts, strict=True)):
            tasks = io.tasks()
            if tasks:
                _, late = await asyncio.wait(tasks, timeout=5.0)
                if late:  # a task that outlived its cancellation (and started a host meanwhile)
                    late_proc = io.proc
                    if late_proc is not None and late_proc.returncode is None:
                        log.warning("actor host %d (pid %d) started as its daemon closed: killed", index, late_proc.pid)
                        signal_proc(late_proc, signal.SIGKILL)
                        kill_group(late_proc.pid)
                        _shm.remove_owned_by(late_proc.pid)
                    tasks = list({*io.tasks(), *late})  # with the readers it started since
                    for task in tasks:
                        task.cancel()
                    await asyncio.wait(tasks, timeout=5.0)
                await asyncio.gather(*(t for t in tasks if t.done()), return_exceptions=True)  # retrieved
            await self._remove_dir(host.workdir)
        if self._forks is not None:
            await self._forks.close()

    # ---- one host ---------------------------------------------------------------------------

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
                log.error("actor host %d failed to start: %s", index, e)
                await asyncio.sleep(delay)
                continue
            assert io.proc is not None
            returncode = await io.proc.wait()
            effects = self.pool.exited(index, returncode)
            self.apply(effects)  # a warm host's SlotLost: tell the master at once
            if effects.events:
                log.warning(
                    "warm actor host %d exited: %s; starting another",
                    index,
                    describe_exit(returncode),
                    extra=_logs.ids(worker_id=self.worker_id, slot=index),
                )
            own_cause = await self._clean_up(index)
            report = self.pool.reported(index, own_cause)
            if report is not None:
                actor = report.actor
                log.info(
                    "actor %s (%s) exited: %s",
                    actor.actor_id,
                    actor.class_name,
                    report.cause,
                    extra=_logs.ids(actor_id=actor.actor_id, worker_id=self.worker_id, slot=index),
                )
                self.output.actor_ended(actor.actor_id)  # its last lines go before its exit
                self._emit(report.event())
            if not self.pool.restart(index):
                return

    async def _spawn(self, index: int) -> None:
        """Daemon loop: start host ``index``'s process and wait until it says it is ready.
        Raises if it cannot start or says something else; ``_clean_up`` then ends it."""
        io = self._io[index]
        workdir = tempfile.mkdtemp(prefix=f"slot{index}-", dir=self._workdirs)
        env = self._host_env()
        stats_r, stats_w = stats_pipe.stats_pipe()  # call statistics; never mixed with user output
        try:
            proc = await self._start_process(workdir, env, stats_w)
        except BaseException:
            os.close(stats_r)
            remove_dir(workdir)
            raise
        finally:
            os.close(stats_w)
        io.proc = proc
        self.pool.spawned(index, proc.pid, workdir)
        assert proc.stdout is not None and proc.stderr is not None
        io.stats = asyncio.create_task(read_host_stats(stats_r, proc, self.metrics))
        io.stderr = asyncio.create_task(self._pump(index, proc.stderr, sys.stderr))
        port = await self._ready_port(index, proc.stdout)
        io.stdout = asyncio.create_task(self._pump(index, proc.stdout, sys.stdout))
        self.apply(self.pool.ready(index, addresses.host_port(self.node_ip, port)))

    async def _ready_port(self, index: int, stdout: asyncio.StreamReader) -> int:
        """Daemon loop: the port in host ``index``'s ready line. What a preloaded module or
        sitecustomize printed on import comes first: logged and skipped (a line over the
        reader's 64 KiB limit too). Raises ValueError for no ready line (the output ended, too
        many lines) within ``HOST_READY_TIMEOUT_S``."""
        line = last = ""
        try:
            async with asyncio.timeout(HOST_READY_TIMEOUT_S):
                for _ in range(_MAX_LINES_BEFORE_READY):
                    try:
                        raw = await stdout.readline()
                    except ValueError:  # over the limit: asyncio has read it off
                        line = last = "(a line over 64 KiB)"
                        log.info("actor host %d printed a line over 64 KiB before it was ready", index)
                        continue
                    line = raw.decode(errors="replace").strip()
                    if not raw or _rpc.HOST_READY_PREFIX in line:  # after a banner with no newline, too
                        break
                    last = line or last
                    log.info("actor host %d printed before it was ready: %s", index, line[:_SHOWN_BEFORE_READY])
        except TimeoutError:
            raise ValueError(
                f"no ready line from actor host within {HOST_READY_TIMEOUT_S:g} s "
                f"(last line: {last[:_SHOWN_BEFORE_READY]!r})"
            ) from None
        words = line[line.find(_rpc.HOST_READY_PREFIX) :].split() if _rpc.HOST_READY_PREFIX in line else []
        if len(words) < 2 or not words[1].isdigit():
            raise ValueError(f"no ready line from actor host (last line: {(line or last)[:_SHOWN_BEFORE_READY]!r})")
        return int(words[1])

    async def _start_process(self, workdir: str, env: dict[str, str], stats_w: int) -> HostProcess:
        """Daemon loop: a new host's process, forked by the fork server; started as a new
        interpreter if there is none, or if it cannot start (then never tried again: a preload
        that crashes it would crash every try; each host then reports its own failure)."""
        argv = ("--bind", self.node_ip)
        if self._forks is not None:
            try:
                return await self._forks.spawn(argv, workdir, env, stats_w)
            except _forked.ForkServerStartError as e:
                if self._forks is not None:  # once, not once per host that waited for it
                    log.warning("%s; actor hosts start as new processes from now on", e)
                    self._forks = None
        env[stats_pipe.METRICS_FD_ENV] = str(stats_w)
        return await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "actorrt.host.server",
            *argv,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            cwd=workdir,
            env=env,
            pass_fds=(stats_w,),
            start_new_session=True,  # its own process group: the daemon can end all it started
        )

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
        await self._remove_dir(host.workdir)
        io.proc = None
        return own_cause

    async def _pump(self, index: int, stream: asyncio.StreamReader, sink: object) -> None:
        """Drain one of an actor host's output pipes until EOF, whatever comes (huge lines,
        binary, no newline, floods), so the actor never blocks in a write. Lines, each cut to
        ``MAX_LINE_BYTES`` kept bytes, go to its log file and owner (``self.output``), and
        to ours prefixed with its class, pid and id when echoing. Runs on the daemon's loop; a
        routing error is logged once and draining goes on."""
        splitter = LineSplitter()
        complained = False
        while True:
            chunk = await stream.read(OUTPUT_CHUNK)
            texts = splitter.feed(chunk) if chunk else splitter.finish()
            try:
                self._route(index, texts, sink)
            except Exception:
                if not complained:
                    log.exception("actor host %d: could not route actor output; still draining", index)
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
            label = f"(idle pid={pid})" if actor is None else actor_output.prefix(actor.class_name, actor.actor_id, pid)
            echoed = "\n".join(f"{label} {text}" for text in texts)
            try:
                print(echoed, file=sink, flush=True)  # type: ignore[call-overload]
            except (OSError, ValueError):
                pass

    # ---- for the daemon ---------------------------------------------------------------------

    def views(self) -> list[SlotView]:
        """The pool as the metrics collector sees it (called on the metrics HTTP thread)."""
        views = []
        for host in list(self.pool.hosts):
            actor, state = host.actor, host.state
            shown = "busy" if actor is not None else "ready" if state is HostState.READY else "starting"
            views.append(SlotView(shown, host.pid, actor.actor_id if actor else "", actor.class_name if actor else ""))
        return views

    def apply(self, effects: Effects) -> None:
        """Daemon loop: send a transition's events to the master and its signals to processes."""
        for event in effects.events:
            self._emit(event)
        for sig in effects.signals:
            if sig.delay_s:
                asyncio.get_running_loop().call_later(sig.delay_s, self._send_signal, sig)
            else:
                self._send_signal(sig)

    def _send_signal(self, sig: Signal) -> None:
        """Daemon loop (also from ``call_later``): one signal of ``apply``."""
        if sig.host is None:
            kill_pid(sig.pid, sig.signum)
            return
        proc = self._io[sig.host].proc
        if proc is not None and proc.pid == sig.pid:  # not a fresh host's process since
            signal_proc(proc, sig.signum)

    def waited(self) -> set[int]:
        """Daemon loop: the pids of the processes this daemon started and asyncio waits for (the
        fork server, hosts started as new interpreters), which ``reap_orphans`` must leave.
        Forked hosts are the fork server's children, watched through pidfds: if it dies before
        them, they are re-parented to us, and reaping them is ours."""
        procs = [io.proc for io in self._io if isinstance(io.proc, asyncio.subprocess.Process)]
        if self._forks is not None and self._forks.proc is not None:
            procs.append(self._forks.proc)
        return {p.pid for p in procs if p.returncode is None}

    def running(self, index: int) -> bool:
        """Daemon loop: whether host ``index``'s process runs (the pool learns of an exit a
        moment after it happens)."""
        proc = self._io[index].proc
        return proc is not None and proc.returncode is None

    def measure(self, table: dict[int, ProcInfo] | None = None) -> dict[str, int]:
        """Daemon loop: the RSS of each live actor over its whole process tree, by actor id; an
        actor over its ``max_memory_mb`` is stopped (its processes killed). The limit is judged
        on the tree's proportional set size, read only once the RSS is over it: the RSS counts
        each page shared copy-on-write (with the fork server, between a forked pool's
        processes) once per process that maps it. ``table``: the process table to read (one
        read now by default); ``load`` then reads the same trees."""
        table = process_table() if table is None else table
        rss: dict[str, int] = {}
        self._trees = {}
        for host in [h for h in self.pool.serving() if self.running(h.index)]:
            assert host.actor is not None
            actor_id = host.actor.actor_id
            tree = process_tree(host.pid, table)
            self._trees[actor_id] = (host.pid, tree)
            used = rss[actor_id] = sum(table[pid].rss_bytes for pid in tree)
            limit_mb = host.actor.resources.max_memory_mb
            if limit_mb and used > limit_mb * 2**20:
                used = self._proportional(host.pid, tree, table, used)
            effects = self.pool.memory_used(host.index, used, tuple(tree))
            if effects.signals:
                log.warning("actor %s: %s", actor_id, host.stop_cause)
            self.apply(effects)
        return rss

    def load(self, meter: LoadMeter, table: dict[int, ProcInfo], now: float) -> dict[str, tuple[float, float]]:
        """Daemon loop, after ``measure(table)``: (CPU %, calls/s) of each actor it measured, by
        actor id, from ``meter`` fed the CPU ticks of its tree's processes in ``table`` and its
        host's latest call count; actors no longer measured are forgotten."""
        loads = {
            actor_id: meter.actor(
                actor_id,
                now,
                {pid: table[pid].cpu_ticks for pid in tree if pid in table},
                self.metrics.calls(host_pid),
            )
            for actor_id, (host_pid, tree) in self._trees.items()
        }
        meter.keep(loads)
        return loads

    def _proportional(self, root: int, tree: list[int], table: dict[int, ProcInfo], rss: int) -> int:
        """Daemon loop: the proportional set size of the tree of host ``root`` (whose RSS is
        ``rss``), read at most once a second while the tree keeps the same processes (each read
        walks every mapping of every process); in between, the last reading plus what the RSS
        grew by since. A process forked or ended meanwhile makes it read again (a fork's
        copy-on-write pages would count in full in the RSS)."""
        now, pids = time.monotonic(), frozenset(tree)
        last = self._pss.get(root)
        if last is not None and now - last[0] < PSS_EVERY_S and last[1] == pids:
            return last[3] + max(0, rss - last[2])
        pss = tree_proportional_bytes(tree, table)
        live = {h.pid for h in self.pool.serving()}
        self._pss = {pid: v for pid, v in self._pss.items() if pid in live}
        self._pss[root] = (now, pids, rss, pss)
        return pss

    def _host_env(self) -> dict[str, str]:
        """The environment of a new host: ours, with this daemon's token, TLS and preloads."""
        env = dict(os.environ, PYTHONUNBUFFERED="1", ACTORRT_PRELOAD=",".join(self.preload))
        for name in ("ACTORRT_TOKEN", "ACTORRT_TLS_CA", "ACTORRT_TLS_CERT", "ACTORRT_TLS_KEY", "ACTORRT_ADDRESS"):
            env.pop(name, None)
        if self.master_address:
            env["ACTORRT_ADDRESS"] = self.master_address
        if self.token:
            env["ACTORRT_TOKEN"] = self.token
        if self.tls is not None:  # actor hosts serve clients with this node's certificate
            env.update(self.tls.env())
        return env
