"""The master at scale, by simulation: thousands of worker daemons and tens of thousands of actors.

    python bench/scale.py --nodes 2000 --slots-per-node 32 --actors 20000   # the full run
    python bench/scale.py --nodes 200 --slots-per-node 16 --actors 2000     # CI size (tests/master/test_scale.py)
    python bench/scale.py --curve 100,500,1000,2000 --plot bench/scale.png   # cost against N

A real master runs in its own process (``Master``, as ``actorrt start`` runs it). Simulated worker
daemons run in ``--node-procs`` other processes, many per process on one event loop, each with
its own gRPC channel and connection (as separate machines would have): they speak the real
``WorkerSession`` protocol (register, SlotReady for every slot, heartbeats carrying every hosted
actor's RSS, ActorExited and a fresh SlotReady when told to stop an actor, SLOT_NOT_READY for a
slot that is not ready, re-registration with their live actors and the daemon's backoff when the
master goes away) but start no host processes: the endpoints they announce are never served.
Simulated clients in ``--clients`` processes each hold one real ``ClientSession`` and place
actors at the protocol level (``PlaceActor`` -> ``ActorPlaced``, what ``Cluster.create_actor``
sends and waits for before it constructs), ``--window`` requests in flight per client.

Phases, each printed as one JSON line on stdout (``{"phase": ...}``), then a summary line
(``{"phase": "summary", ...}``):

- ``register``: every node registered and every slot ready in the master's table.
- ``place``: A placements; ``placements_per_s`` (from the first request sent to the last answer),
  ``placement_p50_ms``/``p99_ms`` (request sent -> ActorPlaced read, per request),
  ``master_cpu_pct`` (the master's CPU time over that wall time; 100 = one core).
- ``status``: ``status_ms``, the median of 3 ``Cluster.status()`` calls (the client API that
  ``actorrt status`` uses: RPC plus conversion to dicts) with A actors; ``status_rpc_ms`` the
  bare ``GetClusterStatus`` RPC; ``status_bytes`` its size; ``cli_status_s`` one
  ``actorrt status --json`` run, interpreter start included (``cli_status_ok``: it listed all).
- ``idle``: ``master_idle_cpu_pct`` over ``--idle-s`` seconds with every node heartbeating (RSS
  of every actor) and nothing else happening.
- ``kill``: clients release ``--kill`` actors; ``kill_p50_ms``/``p99_ms`` release -> ActorDied.
- ``node_loss``: one node goes silent (its stream stays open, nothing more is sent);
  ``node_loss_detect_s`` is the time until the owners of all its actors got ActorDied (what
  raises ``ActorDiedError`` in a real client), against ``worker_timeout_s``.
- ``reconnect``: the master is SIGKILLed and started again on the same port; ``reconnect_s`` is
  the time from its restart until every remaining node re-registered with its live actors (and
  a status then shows them all); ``reconnect_from_kill_s`` counts from the kill.

``master_rss_mb`` is the master's resident set after placing A actors, ``master_peak_rss_mb``
its high-water mark. Timings depend on the machine and its load: say which when quoting them.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import signal
import socket
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc

HERE = Path(__file__).resolve().parent
if str(HERE.parent) not in sys.path:
    sys.path.insert(0, str(HERE.parent))

import actorrt  # noqa: E402 - after the sys.path line above, so the bench runs from a checkout
from actorrt.common.errors import SLOT_NOT_READY  # noqa: E402
from actorrt.master.heartbeats import HEARTBEATS_PER_S  # noqa: E402
from actorrt.transport import rpc as _rpc  # noqa: E402
from actorrt.v1 import common_pb2  # noqa: E402
from actorrt.v1 import master_pb2 as pb  # noqa: E402
from actorrt.v1 import master_pb2_grpc as pb_grpc  # noqa: E402

CLK_TCK = os.sysconf("SC_CLK_TCK")


def append_line(path: str, line: str) -> None:
    with open(path, "a") as f:
        f.write(line + "\n")


def emit(**fields: Any) -> None:
    print(json.dumps(fields), flush=True)


def pct(values: list[float], q: float) -> float:
    """Nearest-rank percentile."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q / 100 * len(ordered) + 0.5) - 1))]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def rss_mb(pid: int, key: str = "VmRSS") -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1]) / 1024
    return float("nan")


# ---- the master's process ---------------------------------------------------------------------


async def master_main(args: argparse.Namespace) -> None:
    from actorrt.master.server import Master

    master = Master(
        "127.0.0.1",
        args.port,
        heartbeat_interval_s=args.heartbeat_s,
        worker_timeout_s=args.worker_timeout_s,
        client_grace_s=args.client_grace_s,
    )
    async with master:
        emit(event="master_ready", pid=os.getpid(), address=master.address)
        await asyncio.Event().wait()


# ---- simulated worker daemons -------------------------------------------------------------------


@dataclass
class SimActor:
    cmd: pb.StartActor
    rss: int


@dataclass
class SimNode:
    """One simulated worker daemon: the real WorkerSession protocol, no host processes."""

    name: str
    address: str
    slots: int
    port_base: int
    shared_channel: grpc.aio.Channel | None
    worker_id: str = ""
    actors: dict[int, SimActor] = field(default_factory=dict)  # slot -> actor
    ready: set[int] = field(default_factory=set)
    silent: bool = False
    sessions: int = 0  # sessions opened: registrations the master answered
    mark: int = 0  # ``sessions`` when the orchestrator was about to kill the master
    interval: float = 1.0  # the heartbeat interval the master asked for
    registered: asyncio.Event = field(default_factory=asyncio.Event)
    outbox: asyncio.Queue[pb.WorkerEvent] = field(default_factory=asyncio.Queue)

    def endpoint(self, slot: int) -> str:
        return f"127.0.0.1:{self.port_base + slot}"

    def registration(self) -> pb.WorkerEvent:
        live = [
            pb.LiveActor(
                actor_id=a.cmd.actor_id,
                slot=slot,
                endpoint=self.endpoint(slot),
                client_id=a.cmd.client_id,
                class_name=a.cmd.class_name,
                resources=a.cmd.resources,
                gpu_ids=a.cmd.gpu_ids,
            )
            for slot, a in self.actors.items()
        ]
        return pb.WorkerEvent(
            register_worker=pb.RegisterWorker(
                version=_rpc.PROTOCOL_VERSION,
                node=self.name,
                node_ip="127.0.0.1",
                cpus=self.slots,
                gpus=0,
                memory_bytes=64 << 30,
                worker_id=self.worker_id,
                live_actors=live,
                pid=os.getpid(),
            )
        )

    async def run(self) -> None:
        backoff = 0.1
        channel = self.shared_channel
        if channel is None:  # a connection of its own, as a separate machine would have
            channel = grpc.aio.insecure_channel(
                self.address, options=[*_rpc.channel_options(), ("grpc.use_local_subchannel_pool", 1)]
            )
        stub = pb_grpc.MasterStub(channel)
        while not self.silent:
            try:
                await self.session_once(stub)
                backoff = 0.1
            except grpc.RpcError:
                pass
            if self.silent:
                return
            self.registered.clear()
            await asyncio.sleep(backoff)  # the real daemon's backoff: 0.1 s doubling to 2 s
            backoff = min(backoff * 2, 2.0)

    async def session_once(self, stub: pb_grpc.MasterStub) -> None:
        call = stub.WorkerSession()
        self.outbox = asyncio.Queue()
        # Warm hosts survive a lost master; a freed slot is warm again by the next session.
        self.ready = set(range(self.slots)) - set(self.actors)
        await call.write(self.registration())
        reply = await call.read()
        if reply is grpc.aio.EOF or not reply.HasField("worker_registered"):
            raise grpc.aio.AioRpcError(grpc.StatusCode.UNAVAILABLE, grpc.aio.Metadata(), grpc.aio.Metadata())
        self.worker_id = reply.worker_registered.worker_id
        self.interval = reply.worker_registered.heartbeat_interval_s or 1.0
        self.sessions += 1
        for slot in sorted(self.ready):
            self.outbox.put_nowait(pb.WorkerEvent(slot_ready=pb.SlotReady(slot=slot, endpoint=self.endpoint(slot))))
        self.registered.set()
        tasks = [asyncio.create_task(self._write(call)), asyncio.create_task(self._heartbeat())]
        try:
            while (cmd := await call.read()) is not grpc.aio.EOF:
                kind = cmd.WhichOneof("command")
                if kind == "start_actor":
                    self._start(cmd.start_actor)
                elif kind == "stop_actor":
                    self._stop(cmd.stop_actor)
                elif kind == "worker_registered":  # the master retuned the heartbeat interval
                    self.interval = cmd.worker_registered.heartbeat_interval_s or self.interval
        finally:
            for task in tasks:
                task.cancel()
            call.cancel()

    def _start(self, cmd: pb.StartActor) -> None:
        if cmd.slot not in self.ready or cmd.slot in self.actors:
            self.outbox.put_nowait(
                pb.WorkerEvent(
                    actor_exited=pb.ActorExited(
                        actor_id=cmd.actor_id, slot=cmd.slot, cause=SLOT_NOT_READY, exit_code=-1
                    )
                )
            )
            return
        self.ready.discard(cmd.slot)
        self.actors[cmd.slot] = SimActor(cmd, rss=random.randint(80, 400) << 20)

    def _stop(self, cmd: pb.StopActor) -> None:
        for slot, actor in list(self.actors.items()):
            if actor.cmd.actor_id == cmd.actor_id:
                del self.actors[slot]
                self.outbox.put_nowait(
                    pb.WorkerEvent(
                        actor_exited=pb.ActorExited(
                            actor_id=cmd.actor_id, slot=slot, cause=f"stopped: {cmd.reason}", exit_code=-15
                        )
                    )
                )
                asyncio.get_running_loop().call_later(0.05, self._slot_warm_again, slot)
                return

    def _slot_warm_again(self, slot: int) -> None:
        if slot not in self.actors and not self.silent:
            self.ready.add(slot)
            self.outbox.put_nowait(pb.WorkerEvent(slot_ready=pb.SlotReady(slot=slot, endpoint=self.endpoint(slot))))

    async def _heartbeat(self) -> None:
        await asyncio.sleep(random.uniform(0, self.interval))  # daemons started at different moments
        while True:
            if not self.silent:
                rss = {a.cmd.actor_id: a.rss for a in self.actors.values()}
                self.outbox.put_nowait(pb.WorkerEvent(heartbeat=pb.Heartbeat(load=0.5, actor_rss_bytes=rss)))
            await asyncio.sleep(self.interval)

    async def _write(self, call: grpc.aio.StreamStreamCall) -> None:
        while True:
            event = await self.outbox.get()
            if self.silent:
                continue  # a lost node: nothing reaches the master any more
            try:
                await call.write(event)
            except (grpc.RpcError, asyncio.InvalidStateError):
                return  # the session ended: the reader sees it and reconnects


async def nodes_main(args: argparse.Namespace) -> None:
    shared = None
    if args.shared_channel:
        shared = grpc.aio.insecure_channel(args.address, options=_rpc.channel_options())
    nodes = [
        SimNode(f"sim-{i:05d}", args.address, args.slots_per_node, 20000 + (i % 1000) * 40, shared)
        for i in range(args.first, args.first + args.count)
    ]
    by_name = {n.name: n for n in nodes}
    tasks = []
    for node in nodes:
        tasks.append(asyncio.create_task(node.run()))
        await asyncio.sleep(0.001)  # not all in the same millisecond
    await asyncio.gather(*(n.registered.wait() for n in nodes))
    emit(event="registered", count=len(nodes), t=time.monotonic())
    reader = await stdin_reader()
    while line := await reader.readline():
        words = line.decode().split()
        if not words:
            continue
        if words[0] == "silence":
            node = by_name[words[1]]
            node.silent = True
            emit(event="silenced", node=node.name, actors=len(node.actors), t=time.monotonic())
        elif words[0] == "mark":  # the master is about to be killed
            for n in nodes:
                n.mark = n.sessions
            emit(event="marked")
        elif words[0] == "await_reregistered":  # every live node registered with the new master
            live = [n for n in nodes if not n.silent]
            while any(n.sessions <= n.mark or not n.registered.is_set() for n in live):
                await asyncio.sleep(0.02)
            emit(event="reregistered", count=len(live), t=time.monotonic())
        elif words[0] == "quit":
            break
    for task in tasks:
        task.cancel()


async def stdin_reader() -> asyncio.StreamReader:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    return reader


# ---- simulated clients --------------------------------------------------------------------------


class SimClient:
    """One client: a real ClientSession, placing at the protocol level."""

    def __init__(self, address: str, client_id: str, window: int) -> None:
        self.address = address
        self.client_id = client_id
        self.window = asyncio.Semaphore(window)
        self.channel = grpc.aio.insecure_channel(address, options=_rpc.channel_options())
        self.stub = pb_grpc.MasterStub(self.channel)
        self.call: grpc.aio.StreamStreamCall | None = None
        self.outbox: asyncio.Queue[pb.ClientEvent] = asyncio.Queue()
        self.up = asyncio.Event()
        self.sent: dict[int, float] = {}
        self.latencies: list[float] = []
        self.placed: dict[str, str] = {}  # actor_id -> node
        self.pending: dict[int, pb.ClientEvent] = {}
        self.died: dict[str, tuple[float, str]] = {}  # actor_id -> (when, cause)
        self.death_waiters: dict[str, asyncio.Future[float]] = {}
        self.done = asyncio.Event()
        self.to_place = 0
        self.failed = 0

    async def open(self) -> None:
        self.call = self.stub.ClientSession()
        await self.call.write(
            pb.ClientEvent(
                open_session=pb.OpenSession(
                    version=_rpc.PROTOCOL_VERSION,
                    client_id=self.client_id,
                    hostname="sim",
                    pid=os.getpid(),
                    mute_actor_output=True,
                )
            )
        )
        first = await self.call.read()
        if not isinstance(first, pb.ClientNotice) or not first.HasField("session_opened"):  # or EOF
            raise RuntimeError("the master did not open the session")
        self.up.set()

    async def serve(self) -> None:
        """Read notices; reopen the session (resending unanswered requests) if the master goes."""
        writer = asyncio.create_task(self._write())
        while True:
            assert self.call is not None
            try:
                while isinstance(notice := await self.call.read(), pb.ClientNotice):  # else EOF
                    self._on(notice)
            except grpc.RpcError:
                pass
            self.up.clear()
            while True:
                await asyncio.sleep(0.2)
                try:
                    await self.open()
                    break
                except (grpc.RpcError, RuntimeError):
                    continue
            for msg in self.pending.values():
                self.outbox.put_nowait(msg)
        writer.cancel()

    async def _write(self) -> None:
        while True:
            msg = await self.outbox.get()
            while True:
                await self.up.wait()
                try:
                    assert self.call is not None
                    await self.call.write(msg)
                    break
                except grpc.RpcError:
                    self.up.clear()

    def _on(self, notice: pb.ClientNotice) -> None:
        kind = notice.WhichOneof("notice")
        now = time.monotonic()
        if kind == "actor_placed":
            p = notice.actor_placed
            sent = self.sent.pop(p.request_id, None)
            self.pending.pop(p.request_id, None)
            if sent is not None:
                self.latencies.append(now - sent)
                self.placed[p.actor_id] = p.node
                self.window.release()
                self._maybe_done()
        elif kind == "placement_failed":
            if self.sent.pop(notice.placement_failed.request_id, None) is not None:
                self.pending.pop(notice.placement_failed.request_id, None)
                self.failed += 1
                self.window.release()
                self._maybe_done()
        elif kind == "actor_died":
            d = notice.actor_died
            self.died[d.actor_id] = (now, d.cause)
            self.placed.pop(d.actor_id, None)
            fut = self.death_waiters.pop(d.actor_id, None)
            if fut is not None and not fut.done():
                fut.set_result(now)

    def _maybe_done(self) -> None:
        if len(self.latencies) + self.failed >= self.to_place:
            self.done.set()

    async def place(self, count: int, first_id: int) -> tuple[float, float]:
        self.to_place = count
        started = time.monotonic()
        for request_id in range(first_id, first_id + count):
            await self.window.acquire()
            msg = pb.ClientEvent(
                place_actor=pb.PlaceActor(
                    request_id=request_id,
                    resources=common_pb2.Resources(num_cpus=1),
                    class_name="SimActor",
                    timeout_s=120.0,
                )
            )
            self.sent[request_id] = time.monotonic()
            self.pending[request_id] = msg
            self.outbox.put_nowait(msg)
        await self.done.wait()
        return started, time.monotonic()

    async def kill(self, count: int) -> list[float]:
        victims = random.sample(sorted(self.placed), min(count, len(self.placed)))
        loop = asyncio.get_running_loop()
        waits = []
        for actor_id in victims:
            fut: asyncio.Future[float] = loop.create_future()
            self.death_waiters[actor_id] = fut
            sent = time.monotonic()
            self.outbox.put_nowait(
                pb.ClientEvent(release_actor=pb.ReleaseActor(actor_id=actor_id, reason="bench kill"))
            )
            waits.append((sent, fut))
        return [await fut - sent for sent, fut in waits]

    async def node_lost(self, node: str) -> tuple[int, float]:
        mine = [a for a, n in self.placed.items() if n == node]
        loop = asyncio.get_running_loop()
        futs = []
        for actor_id in mine:
            fut: asyncio.Future[float] = loop.create_future()
            self.death_waiters[actor_id] = fut
            futs.append(fut)
        times = [await f for f in futs]
        return len(mine), max(times, default=0.0)


async def clients_main(args: argparse.Namespace) -> None:
    client = SimClient(args.address, f"sim-client-{args.first}", args.window)
    await client.open()
    server = asyncio.create_task(client.serve())
    emit(event="client_ready")
    reader = await stdin_reader()
    while line := await reader.readline():
        words = line.decode().split()
        if not words:
            continue
        if words[0] == "place":
            count, first_id = int(words[1]), int(words[2])
            started, ended = await client.place(count, first_id)
            emit(
                event="placed",
                started=started,
                ended=ended,
                latencies=client.latencies,
                failed=client.failed,
                nodes=sorted(set(client.placed.values())),
            )
        elif words[0] == "kill":
            emit(event="killed", latencies=await client.kill(int(words[1])))
        elif words[0] == "watch":
            count, last = await client.node_lost(words[1])
            emit(event="node_lost", node=words[1], actors=count, t=last)
        elif words[0] == "count":
            emit(event="count", actors=len(client.placed))
        elif words[0] == "quit":
            break
    server.cancel()
    await client.channel.close(grace=None)


# ---- the orchestrator -------------------------------------------------------------------------


class Child:
    def __init__(self, proc: asyncio.subprocess.Process, label: str) -> None:
        self.proc = proc
        self.label = label

    async def line(self, timeout: float) -> dict[str, Any]:
        assert self.proc.stdout is not None
        raw = await asyncio.wait_for(self.proc.stdout.readline(), timeout)
        if not raw:
            raise RuntimeError(f"{self.label} exited (status {await self.proc.wait()})")
        return json.loads(raw)

    async def expect(self, event: str, timeout: float) -> dict[str, Any]:
        while True:
            msg = await self.line(timeout)
            if msg.get("event") == event:
                return msg

    def send(self, text: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write((text + "\n").encode())


async def spawn(role: str, label: str, *extra: str, env: dict[str, str] | None = None) -> Child:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        str(Path(__file__).resolve()),
        "--role",
        role,
        *extra,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        env=env,
        limit=2**28,
    )
    return Child(proc, label)


def split(total: int, parts: int) -> list[int]:
    return [total // parts + (1 if i < total % parts else 0) for i in range(parts)]


async def status_timings(address: str, expected_actors: int) -> dict[str, Any]:
    def measure() -> dict[str, Any]:
        with actorrt.connect(address, timeout=60) as cluster:
            api = []
            for _ in range(3):
                t0 = time.perf_counter()
                st = cluster.status().result()
                api.append(time.perf_counter() - t0)
        with grpc.insecure_channel(address, options=_rpc.channel_options()) as ch:
            stub = pb_grpc.MasterStub(ch)
            rpc = []
            for _ in range(3):
                t0 = time.perf_counter()
                msg = stub.GetClusterStatus(pb.GetClusterStatusRequest(), timeout=60)
                rpc.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        cli = subprocess.run(
            [sys.executable, "-m", "actorrt", "status", "--address", address, "--json", "--timeout", "60"],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        cli_s = time.perf_counter() - t0
        cli_actors = len(json.loads(cli.stdout)["actors"]) if cli.returncode == 0 else -1
        return {
            "cli_status_s": cli_s,
            "cli_status_ok": cli_actors == expected_actors,
            "status_ms": statistics.median(api) * 1e3,
            "status_rpc_ms": statistics.median(rpc) * 1e3,
            "status_bytes": msg.ByteSize(),
            "status_actors": len(st.actors),
            "status_nodes": len(st.nodes),
            "status_ok": len(st.actors) == expected_actors,
        }

    return await asyncio.to_thread(measure)


def table_counts(address: str) -> tuple[int, int, int]:
    """(nodes, actors, slots ready) in the master's table."""
    with grpc.insecure_channel(address, options=_rpc.channel_options()) as ch:
        msg = pb_grpc.MasterStub(ch).GetClusterStatus(pb.GetClusterStatusRequest(), timeout=60)
    return len(msg.nodes), len(msg.actors), sum(n.slots_ready for n in msg.nodes)


async def start_master(port: int, args: argparse.Namespace) -> Child:
    env = dict(os.environ)
    if args.validate:
        env["ACTORRT_VALIDATE"] = "1"
    else:
        env.pop("ACTORRT_VALIDATE", None)  # O(table) per event: a test's check, not a benchmark's
    master = await spawn(
        "master",
        "master",
        "--port",
        str(port),
        "--heartbeat-s",
        str(args.heartbeat_s),
        "--worker-timeout-s",
        str(args.worker_timeout_s),
        "--client-grace-s",
        str(args.client_grace_s),
        env=env,
    )
    await master.expect("master_ready", 30)
    return master


async def run_one(args: argparse.Namespace) -> dict[str, Any]:
    port = free_port()
    address = f"127.0.0.1:{port}"
    summary: dict[str, Any] = {"nodes": args.nodes, "slots": args.nodes * args.slots_per_node}
    master = await start_master(port, args)
    node_procs: list[Child] = []
    clients: list[Child] = []
    try:
        # ---- register
        t0 = time.monotonic()
        first = 0
        for i, count in enumerate(split(args.nodes, args.node_procs)):
            extra = [
                "--address",
                address,
                "--first",
                str(first),
                "--count",
                str(count),
                "--slots-per-node",
                str(args.slots_per_node),
            ]
            node_procs.append(
                await spawn("nodes", f"nodes-{i}", *extra, *(["--shared-channel"] if args.shared_channel else []))
            )
            first += count
        for p in node_procs:
            await p.expect("registered", 600)
        while True:
            nodes, _, ready = await asyncio.to_thread(table_counts, address)
            if nodes == args.nodes and ready == args.nodes * args.slots_per_node:
                break
            await asyncio.sleep(0.2)
        emit(
            phase="register",
            nodes=nodes,
            slots_ready=ready,
            seconds=round(time.monotonic() - t0, 2),
            master_rss_mb=round(rss_mb(master.proc.pid), 1),
        )

        # ---- place
        for i in range(args.clients):
            clients.append(
                await spawn(
                    "clients", f"client-{i}", "--address", address, "--first", str(i), "--window", str(args.window)
                )
            )
        for c in clients:
            await c.expect("client_ready", 60)
        cpu0, w0 = cpu_seconds(master.proc.pid), time.monotonic()
        first_id = 1
        for c, count in zip(clients, split(args.actors, args.clients), strict=True):
            c.send(f"place {count} {first_id}")
            first_id += count
        results = [await c.expect("placed", 600) for c in clients]
        cpu1, w1 = cpu_seconds(master.proc.pid), time.monotonic()
        latencies = [x for r in results for x in r["latencies"]]
        span = max(r["ended"] for r in results) - min(r["started"] for r in results)
        place = {
            "actors_placed": len(latencies),
            "placements_failed": sum(r["failed"] for r in results),
            "placements_per_s": round(len(latencies) / span, 1),
            "placement_p50_ms": round(pct(latencies, 50) * 1e3, 2),
            "placement_p99_ms": round(pct(latencies, 99) * 1e3, 2),
            "placement_max_ms": round(max(latencies) * 1e3, 2),
            "master_cpu_pct": round(100 * (cpu1 - cpu0) / (w1 - w0), 1),
            "place_seconds": round(span, 2),
        }
        emit(phase="place", **place)
        summary.update(place)
        await asyncio.sleep(1.0)
        summary["master_rss_mb"] = round(rss_mb(master.proc.pid), 1)

        # ---- status
        st = await status_timings(address, len(latencies))
        emit(phase="status", **st)
        summary.update({k: round(v, 1) if isinstance(v, float) else v for k, v in st.items()})

        # ---- idle
        await asyncio.sleep(1.0)
        cpu0, w0 = cpu_seconds(master.proc.pid), time.monotonic()
        await asyncio.sleep(args.idle_s)
        idle = round(100 * (cpu_seconds(master.proc.pid) - cpu0) / (time.monotonic() - w0), 1)
        emit(
            phase="idle",
            master_idle_cpu_pct=idle,
            seconds=args.idle_s,
            heartbeat_base_s=args.heartbeat_s,
            heartbeat_s=round(max(args.heartbeat_s, min(args.nodes / HEARTBEATS_PER_S, args.worker_timeout_s / 4)), 2),
        )
        summary["master_idle_cpu_pct"] = idle

        # ---- kill
        if args.kill:
            for c, count in zip(clients, split(args.kill, args.clients), strict=True):
                c.send(f"kill {count}")
            kills = [x for c in clients for x in (await c.expect("killed", 120))["latencies"]]
            kill = {
                "killed": len(kills),
                "kill_p50_ms": round(pct(kills, 50) * 1e3, 2),
                "kill_p99_ms": round(pct(kills, 99) * 1e3, 2),
            }
            emit(phase="kill", **kill)
            summary.update(kill)

        # ---- node loss: the node holding an actor of the first client goes silent
        victim = random.choice(results[0]["nodes"])
        for c in clients:
            c.send(f"watch {victim}")
        owner = node_procs[_proc_of(victim, args)]
        owner.send(f"silence {victim}")
        silenced = await owner.expect("silenced", 30)
        lost = [await c.expect("node_lost", args.worker_timeout_s * 3 + 30) for c in clients]
        detect = max(x["t"] for x in lost) - silenced["t"]
        loss = {
            "node_loss_detect_s": round(detect, 2),
            "node_loss_actors": sum(x["actors"] for x in lost),
            "worker_timeout_s": args.worker_timeout_s,
            "node_loss_within_timeout": detect <= args.worker_timeout_s + min(1.0, args.worker_timeout_s / 4) + 0.5,
        }
        emit(phase="node_loss", node=victim, **loss)
        summary.update(loss)

        # ---- reconnect: SIGKILL the master, start it again on the same port
        for c in clients:
            c.send("count")
        expected_actors = sum([(await c.expect("count", 30))["actors"] for c in clients])
        summary["master_peak_rss_mb"] = round(rss_mb(master.proc.pid, "VmHWM"), 1)
        for p in node_procs:
            p.send("mark")
        for p in node_procs:
            await p.expect("marked", 30)
        t_kill = time.monotonic()
        master.proc.send_signal(signal.SIGKILL)
        await master.proc.wait()
        t_restart = time.monotonic()
        master = await start_master(port, args)
        for p in node_procs:
            p.send("await_reregistered")
        back = [await p.expect("reregistered", 600) for p in node_procs]
        t_back = max(b["t"] for b in back)
        nodes, actors, _ = await asyncio.to_thread(table_counts, address)
        rec = {
            "reconnect_s": round(t_back - t_restart, 2),
            "reconnect_from_kill_s": round(t_back - t_kill, 2),
            "reconnect_nodes": nodes,
            "reconnect_actors": actors,
            "reconnect_complete": nodes == args.nodes - 1 and actors == expected_actors,
        }
        emit(phase="reconnect", expected_actors=expected_actors, **rec)
        summary.update(rec)
    finally:
        for child in [*clients, *node_procs]:
            if child.proc.returncode is None:
                child.send("quit")
        for child in [*clients, *node_procs, master]:
            try:
                if child.proc.returncode is None and child is master:
                    child.proc.send_signal(signal.SIGTERM)
                await asyncio.wait_for(child.proc.wait(), 20)
            except TimeoutError:
                child.proc.kill()
                await child.proc.wait()
    return summary


def _proc_of(node: str, args: argparse.Namespace) -> int:
    index = int(node.split("-")[1])
    first = 0
    for i, count in enumerate(split(args.nodes, args.node_procs)):
        if first <= index < first + count:
            return i
        first += count
    raise ValueError(node)


async def orchestrate(args: argparse.Namespace) -> int:
    def report(summary: dict[str, Any]) -> None:
        emit(phase="summary", **summary)
        if args.out:
            append_line(args.out, json.dumps({"phase": "summary", **summary}))

    if args.plot_from:
        rows = [json.loads(line) for line in Path(args.plot_from).read_text().splitlines() if line.strip()]
        plot(sorted(rows, key=lambda r: r["nodes"]), args.plot, args)
        return 0
    if not args.curve:
        summary = await run_one(args)
        report(summary)
        return 0 if summary.get("actors_placed") == args.actors and summary.get("reconnect_complete") else 1
    rows = []
    for n in [int(x) for x in args.curve.split(",")]:
        one = argparse.Namespace(**vars(args))
        one.nodes, one.actors = n, n * args.actors_per_node
        one.kill = max(1, one.actors // 100)
        summary = await run_one(one)
        report(summary)
        rows.append(summary)
    if args.plot:
        plot(rows, args.plot, args)
    return 0


def plot(rows: list[dict[str, Any]], path: str, args: argparse.Namespace) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    n = [r["nodes"] for r in rows]
    fig, axes = plt.subplots(1, 5, figsize=(20, 3.8))
    panels = [
        ("placements_per_s", "placements/s", 2000, "goal >= 2,000/s"),
        ("placement_p99_ms", "placement p99 (ms)", 50, "goal <= 50 ms"),
        ("master_rss_mb", "master RSS (MB)", 1024, "goal <= 1 GB"),
        ("status_ms", "Cluster.status() (ms)", 500, "goal <= 500 ms"),
        ("master_idle_cpu_pct", "idle master CPU (% of a core)", 25, "goal <= 25 %"),
    ]
    for ax, (key, label, goal, goal_label) in zip(axes, panels, strict=True):
        ax.plot(n, [r[key] for r in rows], "o-", label="actorrt (simulated nodes)")
        ax.axhline(goal, color="grey", linestyle="--", label=goal_label)
        ax.set_xlabel(
            f"nodes ({rows[0]['slots'] // rows[0]['nodes']} slots each, "
            f"{rows[0]['actors_placed'] // rows[0]['nodes']} actors/node)"
        )
        ax.set_ylabel(label)
        ax.set_ylim(bottom=0)
        ax.legend(fontsize=7)
        ax.grid(alpha=0.3)
    fig.suptitle("actorrt master at scale (loaded 2-core machine; see bench/README.md)", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nodes", type=int, default=200)
    ap.add_argument("--slots-per-node", type=int, default=16)
    ap.add_argument("--actors", type=int, default=2000)
    ap.add_argument("--clients", type=int, default=4, help="client processes placing actors")
    ap.add_argument("--window", type=int, default=8, help="placement requests in flight per client")
    ap.add_argument("--node-procs", type=int, default=4, help="processes the simulated nodes share")
    ap.add_argument(
        "--shared-channel",
        action="store_true",
        help="the nodes of one process share one connection (default: one each)",
    )
    ap.add_argument("--kill", type=int, default=-1, help="actors to release (default: 1%% of --actors)")
    ap.add_argument("--heartbeat-s", type=float, default=1.0)
    ap.add_argument("--worker-timeout-s", type=float, default=10.0)
    ap.add_argument("--client-grace-s", type=float, default=120.0)
    ap.add_argument("--idle-s", type=float, default=5.0)
    ap.add_argument("--validate", action="store_true", help="run the master with ACTORRT_VALIDATE=1")
    ap.add_argument("--curve", default="", help="comma-separated node counts: one run each")
    ap.add_argument("--actors-per-node", type=int, default=10, help="with --curve: actors = nodes x this")
    ap.add_argument("--plot", default="", help="with --curve: write a PNG of the curves here")
    ap.add_argument("--plot-from", default="", help="draw --plot from the summary lines of an --out file")
    ap.add_argument("--out", default="", help="append each summary line to this file too")
    ap.add_argument(
        "--role", default="orchestrator", choices=["orchestrator", "master", "nodes", "clients"], help=argparse.SUPPRESS
    )
    ap.add_argument("--port", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--address", default="", help=argparse.SUPPRESS)
    ap.add_argument("--first", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--count", type=int, default=0, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.kill < 0:
        args.kill = max(1, args.actors // 100)
    role = {"master": master_main, "nodes": nodes_main, "clients": clients_main}.get(args.role)
    if role is not None:
        actorrt.run(role(args))
        return 0
    return actorrt.run(orchestrate(args))


if __name__ == "__main__":
    sys.exit(main())
