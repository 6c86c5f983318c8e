"""``actorrt start | connect | status | logs | stop``: bring up and inspect nodes.

Every failure the user can cause (bad flags, unreachable address, busy port, missing token)
prints one line to stderr and exits non-zero, without a traceback.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Coroutine, Sequence
from pathlib import Path
from typing import Any, NoReturn, TypeVar

from actorrt.cli import ops as _ops
from actorrt.common import home
from actorrt.common import resources as _resources
from actorrt.common.errors import ActorRTError
from actorrt.transport import addresses
from actorrt.transport import rpc as _rpc

DEFAULT_PORT = _ops.DEFAULT_PORT
log = logging.getLogger("actorrt")

T = TypeVar("T")


class CLIError(Exception):
    """One line for the user; exit status 1."""


# ---- process records ------------------------------------------------------------------------


def _records_dir() -> Path:
    return home.state_dir() / "processes"


def _machine() -> str:
    """This boot of this machine, and this PID namespace: a shared ``ACTORRT_HOME`` (an NFS
    home) holds the records of processes on several machines, which a PID names only on its own."""
    try:
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        boot = socket.gethostname()
    try:
        namespace = os.stat("/proc/self/ns/pid").st_ino
    except OSError:
        namespace = 0
    return f"{boot}/{namespace}"


def _record_path(pid: int) -> Path:
    """``PID@HOST.json``: two machines' daemons with the same PID do not share a record."""
    return _records_dir() / f"{pid}@{socket.gethostname()}.json"


def _start_time(pid: int) -> int | None:
    """When process ``pid`` started, in clock ticks since boot (field 22 of /proc/PID/stat).

    With the PID it names one process for good: a recycled PID has another start time.
    """
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return int(fields[19])  # fields[0] is field 3, the state
    except (OSError, IndexError, ValueError):
        return None


def _write_record(**fields: Any) -> Path:
    home.state_dir("processes", create=True)
    path = _record_path(os.getpid())
    tmp = path.with_suffix(".tmp")
    record = {"pid": os.getpid(), "start_time": _start_time(os.getpid()), "machine": _machine(), **fields}
    tmp.write_text(json.dumps(record))
    tmp.replace(path)
    return path


def _read_records(every_machine: bool = False) -> tuple[list[dict[str, Any]], int]:
    """The records of this machine's processes (one written before records named their machine
    counts as this machine's; ``every_machine``: all), and how many other machines' there are."""
    records, others, here = [], 0, _machine()
    for path in sorted(_records_dir().glob("*.json")):
        try:
            record = {**json.loads(path.read_text()), "_path": str(path)}
        except (OSError, ValueError):
            continue
        if every_machine or record.get("machine", here) == here:
            records.append(record)
        else:
            others += 1
    return records, others


def _alive(record: dict[str, Any]) -> bool:
    """Whether the process a record names still runs: same PID *and* same start time.

    A record without a start time (written by an older actorrt) cannot tell its process from a
    recycled PID, so it never counts as alive: ``stop`` signals nothing on its word.
    """
    pid = int(record["pid"])
    if record.get("start_time") is None or _start_time(pid) != record["start_time"]:
        return False
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
    return b"actorrt" in cmdline  # empty for a zombie


# ---- start / connect ------------------------------------------------------------------------


def _configure_logging(args: argparse.Namespace) -> None:
    from actorrt.common.logs import configure_logging

    configure_logging(
        args.log_level,
        args.log_format,
        path=Path(args.log_file) if args.log_file else None,
        max_bytes=args.log_max_bytes,
        backups=args.log_backups,
    )


def _without_token(argv: list[str]) -> list[str]:
    """``argv`` less ``--token T`` / ``--token=T`` (and the prefixes of --token argparse accepts)."""

    def is_token_flag(arg: str) -> bool:
        return len(arg) >= 4 and "--token".startswith(arg)

    out: list[str] = []
    skip = False
    for arg in argv:
        if skip:
            skip = False
        elif is_token_flag(arg):
            skip = True
        elif not (arg.startswith("--") and "=" in arg and is_token_flag(arg.split("=", 1)[0])):
            out.append(arg)
    return out


def _background(args: argparse.Namespace, argv: list[str], kind: str, timeout_s: float) -> dict[str, Any]:
    """Re-run this command with --block as a detached process; return its record once ready.

    The token travels in the child's environment (``/proc/PID/environ`` is its owner's alone),
    never on its command line, which every local user can read. The child logs to a file it
    rotates (``--log-file``); its stdout and stderr go to the same file from the start, so the
    last line there says why it exited before it was ready.
    """
    child_argv = _without_token(argv)
    env = dict(os.environ)
    if args.token:
        env["ACTORRT_TOKEN"] = args.token
    if args.log_file:
        log_path = Path(args.log_file)
    else:
        _prune_daemon_logs()
        log_path = home.state_dir("logs", create=True) / f"{kind}-{int(time.time() * 1000)}.log"
        child_argv += ["--log-file", str(log_path)]
    with open(log_path, "ab") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "actorrt", *child_argv, "--block"],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )
    record_path = _record_path(proc.pid)
    deadline = time.monotonic() + timeout_s
    try:
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                lines = [ln for ln in log_path.read_text(errors="replace").splitlines() if ln.strip()]
                raise CLIError(lines[-1] if lines else f"{kind} exited with code {proc.returncode}")
            try:
                record = json.loads(record_path.read_text())
                if record.get("ready"):
                    return {**record, "log": str(log_path)}
            except (OSError, ValueError):
                pass
            time.sleep(0.05)
    except BaseException:  # Ctrl-C while it starts: it is not left to come up unseen
        _end_child(proc)
        raise
    _end_child(proc)
    raise CLIError(f"{kind} did not become ready within {timeout_s:g}s (log: {log_path})")


DAEMON_LOGS_KEPT = 20  # the newest daemons' log files kept, besides those of running daemons


def _prune_daemon_logs() -> None:
    """Remove the log files (and their rotations) of all but the newest ``DAEMON_LOGS_KEPT``
    daemons this home started in the background; never a running daemon's (any machine's: a
    record names its log)."""
    folder = home.state_dir("logs")
    try:
        logs = sorted(
            (p for kind in ("master", "worker") for p in folder.glob(f"{kind}-*.log")), key=lambda p: p.stat().st_mtime
        )
    except OSError:
        return
    records, _ = _read_records(every_machine=True)
    running = {str(r.get("log_file")) for r in records}
    if any("log_file" not in r for r in records):  # a daemon of an older actorrt: its log unknown
        return
    for old in logs[: max(0, len(logs) - DAEMON_LOGS_KEPT)]:
        if str(old) not in running:
            for path in [old, *folder.glob(old.name + ".*")]:
                path.unlink(missing_ok=True)


def _end_child(proc: subprocess.Popen[bytes]) -> None:
    """Stop a daemon that is still starting: SIGTERM (it closes what it started), then SIGKILL."""
    if proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


async def _serve_until_signal(*services: Any, ended: asyncio.Event | None = None) -> None:
    """Serve until SIGTERM/SIGINT, or until ``ended`` is set; then close ``services``."""
    stop = ended or asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    try:
        await stop.wait()
    finally:
        for service in reversed(services):
            await service.close()


async def _run_start(args: argparse.Namespace) -> None:
    from actorrt.master.server import Master
    from actorrt.worker.daemon import WorkerDaemon

    token = home.load_token(args.token) if args.token or os.environ.get("ACTORRT_TOKEN") else home.new_token()
    assert token is not None
    if args.host not in addresses.LOOPBACK_HOSTS:
        log.warning("listening on %s: reachable from other machines; only token holders are served", args.host)
    tls = _tls(args)
    from prometheus_client import CollectorRegistry

    registry = CollectorRegistry()  # the master's and the local worker's metrics, one endpoint
    master = Master(
        args.host,
        args.port,
        token=token,
        tls=tls,
        worker_timeout_s=args.worker_timeout,
        client_grace_s=args.client_grace,
        metrics_registry=registry,
    )
    try:
        await master.start()
    except OSError as e:
        raise CLIError(f"actorrt start: {e}") from e
    node_ip = _start_node_ip(args)
    services: list[Any] = [master]
    if args.cpus != 0:  # --cpus 0: a head node that only schedules
        worker = WorkerDaemon(
            master.address,
            token=token,
            tls=tls,
            cpus=args.cpus,
            gpus=args.gpus,
            node_ip=node_ip,
            wait_ready=True,
            preload=_modules(args.preload),
            metrics_registry=registry,
            reap_orphans=os.getpid() == 1,
        )
        try:
            await worker.start()
        except BaseException:
            await master.close()
            raise
        services.append(worker)
    metrics = None
    try:
        metrics = _ops.start_metrics(args, registry, args.host)
        dashboard = await _ops.start_dashboard(args, master)
    except _ops.OpsError as e:
        for service in [*reversed(services), *([metrics] if metrics else [])]:
            await service.close()
        raise CLIError(str(e)) from e
    # Only now that everything runs: a start that failed must not replace a running cluster's token.
    token_file = home.write_token(token)
    (home.state_dir(create=True) / "address").write_text(master.address + "\n")
    record = _write_record(
        kind="master",
        log_file=args.log_file or "",
        address=master.address,
        node_ip=node_ip,
        token_file=str(token_file),
        ready=True,
        metrics=metrics.url if metrics else "",
        dashboard=dashboard.url if dashboard else "",
    )
    cpus = services[1].cpus if len(services) > 1 else 0
    print(f"actorrt master running at {master.address} with a local worker of {cpus} cpus", flush=True)
    try:
        await _serve_until_signal(*services, *([metrics] if metrics else []), *([dashboard] if dashboard else []))
    finally:
        record.unlink(missing_ok=True)


def _start_node_ip(args: argparse.Namespace) -> str:
    """Where the head's actor hosts listen and what they advertise: ``--node-ip``; else
    ``--host`` when it is one address; on a wildcard host, this machine's (first) address that
    is not loopback, which other machines reach (loopback only when it has none)."""
    if args.node_ip:
        return str(args.node_ip)
    if args.host not in addresses.WILDCARD_HOSTS:
        return str(args.host)
    found = addresses.interface_addresses()
    if not found:
        log.warning("no network interface but loopback: actor hosts listen on 127.0.0.1 (--node-ip to choose)")
        return "127.0.0.1"
    if len(found) > 1:
        named = ", ".join(f"{ip} ({name})" for name, ip in found)
        log.warning(
            "this machine has several addresses (%s): actor hosts use %s (--node-ip to choose)", named, found[0][1]
        )
    return found[0][1]


def _connect_node_ip(args: argparse.Namespace) -> str:
    """Where a joining worker's actor hosts listen and what they advertise: ``--node-ip``; else
    loopback for a master on loopback; else the address this machine reaches its master from."""
    if args.node_ip:
        return str(args.node_ip)
    host = args.address.rpartition(":")[0].strip("[]")
    if host in addresses.LOOPBACK_HOSTS:
        return "127.0.0.1"
    found = addresses.route_source(args.address)
    if found is None:
        raise CLIError(f"actorrt connect: no route to {args.address}: pass --node-ip (this machine's address)")
    return found


async def _run_connect(args: argparse.Namespace) -> None:
    from actorrt.worker.daemon import WorkerDaemon

    token = home.load_token(args.token)
    if not token:
        raise CLIError(
            f"actorrt connect: no token: pass --token, set ACTORRT_TOKEN, or copy {home.token_path()} from the master"
        )
    from prometheus_client import CollectorRegistry

    registry = CollectorRegistry()
    node_ip = _connect_node_ip(args)
    worker = WorkerDaemon(
        args.address,
        metrics_registry=registry,
        token=token,
        tls=_tls(args),
        cpus=args.cpus,
        gpus=args.gpus,
        node_ip=node_ip,
        connect_timeout_s=args.timeout,
        wait_ready=True,
        preload=_modules(args.preload),
        reap_orphans=os.getpid() == 1,
    )
    try:
        await worker.start()
    except (ActorRTError, OSError) as e:
        raise CLIError(f"actorrt connect: {e}") from e
    try:
        metrics = _ops.start_metrics(args, registry, node_ip)
    except _ops.OpsError as e:
        await worker.close()
        raise CLIError(str(e)) from e
    record = _write_record(
        kind="worker",
        log_file=args.log_file or "",
        address=args.address,
        worker_id=worker.worker_id,
        node_ip=node_ip,
        ready=True,
        metrics=metrics.url if metrics else "",
    )
    print(f"actorrt worker {worker.worker_id} joined {args.address} with {worker.cpus} cpus", flush=True)
    try:
        await _serve_until_signal(worker, *([metrics] if metrics else []), ended=worker.refused)
    finally:
        record.unlink(missing_ok=True)


def _check_counts(args: argparse.Namespace) -> None:
    """Refuse --cpus/--gpus this machine cannot honestly offer, before anything starts."""
    cpus = (os.cpu_count() or 1) if args.cpus is None else args.cpus
    if cpus == 0:  # start --cpus 0: no local worker
        return
    try:
        _resources.check_counts(cpus, args.gpus, "--cpus", "--gpus")
        if args.gpus:  # the actors' devices are taken from those it names, in order
            _resources.visible_devices(list(range(args.gpus)), os.environ.get("CUDA_VISIBLE_DEVICES"))
    except ValueError as e:
        raise CLIError(f"actorrt {args.command}: {e}") from e


def cmd_start(args: argparse.Namespace, argv: list[str]) -> int:
    _check_counts(args)
    if args.block:
        _configure_logging(args)
        _run(_run_start(args))
        return 0
    record = _background(args, argv, "master", timeout_s=60)
    address = record["address"]
    host, _, port = address.rpartition(":")
    if host.strip("[]") in addresses.WILDCARD_HOSTS:  # listening everywhere: show the address others reach
        address = addresses.host_port(record.get("node_ip") or "127.0.0.1", port)
    print(f"actorrt cluster started: master at {address} (pid {record['pid']}, log {record['log']})")
    if record.get("metrics"):
        print(f"metrics at {record['metrics']}")
    if record.get("dashboard"):
        print(f"dashboard at {record['dashboard']}")
    print(f"token written to {record['token_file']} (mode 0600)")
    print(f'connect from Python:   async with actorrt.connect("{address}") as cluster: ...')
    print(f"add a machine:         ACTORRT_TOKEN=<token> actorrt connect --address {address}")
    print("see it:                actorrt status    stop it: actorrt stop")
    return 0


def cmd_connect(args: argparse.Namespace, argv: list[str]) -> int:
    _check_counts(args)
    if args.block:
        _configure_logging(args)
        _run(_run_connect(args))
        return 0
    record = _background(args, argv, "worker", timeout_s=args.timeout + 30)
    print(f"actorrt worker {record['worker_id']} joined {record['address']} (pid {record['pid']}, log {record['log']})")
    if record.get("metrics"):
        print(f"metrics at {record['metrics']}")
    return 0


def cmd_status(args: argparse.Namespace, argv: list[str]) -> int:
    import grpc

    from actorrt.common.status import ClusterStatus
    from actorrt.v1 import master_pb2, master_pb2_grpc

    try:
        target = _ops.ClusterTarget.from_args(args)
    except _ops.OpsError as e:
        raise CLIError(str(e)) from e

    async def status() -> int:
        async with target.channel() as channel:
            stub = master_pb2_grpc.MasterStub(channel)

            async def fetch() -> ClusterStatus:
                try:
                    msg = await stub.GetClusterStatus(
                        master_pb2.GetClusterStatusRequest(), metadata=target.metadata(), timeout=args.timeout
                    )
                except grpc.RpcError as e:
                    raise CLIError(str(target.error(e))) from e
                return ClusterStatus.from_proto(msg)

            return await _ops.run_status(args, fetch)

    try:
        return _run(status())
    except KeyboardInterrupt:
        if args.watch:  # how a watch ends
            return 0
        raise


def cmd_logs(args: argparse.Namespace, argv: list[str]) -> int:
    try:
        return _ops.run_logs(args)
    except _ops.OpsError as e:
        raise CLIError(str(e)) from e


def cmd_stop(args: argparse.Namespace, argv: list[str]) -> int:
    records, others = _read_records()
    targets = []
    for record in records:
        pid = int(record["pid"])
        if _alive(record):
            os.kill(pid, signal.SIGTERM)
            targets.append(record)
        else:  # gone, or its PID now belongs to another process: nothing of ours to signal
            Path(record["_path"]).unlink(missing_ok=True)
            if record.get("start_time") is None and _start_time(pid) is not None:
                print(
                    f"not signalling pid {pid}: its record has no start time to tell it from a recycled PID; "
                    f"kill it yourself if it is an actorrt {record.get('kind', 'process')}"
                )
    deadline = time.monotonic() + args.timeout
    while any(_alive(r) for r in targets) and time.monotonic() < deadline:
        time.sleep(0.05)
    for record in targets:
        pid = int(record["pid"])
        if _alive(record):
            os.kill(pid, signal.SIGKILL)
        Path(record["_path"]).unlink(missing_ok=True)
        print(f"stopped {record.get('kind', 'process')} pid {pid} ({record.get('address', '')})")
    if not targets:
        print("nothing to stop: no actorrt process started from this machine is running")
    if others:  # a home shared with other machines: theirs are stopped there
        print(f"left alone: {others} record(s) of actorrt processes on other machines (run stop there)")
    return 0


def _modules(text: str | None) -> tuple[str, ...]:
    return tuple(m.strip() for m in (text or "").split(",") if m.strip())


def _tls(args: argparse.Namespace) -> _rpc.TLS | None:
    try:
        return _rpc.TLS.from_env(args.tls_ca, args.tls_cert, args.tls_key)
    except (ValueError, FileNotFoundError) as e:
        raise CLIError(f"actorrt {args.command}: {e}") from e


def _add_tls_flags(parser: argparse.ArgumentParser) -> None:
    """TLS flags of the daemons; clients' are in ``_ops.add_cluster_args``."""
    parser.add_argument("--tls-cert", help="PEM certificate this node serves with (turns TLS on)")
    parser.add_argument("--tls-key", help="PEM private key of --tls-cert")
    parser.add_argument("--tls-ca", help="PEM CA: verify peers with it, and require client certificates (mutual TLS)")


def _run(coro: Coroutine[Any, Any, T]) -> T:
    try:
        import uvloop

        return uvloop.run(coro)
    except ImportError:
        return asyncio.run(coro)


def _cpus(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


def _nonneg(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {value}")
    return value


def _xparl_gpu(text: str) -> int:
    """xparl's ``--gpu 0,1`` (device ids): refused, saying what actorrt takes instead."""
    raise argparse.ArgumentTypeError(
        f"{text!r}: xparl's --gpu listed device ids; actorrt takes a count, --gpus N "
        "(the node's devices 0..N-1, or of those its CUDA_VISIBLE_DEVICES names)"
    )


def _port(text: str) -> int:
    value = int(text)
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"must be 0..65535, got {value}")
    return value


def _address(text: str) -> str:
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) <= 65535:
        raise argparse.ArgumentTypeError(f"expected HOST:PORT, got {text!r}")
    return text


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        """One line, not the usage block: 'actorrt connect: --address: expected HOST:PORT ...'."""
        self.exit(2, f"{self.prog}: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="actorrt", description="Bring up and inspect actorrt clusters.")
    sub = parser.add_subparsers(
        dest="command", required=True, metavar="{start,connect,status,logs,stop}", parser_class=_Parser
    )

    start = sub.add_parser("start", help="start a master and a local worker")
    start.add_argument("--host", default="127.0.0.1", help="address to listen on (default: loopback only)")
    start.add_argument("--port", type=_port, default=DEFAULT_PORT, help=f"master port (default {DEFAULT_PORT})")
    start.add_argument(
        "--cpus",
        "--cpu_num",  # xparl's name for it
        dest="cpus",
        type=_nonneg,
        default=None,
        help="slots of the local worker (default: all cores; 0: no local worker); --cpu_num: the same, xparl's name",
    )
    start.add_argument("--gpus", type=_nonneg, default=0, help="GPUs of the local worker")
    start.add_argument("--gpu", type=_xparl_gpu, help=argparse.SUPPRESS)
    start.add_argument(
        "--node-ip",
        default=None,
        help="address the local worker's actor hosts listen on and advertise (default: --host; with a "
        "wildcard --host, this machine's address that is not loopback)",
    )
    start.add_argument("--token", default=None, help="cluster token (default: ACTORRT_TOKEN or a new one)")
    start.add_argument("--worker-timeout", type=float, default=10.0, help="seconds before a silent worker is dropped")
    start.add_argument("--client-grace", type=float, default=10.0, help="seconds a lost client's actors survive")
    start.add_argument("--preload", help="modules warm actor hosts import ahead, e.g. torch,gymnasium")
    _add_tls_flags(start)
    start.add_argument("--block", action="store_true", help="stay in the foreground")
    start.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    _ops.add_daemon_args(start)
    _ops.add_dashboard_args(start)
    start.set_defaults(func=cmd_start)

    conn = sub.add_parser("connect", help="join a machine's worker daemon to a cluster")
    conn.add_argument("--address", type=_address, required=True, help="the master's HOST:PORT")
    conn.add_argument(
        "--cpus",
        "--cpu_num",  # xparl's name for it
        dest="cpus",
        type=_cpus,
        default=None,
        help="slots (default: all cores); --cpu_num: the same, xparl's name",
    )
    conn.add_argument("--gpus", type=_nonneg, default=0, help="GPUs")
    conn.add_argument("--gpu", type=_xparl_gpu, help=argparse.SUPPRESS)
    conn.add_argument(
        "--node-ip",
        default=None,
        help="address actor hosts listen on and advertise (default: the address this machine reaches "
        "the master from; loopback for a master on loopback)",
    )
    conn.add_argument("--token", default=None, help="cluster token (default: ACTORRT_TOKEN or the token file)")
    conn.add_argument("--timeout", type=float, default=10.0, help="seconds to wait for the master")
    conn.add_argument("--preload", help="modules warm actor hosts import ahead, e.g. torch,gymnasium")
    _add_tls_flags(conn)
    conn.add_argument("--block", action="store_true", help="stay in the foreground")
    conn.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    _ops.add_daemon_args(conn)
    conn.set_defaults(func=cmd_connect)

    status = sub.add_parser("status", help="show nodes, slots, actors and clients")
    _ops.add_cluster_args(status, _address)
    status.add_argument("--json", action="store_true", help="machine-readable output")
    status.add_argument("--timeout", type=float, default=5.0)
    _ops.add_status_args(status)
    status.set_defaults(func=cmd_status)

    _ops.add_logs_parser(sub, _address).set_defaults(func=cmd_logs)

    stop = sub.add_parser("stop", help="stop what start/connect started on this machine (by recorded PID)")
    stop.add_argument("--timeout", type=float, default=10.0, help="seconds before SIGKILL")
    stop.set_defaults(func=cmd_stop)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args, argv))
    except CLIError as e:
        print(str(e), file=sys.stderr)
        return 1
    except (ActorRTError, OSError) as e:
        print(f"actorrt {args.command}: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
