"""``actorrt start`` and ``actorrt connect``: bring up a master (with a local worker) or a worker
daemon, in the foreground (``--block``) or as a detached process whose record says when it is
ready. The daemon itself runs on one event loop until SIGTERM or SIGINT.
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
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from actorrt.cli import ops as _ops
from actorrt.cli.ops import CLIError
from actorrt.cli.records import read_records, record_path, write_record
from actorrt.common import home
from actorrt.common import resources as _resources
from actorrt.common.errors import ActorRTError
from actorrt.transport import addresses
from actorrt.transport import rpc as _rpc

DEFAULT_PORT = _ops.DEFAULT_PORT
# `actorrt connect` exits with this status when its master stopped the cluster on purpose
# (`actorrt stop` on the head): not an error of its own (1), not its own SIGTERM (0).
EXIT_CLUSTER_STOPPED = 3
# Under the head's home: the workers a deliberate stop did not reach (actorrt.master.unreached).
UNREACHED_FILE = "unreached.json"
log = logging.getLogger("actorrt")

T = TypeVar("T")


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
    path = record_path(proc.pid)
    deadline = time.monotonic() + timeout_s
    try:
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                lines = [ln for ln in log_path.read_text(errors="replace").splitlines() if ln.strip()]
                raise CLIError(lines[-1] if lines else f"{kind} exited with code {proc.returncode}")
            try:
                record = json.loads(path.read_text())
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
    records, _ = read_records(every_machine=True)
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


async def _serve_until_signal(
    *services: Any, ended: asyncio.Event | None = None, on_signal: Callable[[signal.Signals], None] | None = None
) -> None:
    """Serve until SIGTERM/SIGINT (``on_signal`` is told which first), or until ``ended`` is
    set; then close ``services``, last first."""
    stop = ended or asyncio.Event()
    loop = asyncio.get_running_loop()

    def stopped(sig: signal.Signals) -> None:
        if on_signal is not None and not stop.is_set():
            on_signal(sig)
        stop.set()

    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stopped, sig)
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
        keep_workers=args.keep_workers,
        unreached_file=home.state_dir() / UNREACHED_FILE,
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
    except CLIError:
        for service in [*reversed(services), *([metrics] if metrics else [])]:
            await service.close()
        raise
    # Only now that everything runs: a start that failed must not replace a running cluster's token.
    token_file = home.write_token(token)
    (home.state_dir(create=True) / "address").write_text(master.address + "\n")
    record = write_record(
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

    def stopping(sig: signal.Signals) -> None:  # what ClusterStopped tells the workers
        master.stop_reason = f"{sig.name} to the master (pid {os.getpid()} on {socket.gethostname()})"

    extra = [*([metrics] if metrics else []), *([dashboard] if dashboard else [])]
    try:
        await _serve_until_signal(*services, *extra, on_signal=stopping)
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


async def _run_connect(args: argparse.Namespace) -> int:
    """Run a worker daemon until a signal (exit status 0), a refusal (CLIError: 1), or until its
    master stops the cluster on purpose (``EXIT_CLUSTER_STOPPED``)."""
    from actorrt.worker.daemon import WorkerDaemon

    token = home.load_token(args.token, args.address)
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
    except CLIError:
        await worker.close()
        raise
    record = write_record(
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
        await _serve_until_signal(worker, *([metrics] if metrics else []), ended=worker.ended)
    finally:
        record.unlink(missing_ok=True)
    if worker.cluster_stopped:
        log.info("exiting with status %d: the cluster was stopped (%s)", EXIT_CLUSTER_STOPPED, worker.cluster_stopped)
        return EXIT_CLUSTER_STOPPED
    return 0


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
        _ops.run(_run_start(args))
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
        return _ops.run(_run_connect(args))
    record = _background(args, argv, "worker", timeout_s=args.timeout + 30)
    print(f"actorrt worker {record['worker_id']} joined {record['address']} (pid {record['pid']}, log {record['log']})")
    if record.get("metrics"):
        print(f"metrics at {record['metrics']}")
    return 0


def _modules(text: str | None) -> tuple[str, ...]:
    return tuple(m.strip() for m in (text or "").split(",") if m.strip())


def _tls(args: argparse.Namespace) -> _rpc.TLS | None:
    try:
        return _rpc.TLS.from_env(args.tls_ca, args.tls_cert, args.tls_key)
    except (ValueError, FileNotFoundError) as e:
        raise CLIError(f"actorrt {args.command}: {e}") from e
