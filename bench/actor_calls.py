"""Actor call micro-benchmarks: cold start, actor creation, call latency, throughput, payloads.

    python bench/actor_calls.py                   # embedded local cluster, full run (~1-2 min)
    python bench/actor_calls.py --quick           # CI smoke test: tiny sizes and reps (< 30 s)
    python bench/actor_calls.py --address H:P     # a running cluster (``actorrt start``)
    python bench/actor_calls.py --reps 10 --out runs/actor_calls.jsonl
    python bench/actor_calls.py --only latency,pipelined
    python bench/actor_calls.py --peers ray,parl  # side by side, alternating (A B A B), ~10 min
    python bench/actor_calls.py --watchdog 600    # a run still going after 600 s says where, exits 3

stdout gets one JSON object per line and per measurement::

    {"bench": "call_latency_median", "system": "actorrt", "value": 212.4, "unit": "us", ...}

and stderr a table of the same numbers once everything ran. ``--out FILE`` writes the JSON lines
to FILE as well. Values are medians over ``--reps`` repetitions unless the name says otherwise.
A measurement that could not be taken has ``"value": null`` and an ``"error"``; the exit status
is then 1 (after every other bench has still run).

What each number means (``--only`` takes the group names in brackets):

[cold_start] One fresh Python process per repetition (``--_cold-start-child``), so every import
    and every process the runtime starts is paid for, as a user's first run would.
    - ``cold_start_connect_to_first_call`` (s): inside the child, from entering
      ``actorrt.connect()`` (embedded: starts master, worker and the actor host processes) to the
      result of the first call on a freshly created actor. With ``--address`` it is from
      connecting to the running cluster instead (field ``embedded`` is false).
    - ``cold_start_process_to_first_call`` (s): the same end point, measured by the parent from
      spawning the child's interpreter: adds interpreter start and ``import actorrt``.
[create] ``actor_create_warm`` (s): ``await Echo.remote()`` plus the first ``ping()`` result,
    with the worker's pool of warm actor hosts full (the bench waits for it to refill before
    each creation, since a host serves one actor and is then replaced).
[create_numpy] ``actor_create_warm_numpy`` (s, actorrt only): the same for ``NumpyEcho``
    (``bench/numpy_actor.py``), a class whose module imports numpy, as most real actor classes'
    modules do: what creation costs when the class needs a heavy import on the host.
[latency] ``call_latency_median`` / ``call_latency_p99`` (us): sequential ``await a.ping()``
    round trips (no arguments, returns None) after a warm-up. p99 is the nearest-rank percentile.
    ``call_latency_over_grpc_pingpong`` (x, actorrt only): our round trip divided by the
    strictest transport floor, a bare grpc.aio stream ping-pong (``await write(); await
    read()``) to an echo server process, both driven from the same process in alternating
    blocks of 50 calls; the median of the per-block ratios (``floors.PingPong``).
[pipelined] ``pipelined_calls_1_actor`` / ``pipelined_calls_2_actors`` (calls/s): N ``ping()``
    futures created back to back and then gathered, on one actor or alternating over two; timed
    from the first call made to the last result.
[payload] ``payload_to_actor_<size>`` / ``payload_from_actor_<size>`` (MiB/s, 1 MiB = 2**20 B):
    a numpy uint8 array of that size sent as the argument of ``take(arr)`` (returns None) or
    returned by ``make(n)``. The actor caches the array it returns, so ``make`` measures the
    transfer, not ``np.ones``; the first call of each size (which allocates) is not timed.
    A direction that fails is printed with ``"value": null`` and an ``"error"``, and is then
    measured with a ``bytes`` object of the same size instead (``payload_bytes_<dir>_<size>``).
    ``payload_torch_<dir>_<size>``: the same with a CPU torch uint8 tensor (``make_tensor``),
    when torch imports.
[idle] ``idle_rss_mb`` / ``idle_pss_mb`` (MB, 10**6 B) / ``idle_cpu_percent`` (% of one core) /
    ``idle_processes``: the bench process and every process it started (cluster with 2 free
    slots and no actor; for actorrt the embedded master + worker + 2 warm actor hosts), summed
    over ``--idle-seconds`` of nothing being called, after a 3 s settle. RSS counts shared pages
    once per process; PSS splits them.
[cpu] A pure-Python CPU-bound method calibrated to ``--cpu-seconds`` on one actor.
    ``cpu_1_actor`` (s): one actor runs it; ``cpu_2_actors`` (s): two actors each run the same
    work at once; ``cpu_speedup_2_actors`` (x) = 2 * t1 / t2 (2.0 is perfect scaling; it needs
    two free cores, so it reads low on a busy machine; ``best_of`` uses each side's fastest
    repetition). ``cpu_speedup_2_processes`` (x): the same work in two plain processes (a
    ``multiprocessing`` pool), interleaved with the actor runs: what this machine gives any
    program; ``cpu_speedup_over_processes`` (x) = ours / that (1.0: the runtime costs nothing).

Each system under test is a ``System`` (see below), driven by the same bench functions.

Side by side (``--peers ray,parl``, or ``--floors`` alone): every system runs in a fresh child
process of this script (``--_system-child NAME``, each with its own interpreter: ``--ray-python``
defaults to ``.venv-ray/bin/python`` when it exists), one child per system per round, the
systems alternating round after round (A B A B ...) for ``--rounds`` rounds; each number is then
the median over rounds of the child's own median. Besides us and the peers, two floors run in
the same rounds (``bench/floors.py``): a bare grpc.aio stream echo and a raw asyncio TCP echo,
for the latency and pipelined benches. A peer that cannot run here (PARL does not install on
Python 3.11) appears in the table with the reason instead of numbers. The table gives, for each
peer, our value divided by the peer's (``actorrt/ray``): below 1 is better for times, above 1
for rates.
"""

from __future__ import annotations

import argparse
import asyncio
import faulthandler
import functools
import importlib
import importlib.util
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import IO, Any, Protocol

MIB = 2**20
GROUPS = ("cold_start", "create", "create_numpy", "latency", "pipelined", "payload", "cpu", "idle")
HERE = os.path.dirname(os.path.abspath(__file__))


# ---- the actor every system runs --------------------------------------------------------------


class Echo:
    """The benchmark actor. Plain class: each system turns it into an actor its own way."""

    def __init__(self) -> None:
        self._made: tuple[float, Any] | None = None

    def ping(self) -> None:
        return None

    def echo(self, x: Any) -> Any:
        return x

    def take(self, x: Any) -> None:
        return None

    def make(self, n: int) -> Any:
        if self._made is None or self._made[0] != n:
            import numpy as np

            self._made = (n, np.ones(n, dtype=np.uint8))
        return self._made[1]

    def make_bytes(self, n: int) -> bytes:
        if self._made is None or self._made[0] != -n:
            self._made = (-n, b"\x01" * n)
        return self._made[1]

    def make_tensor(self, n: int) -> Any:
        if self._made is None or self._made[0] != n + 0.5:
            import torch

            self._made = (n + 0.5, torch.ones(n, dtype=torch.uint8))
        return self._made[1]

    def spin(self, n: int) -> float:
        """Pure-Python busy loop of ``n`` iterations; returns the seconds it took in here."""
        start = time.perf_counter()
        x = 0
        for i in range(n):
            x = (x + i * i) % 1_000_003
        return time.perf_counter() - start


# ---- what a system under test provides ----------------------------------------------------------


class ActorRef(Protocol):
    """One actor of class ``Echo`` on some system."""

    def method(self, name: str) -> Callable[..., Awaitable[Any]]:
        """A callable that starts a call of ``name`` now and returns an awaitable of its result.

        Bench loops fetch it once and call it many times, so a system's per-call cost is only
        what its own API costs."""
        ...


class System(Protocol):
    name: str
    groups: frozenset[str]  # the bench groups this system can run

    async def open(self) -> None:
        """Connect to (or start) the cluster; called once on the benchmark's event loop."""
        ...

    async def close(self) -> None: ...

    async def create(self) -> ActorRef:
        """A new ``Echo`` actor, constructed and ready to take calls."""
        ...

    async def kill(self, actor: ActorRef) -> None:
        """Stop the actor and free its resources; returns once they are free."""
        ...

    async def wait_idle(self, timeout_s: float = 60.0) -> None:
        """Wait until the system is ready to create actors at full speed again."""
        ...

    def cold_start_child(self, started: float) -> None:
        """Run inside a fresh interpreter (``started``: perf_counter when its main began): import,
        start/connect, create an actor, call it once, then print one JSON line
        ``{"first_call": true, "connect_to_first_call_s": .., "import_s": ..}`` to stdout
        (flushed) as soon as the first result is there; then shut down and return."""
        ...


# ---- actorrt ------------------------------------------------------------------------------------


class _ActorrtRef:
    def __init__(self, handle: Any) -> None:
        self.handle = handle

    def method(self, name: str) -> Callable[..., Awaitable[Any]]:
        return getattr(self.handle, name)


def _actorrt_echo() -> Any:
    """``Echo`` made a remote class; a subclass, so the plain ``Echo`` stays clean for peers."""
    import actorrt

    cls = type("Echo", (Echo,), {"__module__": Echo.__module__, "__qualname__": "Echo"})
    return actorrt.remote_class(cls)


class ActorrtSystem:
    name = "actorrt"
    groups = frozenset(GROUPS)

    def __init__(self, address: str | None) -> None:
        self.address = address
        self._cluster_cm: Any = None
        self.cluster: Any = None
        self._echo: Any = None
        self._numpy_echo: Any = None
        self.watchdog_s: float | None = None  # the cold-start child's, from its --watchdog

    async def open(self) -> None:
        import actorrt

        self._echo = _actorrt_echo()
        # The 2-actor benches need two slots at once, even on a 1-core machine.
        cpus = None if (os.cpu_count() or 1) >= 2 else 2
        self._cluster_cm = actorrt.connect(self.address, num_cpus=cpus)
        self.cluster = await self._cluster_cm.__aenter__()

    async def close(self) -> None:
        if self._cluster_cm is not None:
            await self._cluster_cm.__aexit__(None, None, None)
            self._cluster_cm = None

    async def create(self) -> ActorRef:
        return _ActorrtRef(await self._echo.remote())

    def numpy_echo(self) -> Any:
        """``NumpyEcho`` (``bench/numpy_actor.py``) made a remote class; importing its module
        imports numpy here too, so call this before timing anything."""
        if self._numpy_echo is None:
            from numpy_actor import NumpyEcho

            import actorrt

            self._numpy_echo = actorrt.remote_class(NumpyEcho)
        return self._numpy_echo

    async def create_numpy(self) -> ActorRef:
        """A ``NumpyEcho``: a class whose module imports numpy."""
        return _ActorrtRef(await self.numpy_echo().remote())

    async def kill(self, actor: ActorRef) -> None:
        import actorrt

        assert isinstance(actor, _ActorrtRef)
        await actorrt.kill(actor.handle)

    async def wait_idle(self, timeout_s: float = 60.0) -> None:
        """Every free slot of every connected node has a warm host waiting."""
        deadline = time.perf_counter() + timeout_s
        while True:
            status = await self.cluster.status()
            nodes = [n for n in status.nodes if n.get("connected", True)]
            if nodes and all(n["slots_ready"] >= n["cpus"] - n["cpus_used"] for n in nodes):
                return
            if time.perf_counter() > deadline:
                raise TimeoutError(f"actorrt: the warm pool did not refill within {timeout_s:g}s:\n{status}")
            await asyncio.sleep(0.02)

    def cold_start_child(self, started: float) -> None:
        import actorrt  # counted: part of what a first run pays

        imported = time.perf_counter()
        echo = _actorrt_echo()
        address = self.address

        async def main() -> None:
            entered = time.perf_counter()
            async with actorrt.connect(address):
                a = await echo.remote()
                await a.ping()
                done = time.perf_counter()
                print(
                    json.dumps(
                        {
                            "first_call": True,
                            "connect_to_first_call_s": done - entered,
                            "import_s": imported - started,
                        }
                    ),
                    flush=True,
                )
                await actorrt.kill(a)

        actorrt.run(_watched(main(), self.watchdog_s, started))


def _ray_system(address: str | None) -> System:
    from peers import RaySystem

    return RaySystem(address, Echo)


def _floor(kind: str) -> Callable[[str | None], System]:
    def make(address: str | None) -> System:
        from floors import FloorSystem

        return FloorSystem(kind, os.path.abspath(__file__))

    return make


SYSTEMS: dict[str, Callable[[str | None], System]] = {
    "actorrt": ActorrtSystem,
    "ray": _ray_system,
    "grpc_floor": _floor("grpc"),
    "tcp_floor": _floor("tcp"),
}
FLOORS = ("grpc_floor", "tcp_floor")
PEERS = ("ray", "parl")


# ---- results ------------------------------------------------------------------------------------


@dataclass
class Result:
    bench: str
    system: str
    value: float | None  # None: the measurement failed; ``extra["error"]`` says why
    unit: str
    extra: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> str:
        return json.dumps(
            {
                "bench": self.bench,
                "system": self.system,
                "value": None if self.value is None else _sig(self.value),
                "unit": self.unit,
                **self.extra,
            }
        )


def _sig(x: float, digits: int = 4) -> float:
    return float(f"{x:.{digits}g}") if math.isfinite(x) else x


class Reporter:
    def __init__(self, out: IO[str] | None) -> None:
        self.out = out
        self.results: list[Result] = []

    def emit(self, result: Result) -> None:
        self.results.append(result)
        line = result.to_json()
        print(line, flush=True)
        if self.out is not None:
            self.out.write(line + "\n")
            self.out.flush()

    def table(self) -> str:
        rows = [("system", "bench", "value", "unit", "details")]
        for r in self.results:
            details = " ".join(f"{k}={v}" for k, v in r.extra.items() if not isinstance(v, list))
            details = details if len(details) <= 140 else details[:137] + "..."
            value = "FAILED" if r.value is None else f"{_sig(r.value):g}"
            rows.append((r.system, r.bench, value, r.unit, details))
        widths = [max(len(row[i]) for row in rows) for i in range(4)]
        lines = [
            "  ".join(
                cell.ljust(w) if i != 2 else cell.rjust(w)
                for i, (cell, w) in enumerate(zip(row[:4], widths, strict=True))
            )
            + "  "
            + row[4]
            for row in rows
        ]
        lines.insert(1, "-" * min(120, sum(widths) + 8 + max(len(row[4]) for row in rows)))
        return "\n".join(line.rstrip() for line in lines)


def p99(samples: Sequence[float]) -> float:
    """Nearest-rank 99th percentile."""
    ordered = sorted(samples)
    return ordered[max(0, math.ceil(0.99 * len(ordered)) - 1)]


@dataclass
class Config:
    quick: bool
    reps: int
    address: str | None
    latency_calls: int
    latency_warmup: int
    pipelined_calls: int
    payload_sizes: list[int]
    cpu_seconds: float
    idle_seconds: float
    watchdog_s: float | None

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> Config:
        quick = args.quick
        return cls(
            quick=quick,
            reps=args.reps if args.reps is not None else (1 if quick else 5),
            address=args.address,
            latency_calls=200 if quick else 2000,
            latency_warmup=50 if quick else 200,
            pipelined_calls=1000 if quick else 10_000,
            payload_sizes=[64 * 1024, MIB] if quick else [MIB, 16 * MIB, 64 * MIB],
            cpu_seconds=args.cpu_seconds if args.cpu_seconds is not None else (0.1 if quick else 1.0),
            idle_seconds=args.idle_seconds if args.idle_seconds is not None else (1.0 if quick else 10.0),
            watchdog_s=args.watchdog if args.watchdog is not None else (150.0 if quick else None),
        )


def _size_label(n: int) -> str:
    return f"{n // MIB}MiB" if n % MIB == 0 else f"{n // 1024}KiB"


# ---- the benches --------------------------------------------------------------------------------


def bench_cold_start(system_name: str, cfg: Config, report: Reporter) -> None:
    """Fresh interpreter per repetition; see the module docstring."""
    inner: list[float] = []
    outer: list[float] = []
    imports: list[float] = []
    for _ in range(cfg.reps):
        cmd = [sys.executable, os.path.abspath(__file__), "--_cold-start-child", system_name]
        if cfg.watchdog_s:  # the child says where it waits before the timer below stops it
            cmd += ["--watchdog", str(max(1.0, cfg.watchdog_s - 15))]
        if cfg.address:
            cmd += ["--address", cfg.address]
        with tempfile.TemporaryFile(mode="w+") as err:
            start = time.perf_counter()
            proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err, text=True)
            assert proc.stdout is not None
            # A child that hangs is stopped (its stdout then ends) and reported, not waited on forever.
            stop = threading.Timer(cfg.watchdog_s or 600.0, proc.terminate)
            stop.start()
            seen: dict[str, Any] | None = None
            for line in proc.stdout:
                if line.startswith("{") and '"first_call"' in line:
                    outer.append(time.perf_counter() - start)
                    seen = json.loads(line)
                    break
            proc.stdout.read()  # anything else, until the child closes stdout
            try:
                code = proc.wait(timeout=120)
            except subprocess.TimeoutExpired:
                proc.kill()
                code = proc.wait()
            finally:
                stop.cancel()
            if seen is None or code != 0:
                err.seek(0)
                raise RuntimeError(f"cold-start child {cmd} exited with {code}:\n{err.read()[-4000:]}")
        inner.append(seen["connect_to_first_call_s"])
        imports.append(seen["import_s"])
    extra = {"reps": cfg.reps, "embedded": not cfg.address}
    report.emit(
        Result(
            "cold_start_connect_to_first_call",
            system_name,
            statistics.median(inner),
            "s",
            {**extra, "import_s": _sig(statistics.median(imports)), "samples": [_sig(x) for x in inner]},
        )
    )
    report.emit(
        Result(
            "cold_start_process_to_first_call",
            system_name,
            statistics.median(outer),
            "s",
            {**extra, "samples": [_sig(x) for x in outer]},
        )
    )


async def bench_create(system: System, cfg: Config, report: Reporter) -> None:
    await _bench_creation(system, cfg, report, "actor_create_warm", system.create)


async def bench_create_numpy(system: ActorrtSystem, cfg: Config, report: Reporter) -> None:
    system.numpy_echo()  # numpy is imported here before the clock starts, as a real client has it
    await _bench_creation(system, cfg, report, "actor_create_warm_numpy", system.create_numpy)


async def _bench_creation(
    system: System, cfg: Config, report: Reporter, bench: str, create: Callable[[], Awaitable[ActorRef]]
) -> None:
    """``create()`` plus the first ``ping()``, each time on a full warm pool."""
    n = max(2, 2 * cfg.reps)
    samples = []
    for _ in range(n):
        await system.wait_idle()
        start = time.perf_counter()
        actor = await create()
        await actor.method("ping")()
        samples.append(time.perf_counter() - start)
        await system.kill(actor)
    await system.wait_idle()
    report.emit(
        Result(
            bench,
            system.name,
            statistics.median(samples),
            "s",
            {"n": n, "min": _sig(min(samples)), "max": _sig(max(samples))},
        )
    )


async def bench_latency(system: System, cfg: Config, report: Reporter, a: ActorRef) -> None:
    ping = a.method("ping")
    for _ in range(cfg.latency_warmup):
        await ping()
    samples = []
    clock = time.perf_counter
    for _ in range(cfg.latency_calls):
        start = clock()
        await ping()
        samples.append(clock() - start)
    extra = {"n": cfg.latency_calls, "warmup": cfg.latency_warmup}
    report.emit(Result("call_latency_median", system.name, statistics.median(samples) * 1e6, "us", extra))
    report.emit(
        Result("call_latency_p99", system.name, p99(samples) * 1e6, "us", {**extra, "max_us": _sig(max(samples) * 1e6)})
    )


async def bench_latency_paired(system: System, cfg: Config, report: Reporter, a: ActorRef) -> None:
    """Our round trip over the strictest grpc.aio floor, paired: blocks of calls alternate
    between the actor and a ping-pong stream opened from this same process, and the ratio is
    taken block by block, so a busy spell of the machine weighs on both sides alike."""
    from floors import PingPong

    floor = PingPong(os.path.join(HERE, "actor_calls.py"))
    await floor.open()
    try:
        sides = {"ours": a.method("ping"), "floor": floor.ping}
        for ping in sides.values():
            for _ in range(cfg.latency_warmup):
                await ping()
        block = 50
        samples: dict[str, list[float]] = {name: [] for name in sides}
        ratios = []
        clock = time.perf_counter
        for _ in range(max(2, cfg.latency_calls // block)):
            medians = {}
            for name, ping in sides.items():
                times = []
                for _ in range(block):
                    start = clock()
                    await ping()
                    times.append(clock() - start)
                medians[name] = statistics.median(times)
                samples[name] += times
            ratios.append(medians["ours"] / medians["floor"])
        ratios.sort()
        quarter = len(ratios) // 4
        report.emit(
            Result(
                "call_latency_over_grpc_pingpong",
                system.name,
                statistics.median(ratios),
                "x",
                {
                    "blocks": len(ratios),
                    "block": block,
                    "ours_median_us": _sig(statistics.median(samples["ours"]) * 1e6),
                    "floor_median_us": _sig(statistics.median(samples["floor"]) * 1e6),
                    "iqr": [_sig(ratios[quarter]), _sig(ratios[-quarter - 1])],
                },
            )
        )
    finally:
        await floor.close()


async def _pipelined_once(pings: Sequence[Callable[..., Awaitable[Any]]], n: int) -> float:
    k = len(pings)
    start = time.perf_counter()
    futures = [pings[i % k]() for i in range(n)]
    await asyncio.gather(*futures)
    return time.perf_counter() - start


async def bench_pipelined(system: System, cfg: Config, report: Reporter, a: ActorRef, b: ActorRef) -> None:
    n = cfg.pipelined_calls
    for label, actors in (("pipelined_calls_1_actor", [a]), ("pipelined_calls_2_actors", [a, b])):
        pings = [x.method("ping") for x in actors]
        await _pipelined_once(pings, min(n, 1000))  # warm-up
        rates = [n / await _pipelined_once(pings, n) for _ in range(cfg.reps)]
        report.emit(
            Result(
                label,
                system.name,
                statistics.median(rates),
                "calls/s",
                {"calls": n, "actors": len(actors), "reps": cfg.reps, "samples": [_sig(x) for x in rates]},
            )
        )


async def bench_payload(system: System, cfg: Config, report: Reporter, a: ActorRef) -> None:
    """numpy arrays each way. A direction that fails is reported with value null and its error,
    and is then measured with ``bytes`` of the same size (``payload_bytes_*``) as a fallback."""
    import numpy as np

    torch: Any = importlib.import_module("torch") if importlib.util.find_spec("torch") else None
    take = a.method("take")
    for size in cfg.payload_sizes:
        label = _size_label(size)
        failed: set[str] = set()
        for kind in ("numpy", "bytes", "torch"):
            if (kind == "bytes" and not failed) or (kind == "torch" and torch is None):
                continue
            value: Any
            if kind == "numpy":
                value = np.ones(size, dtype=np.uint8)
            elif kind == "bytes":
                value = b"\x01" * size
            else:
                value = torch.ones(size, dtype=torch.uint8)
            make = a.method({"numpy": "make", "bytes": "make_bytes", "torch": "make_tensor"}[kind])
            calls: dict[str, Callable[[], Awaitable[Any]]] = {
                "to_actor": functools.partial(take, value),
                "from_actor": functools.partial(make, size),
            }
            if kind == "bytes":
                calls = {d: c for d, c in calls.items() if d in failed}
            prefix = "payload" if kind == "numpy" else f"payload_{kind}"
            extra: dict[str, Any] = {"size_bytes": size, "payload": kind, "reps": cfg.reps}
            if kind == "bytes":
                extra["fallback_for"] = "numpy"
            for direction, call in list(calls.items()):  # warm-up; the actor allocates its copy
                try:
                    got = await call()
                    if direction == "from_actor":
                        got_bytes = got.nbytes if hasattr(got, "nbytes") else len(got)  # array, tensor, bytes
                        if got_bytes != size:
                            raise AssertionError(f"got {type(got).__name__} of {got_bytes} B")
                    del got
                except Exception as e:  # noqa: BLE001 - report it, go on with the others
                    failed.add(direction)
                    del calls[direction]
                    error = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
                    report.emit(
                        Result(
                            f"{prefix}_{direction}_{label}",
                            system.name,
                            None,
                            "MiB/s",
                            {**extra, "direction": direction, "error": error[:300]},
                        )
                    )
            times: dict[str, list[float]] = {d: [] for d in calls}
            for _ in range(cfg.reps):  # directions alternate so drift hits both alike
                for direction, call in calls.items():
                    start = time.perf_counter()
                    await call()
                    times[direction].append(time.perf_counter() - start)
            for direction, ts in times.items():
                t = statistics.median(ts)
                report.emit(
                    Result(
                        f"{prefix}_{direction}_{label}",
                        system.name,
                        size / MIB / t,
                        "MiB/s",
                        {**extra, "direction": direction, "median_ms": _sig(t * 1e3)},
                    )
                )
            calls.clear()  # the payload is freed before the next one is made
            del value


def _spin(n: int) -> float:
    return Echo().spin(n)


async def bench_cpu(system: System, cfg: Config, report: Reporter, a: ActorRef, b: ActorRef) -> None:
    """One actor, then two at once, interleaved with the same work in two plain processes (a
    ``multiprocessing`` spawn pool started beforehand): the machine's own ceiling, measured in
    the same minutes, since a shared or throttled host rarely gives two full cores."""
    import concurrent.futures
    import multiprocessing

    spin_a, spin_b = a.method("spin"), b.method("spin")
    probe = 200_000
    inside = min([await spin_a(probe) for _ in range(3)])  # least-disturbed of three
    n = max(1000, int(probe * cfg.cpu_seconds / inside))
    await asyncio.gather(spin_a(n // 10), spin_b(n // 10))  # warm both
    loop = asyncio.get_running_loop()
    with concurrent.futures.ProcessPoolExecutor(2, mp_context=multiprocessing.get_context("spawn")) as pool:
        await asyncio.gather(*(loop.run_in_executor(pool, _spin, n // 10) for _ in range(2)))  # start both
        times: dict[str, list[float]] = {"a1": [], "a2": [], "p1": [], "p2": []}
        for _ in range(cfg.reps):  # interleaved, so a busy spell of the machine hits all alike
            start = time.perf_counter()
            await spin_a(n)
            times["a1"].append(time.perf_counter() - start)
            start = time.perf_counter()
            await asyncio.gather(spin_a(n), spin_b(n))
            times["a2"].append(time.perf_counter() - start)
            start = time.perf_counter()
            await loop.run_in_executor(pool, _spin, n)
            times["p1"].append(time.perf_counter() - start)
            start = time.perf_counter()
            await asyncio.gather(*(loop.run_in_executor(pool, _spin, n) for _ in range(2)))
            times["p2"].append(time.perf_counter() - start)
    med = {k: statistics.median(v) for k, v in times.items()}
    best = {k: min(v) for k, v in times.items()}
    extra = {"iterations": n, "reps": cfg.reps}
    ours, ceiling = 2 * med["a1"] / med["a2"], 2 * med["p1"] / med["p2"]
    report.emit(
        Result("cpu_1_actor", system.name, med["a1"], "s", {**extra, "samples": [_sig(x) for x in times["a1"]]})
    )
    report.emit(
        Result("cpu_2_actors", system.name, med["a2"], "s", {**extra, "samples": [_sig(x) for x in times["a2"]]})
    )
    report.emit(
        Result(
            "cpu_speedup_2_actors",
            system.name,
            ours,
            "x",
            {**extra, "cpus": os.cpu_count(), "best_of": _sig(2 * best["a1"] / best["a2"])},
        )
    )
    report.emit(
        Result(
            "cpu_speedup_2_processes",
            system.name,
            ceiling,
            "x",
            {
                **extra,
                "plain": "multiprocessing spawn pool",
                "best_of": _sig(2 * best["p1"] / best["p2"]),
                "samples_1": [_sig(x) for x in times["p1"]],
                "samples_2": [_sig(x) for x in times["p2"]],
            },
        )
    )
    report.emit(Result("cpu_speedup_over_processes", system.name, ours / ceiling, "x", extra))


def _process_tree(root: int) -> list[int]:
    """``root`` and all its live descendants, from /proc."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(entry))
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo.extend(children.get(pid, []))
    return out


def _cpu_ticks(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return int(fields[11]) + int(fields[12])  # utime + stime
    except (OSError, IndexError, ValueError):
        return 0


def _memory_kb(pid: int) -> tuple[int, int]:
    """(RSS, PSS) in kB; (0, 0) for a process that is gone."""
    rss = pss = 0
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Rss:"):
                    rss = int(line.split()[1])
                elif line.startswith("Pss:"):
                    pss = int(line.split()[1])
    except OSError:
        pass
    return rss, pss


async def bench_idle(system: System, cfg: Config, report: Reporter) -> None:
    """The bench process and all it started, with 2 free slots and nothing called."""
    await system.wait_idle()
    await asyncio.sleep(3.0)  # let start-up work (imports in warm hosts, first heartbeats) end
    pids = _process_tree(os.getpid())
    hz = os.sysconf("SC_CLK_TCK")
    before = {p: _cpu_ticks(p) for p in pids}
    start = time.perf_counter()
    await asyncio.sleep(cfg.idle_seconds)
    elapsed = time.perf_counter() - start
    alive = _process_tree(os.getpid())
    ticks = sum(_cpu_ticks(p) - before.get(p, 0) for p in alive)
    mem = [_memory_kb(p) for p in alive]
    extra = {"processes": len(alive), "seconds": _sig(elapsed)}
    report.emit(Result("idle_rss_mb", system.name, sum(m[0] for m in mem) * 1024 / 1e6, "MB", extra))
    report.emit(Result("idle_pss_mb", system.name, sum(m[1] for m in mem) * 1024 / 1e6, "MB", extra))
    report.emit(Result("idle_cpu_percent", system.name, 100 * ticks / hz / elapsed, "%", extra))
    report.emit(Result("idle_processes", system.name, len(alive), "count", extra))


async def run_system(system: System, cfg: Config, groups: set[str], report: Reporter) -> None:
    groups = groups & set(system.groups)
    await system.open()
    try:
        if "idle" in groups:  # first: nothing created yet
            await bench_idle(system, cfg, report)
        if "create" in groups:
            await bench_create(system, cfg, report)
        if "create_numpy" in groups and isinstance(system, ActorrtSystem):
            await bench_create_numpy(system, cfg, report)
        if not groups & {"latency", "pipelined", "payload", "cpu"}:
            return
        await system.wait_idle()
        a = await system.create()
        b = await system.create()
        try:
            await system.wait_idle()  # replacement hosts started: let them settle first
            if "latency" in groups:
                await bench_latency(system, cfg, report, a)
                if system.name == "actorrt":
                    await bench_latency_paired(system, cfg, report, a)
            if "pipelined" in groups:
                await bench_pipelined(system, cfg, report, a, b)
            if "payload" in groups:
                await bench_payload(system, cfg, report, a)
            if "cpu" in groups:
                await bench_cpu(system, cfg, report, a, b)
        finally:
            await system.kill(a)
            await system.kill(b)
    finally:
        await system.close()


# ---- command line ------------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--address", default=None, help="master host:port (default: an embedded local cluster)")
    parser.add_argument("--quick", action="store_true", help="tiny sizes and reps: a smoke test for CI")
    parser.add_argument(
        "--reps",
        type=int,
        default=None,
        help="repetitions per bench (default 5; 1 with --quick; side by side: per child, default 3)",
    )
    parser.add_argument("--out", default=None, help="also write the JSON lines to this file")
    parser.add_argument(
        "--only",
        default=",".join(GROUPS),
        help=f"comma-separated bench groups to run (default all: {','.join(GROUPS)})",
    )
    parser.add_argument(
        "--cpu-seconds",
        type=float,
        default=None,
        help="work per actor in the cpu bench (default 1.0; 0.1 with --quick)",
    )
    parser.add_argument(
        "--idle-seconds", type=float, default=None, help="how long the idle bench watches (default 10; 1 with --quick)"
    )
    parser.add_argument(
        "--watchdog",
        type=float,
        default=None,
        help="seconds after which a run still going prints where each task waits, stops and exits 3 "
        "(default 150 with --quick, none otherwise; 0: none)",
    )
    parser.add_argument("--peers", default="", help="other systems to run side by side: ray, parl")
    parser.add_argument(
        "--floors", action="store_true", help="run the grpc/tcp echo floors side by side (implied by --peers)"
    )
    parser.add_argument(
        "--rounds",
        type=int,
        default=None,
        help="side by side: rounds of alternation, one child per system each (default 4; 1 quick)",
    )
    default_ray = os.path.join(os.path.dirname(HERE), ".venv-ray", "bin", "python")
    parser.add_argument(
        "--ray-python",
        default=default_ray if os.path.exists(default_ray) else sys.executable,
        help="the interpreter that has Ray (default .venv-ray/bin/python if there)",
    )
    default_parl = os.path.join(os.path.dirname(HERE), ".venv-parl", "bin", "python")
    parser.add_argument(
        "--parl-python",
        default=default_parl if os.path.exists(default_parl) else sys.executable,
        help="the interpreter that has PARL (default .venv-parl/bin/python if there)",
    )
    parser.add_argument("--_cold-start-child", dest="cold_start_child", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--_system-child", dest="system_child", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--_floor-server", dest="floor_server", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    args.peer_list = [p.strip() for p in args.peers.split(",") if p.strip()]
    unknown_peers = set(args.peer_list) - set(PEERS)
    if unknown_peers:
        parser.error(f"--peers: unknown {sorted(unknown_peers)}; choose from {','.join(PEERS)}")
    if args.reps is not None and args.reps < 1:
        parser.error("--reps must be >= 1")
    if args.rounds is not None and args.rounds < 1:
        parser.error("--rounds must be >= 1")
    unknown = {g.strip() for g in args.only.split(",") if g.strip()} - set(GROUPS)
    if unknown:
        parser.error(f"--only: unknown group(s) {sorted(unknown)}; choose from {','.join(GROUPS)}")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    started_main = time.perf_counter()
    args = parse_args(argv)
    if args.floor_server:
        from floors import serve

        serve(args.floor_server)
        return 0
    if args.cold_start_child:
        system = SYSTEMS[args.cold_start_child](args.address)
        if isinstance(system, ActorrtSystem):
            system.watchdog_s = args.watchdog
        system.cold_start_child(started_main)
        return 0
    cfg = Config.from_args(args)
    groups = {g.strip() for g in args.only.split(",") if g.strip()}
    if args.system_child:
        return _run_one(args.system_child, cfg, groups, Reporter(None), table=False)
    if args.peer_list or args.floors:
        return _side_by_side(args, cfg, groups)
    out = open(args.out, "w") if args.out else None
    try:
        return _run_one("actorrt", cfg, groups, Reporter(out), table=True)
    finally:
        if out is not None:
            out.close()


def _run_one(name: str, cfg: Config, groups: set[str], report: Reporter, table: bool) -> int:
    """All groups of one system, in this process (cold starts in fresh children)."""
    started = time.perf_counter()
    system = SYSTEMS[name](cfg.address)
    hung = False
    if cfg.watchdog_s:  # past the watchdog and its 30 s of cleanup: every thread's stack, exit 1
        faulthandler.dump_traceback_later(cfg.watchdog_s + 45, exit=True)
    try:
        if "cold_start" in groups and "cold_start" in system.groups:  # before anything else runs
            bench_cold_start(name, cfg, report)
        if groups - {"cold_start"}:
            try:
                _run_async(_watched(run_system(system, cfg, groups, report), cfg.watchdog_s, started))
            except BenchHangError as e:
                print(f"\n{e}", file=sys.stderr)
                hung = True
    finally:
        if table and report.results:
            mode = "quick" if cfg.quick else "full"
            where = cfg.address or "embedded"
            print(
                f"\nactor call benchmarks ({mode}, {where}, reps {cfg.reps}, {os.cpu_count()} cpus, "
                f"{time.perf_counter() - started:.1f} s)\n{report.table()}",
                file=sys.stderr,
            )
    faulthandler.cancel_dump_traceback_later()
    if hung:
        return 3
    failed = [r.bench for r in report.results if r.value is None]
    if failed:
        print(f"\n{len(failed)} measurement(s) FAILED (value null in the JSON): {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


def _side_by_side(args: argparse.Namespace, cfg: Config, groups: set[str]) -> int:
    """Each system in its own child process, alternating, round after round; see the docstring."""
    from peers import parl_status
    from side_by_side import Unavailable, run_rounds, summary_table

    pythons = {
        "actorrt": sys.executable,
        "ray": args.ray_python,
        "grpc_floor": sys.executable,
        "tcp_floor": sys.executable,
    }
    systems = ["actorrt"]
    unavailable: list[Unavailable] = []
    for peer in args.peer_list:
        if peer == "parl":
            why = parl_status(args.parl_python)
            unavailable.append(Unavailable("parl", why or "installed, but no PARL system is written yet"))
        else:
            systems.append(peer)
    if groups & {"latency", "pipelined"}:
        systems += FLOORS
    rounds = args.rounds if args.rounds is not None else (1 if cfg.quick else 4)
    child_args = ["--only", ",".join(sorted(groups)), "--reps", str(args.reps or (1 if cfg.quick else 3))]
    if cfg.quick:
        child_args.append("--quick")
    for flag in ("cpu_seconds", "idle_seconds"):
        if getattr(args, flag) is not None:
            child_args += [f"--{flag.replace('_', '-')}", str(getattr(args, flag))]
    out = open(args.out, "w") if args.out else None
    try:
        results, failures = run_rounds(os.path.abspath(__file__), systems, pythons, child_args, rounds, out)
    finally:
        if out is not None:
            out.close()
    print(
        f"\nside by side: {rounds} round(s), {os.cpu_count()} cpus, systems alternating in each round\n"
        f"{summary_table(results, systems, unavailable)}",
        file=sys.stderr,
    )
    for f in failures:
        print(f"FAILED: {f}", file=sys.stderr)
    return 1 if failures else 0


def _await_chain(awaitable: Any) -> str:
    """Where a suspended coroutine waits: each coroutine it awaits, down to the future."""
    hops = []
    while awaitable is not None:
        frame = getattr(awaitable, "cr_frame", None) or getattr(awaitable, "gi_frame", None)
        if frame is None:
            hops.append(repr(awaitable)[:160])
            break
        hops.append(f"{frame.f_code.co_name} ({os.path.basename(frame.f_code.co_filename)}:{frame.f_lineno})")
        awaitable = getattr(awaitable, "cr_await", None) or getattr(awaitable, "gi_yieldfrom", None)
    return " -> ".join(hops)


class BenchHangError(RuntimeError):
    """The benches ran past ``--watchdog``; where they waited went to stderr."""


async def _watched(coro: Awaitable[None], seconds: float | None, started: float) -> None:
    """``coro``, or ``seconds`` after ``started`` (``time.perf_counter``): print where every task of this process waits, cancel it
    (its ``finally`` blocks kill the actors and close the cluster) and raise ``BenchHangError``.
    A loop blocked outright, or a close that hangs, is left to ``_run_one``'s faulthandler."""
    if not seconds:
        await coro
        return
    task = asyncio.ensure_future(coro)
    done, _ = await asyncio.wait({task}, timeout=max(0.0, started + seconds - time.perf_counter()))
    if done:
        return task.result()
    others = [t for t in asyncio.all_tasks() if t not in (task, asyncio.current_task())]
    print(
        f"\nwatchdog: still running after {seconds:g} s; the benches wait in\n  {_await_chain(task.get_coro())}"
        "\nand the other tasks of this process (an embedded cluster's among them) in",
        *(f"  {t.get_name()}: {_await_chain(t.get_coro())}" for t in others),
        sep="\n",
        file=sys.stderr,
        flush=True,
    )
    task.cancel()
    await asyncio.wait({task}, timeout=30)
    raise BenchHangError(f"the benches ran past --watchdog {seconds:g} s; where they waited is printed above")


def _run_async(coro: Any) -> Any:
    """On uvloop when installed, as ``actorrt.run`` does (the loop is shared by all systems)."""
    try:
        import uvloop
    except ImportError:
        return asyncio.run(coro)
    return uvloop.run(coro)


if __name__ == "__main__":
    sys.exit(main())
