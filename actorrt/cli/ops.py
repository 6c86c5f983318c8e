"""Operations commands and flags of the CLI: metrics endpoints, ``status`` (table, ``--json``,
``--watch``) and ``logs``, and what every command shares (``CLIError``, ``run``). ``main`` wires
these into its parser; they run on the CLI's thread.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from actorrt.common import home, loop
from actorrt.common import logs as _logs
from actorrt.common.text import printable
from actorrt.transport import addresses
from actorrt.transport import rpc as _rpc

if TYPE_CHECKING:
    import grpc
    from prometheus_client import CollectorRegistry

    from actorrt.common.metrics_http import MetricsServer
    from actorrt.common.status import ClusterStatus
    from actorrt.master.dashboard import Dashboard
    from actorrt.master.server import Master

__all__ = [
    "ClusterTarget",
    "add_cluster_args",
    "add_daemon_args",
    "add_dashboard_args",
    "add_logs_parser",
    "add_status_args",
    "default_address",
    "run_status",
    "start_dashboard",
    "start_metrics",
]

P = TypeVar("P", bound=argparse.ArgumentParser)  # the CLI's own parser class
T = TypeVar("T")


class CLIError(Exception):
    """One line for the user; the CLI prints it and exits 1, without a traceback."""


def run(coro: Coroutine[Any, Any, T]) -> T:
    """Run a command's coroutine on a fresh event loop (uvloop where installed)."""
    return loop.run(coro)


# ---- start / connect: metrics and log flags ---------------------------------------------------


def add_daemon_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--metrics-port",
        type=listen_port,
        default=0,
        help="serve Prometheus metrics at http://HOST:PORT/metrics (default 0: off)",
    )
    parser.add_argument(
        "--metrics-host",
        default=None,
        help="address the metrics endpoint listens on (default: --host for start, --node-ip for connect)",
    )
    parser.add_argument(
        "--log-format",
        default="text",
        choices=["text", "json"],
        help="daemon log lines: 'text' (one line per event, ids as key=value) or 'json'",
    )
    parser.add_argument(
        "--log-file",
        default=None,
        help="write the daemon's log, stdout and stderr to this file, rotated by size (default: stderr "
        "with --block, else ACTORRT_HOME/logs/<kind>-<ms>.log)",
    )
    parser.add_argument(
        "--log-max-bytes",
        type=_log_bytes,
        default=_logs.DAEMON_LOG_BYTES,
        help=f"rotate the log file at this size (default {_logs.DAEMON_LOG_BYTES // 2**20} MiB)",
    )
    parser.add_argument(
        "--log-backups",
        type=_positive_int,
        default=_logs.DAEMON_LOG_BACKUPS,
        help=f"rotated log files kept (default {_logs.DAEMON_LOG_BACKUPS}): at most (backups + 1) x max bytes on disk",
    )


def start_metrics(args: argparse.Namespace, registry: CollectorRegistry, default_host: str) -> MetricsServer | None:
    """Serve ``registry`` when ``--metrics-port`` is set; raises CLIError if the port is taken."""
    if not args.metrics_port:
        return None
    from actorrt.common.metrics_http import serve

    try:
        return serve(registry, args.metrics_port, args.metrics_host or default_host)
    except OSError as e:
        raise CLIError(f"actorrt {args.command}: {e}") from e


def add_dashboard_args(parser: argparse.ArgumentParser) -> None:
    """``actorrt start``'s web status page (``_dashboard.py``)."""
    parser.add_argument(
        "--dashboard-port",
        "--monitor_port",  # xparl's name for its status page's port
        dest="dashboard_port",
        type=listen_port,
        default=0,
        help="serve the web status page at http://HOST:PORT/ and its JSON at /api/status (default 0: off); "
        "--monitor_port: the same, xparl's name",
    )
    parser.add_argument(
        "--dashboard-host",
        default="127.0.0.1",
        help="address the dashboard listens on (default: loopback only, whatever --host is; it has no token)",
    )
    parser.add_argument(
        "--dashboard-logs",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="the dashboard shows what actors print, to whoever can reach it (default: on; "
        "--no-dashboard-logs turns it off)",
    )


async def start_dashboard(args: argparse.Namespace, master: Master) -> Dashboard | None:
    """Serve the status page when ``--dashboard-port`` is set; raises CLIError if the port is taken."""
    if not args.dashboard_port:
        return None
    from actorrt.master.dashboard import Dashboard

    dashboard = Dashboard(master, args.dashboard_port, args.dashboard_host, logs=args.dashboard_logs)
    try:
        await dashboard.start()
    except OSError as e:
        raise CLIError(f"actorrt {args.command}: {e}") from e
    return dashboard


# ---- status and logs: how the CLI reaches a running cluster ----------------------------------

DEFAULT_PORT = 8010


def add_cluster_args(parser: argparse.ArgumentParser, address_type: Callable[[str], str]) -> None:
    """The flags of every command that talks to a running cluster: address, token and TLS."""
    parser.add_argument("--address", type=address_type, default=None, help="master HOST:PORT (default: the last start)")
    parser.add_argument(
        "--token",
        default=None,
        help="cluster token (default: an embedded cluster's on that address, else ACTORRT_TOKEN, else the token file)",
    )
    parser.add_argument(
        "--tls-ca", help="PEM CA that the cluster's certificates are signed by (turns TLS on; default ACTORRT_TLS_CA)"
    )
    parser.add_argument("--tls-cert", help="PEM client certificate, for mutual TLS (default ACTORRT_TLS_CERT)")
    parser.add_argument("--tls-key", help="PEM private key of --tls-cert (default ACTORRT_TLS_KEY)")


def default_address() -> str:
    """``ACTORRT_ADDRESS``, else the address the last ``actorrt start`` on this machine wrote;
    raises ValueError when the one found is not ``HOST:PORT`` (``addresses.check_address``)."""
    if os.environ.get("ACTORRT_ADDRESS"):
        return addresses.check_address(os.environ["ACTORRT_ADDRESS"], "ACTORRT_ADDRESS")
    written = home.state_dir() / "address"
    try:
        address = written.read_text().strip()
    except OSError:
        return f"127.0.0.1:{DEFAULT_PORT}"
    return addresses.check_address(address, f"the address in {written}")


@dataclass(frozen=True)
class ClusterTarget:
    """Where and how a CLI command reaches a running cluster: the one channel factory.

    Address, token and TLS come from the flags of :func:`add_cluster_args`, then the
    environment (``ACTORRT_ADDRESS``, ``ACTORRT_TOKEN``, ``ACTORRT_TLS_*``), then the state dir
    (an embedded cluster's token, recorded under its address, comes before the variable).
    With TLS configured the token only ever travels inside TLS.
    """

    command: str
    address: str
    token: str | None
    tls: _rpc.TLS | None

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> ClusterTarget:
        try:
            tls = _rpc.TLS.from_env(args.tls_ca, args.tls_cert, args.tls_key)
        except (ValueError, FileNotFoundError) as e:
            raise CLIError(f"actorrt {args.command}: {e}") from e
        try:
            address = args.address or default_address()
        except ValueError as e:
            raise CLIError(f"actorrt {args.command}: {e}") from e
        return cls(args.command, address, home.load_token(args.token, address), tls)

    def channel(self) -> grpc.aio.Channel:
        return _rpc.open_channel(self.address, self.tls)

    def metadata(self) -> tuple[tuple[str, str], ...]:
        return _rpc.auth_metadata(self.token)

    def error(self, e: grpc.RpcError) -> CLIError:
        """One line for a failed call; says how to turn TLS on when plaintext found no master."""
        import grpc

        text = f"actorrt {self.command}: {_rpc.translate(e, self.command, self.address)}"
        if self.tls is None and e.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
            text += "; if the cluster uses TLS, pass --tls-ca or set ACTORRT_TLS_CA"
        return CLIError(text)


# ---- status ------------------------------------------------------------------------------------


def add_status_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--watch", action="store_true", help="refresh the table until Ctrl-C")
    parser.add_argument("--interval", type=_positive, default=2.0, help="seconds between --watch refreshes")


async def run_status(args: argparse.Namespace, fetch: Callable[[], Awaitable[ClusterStatus]]) -> int:
    """Print the status once, or with ``--watch`` every ``--interval`` seconds until Ctrl-C.

    The whole watch runs on one event loop and one channel: a fresh loop per refresh started and
    stopped gRPC's poller thread each time, and a Ctrl-C landing in that shutdown could hang the
    process in ``Thread.join``. Ctrl-C cancels this coroutine; the caller turns it into exit 0.
    """
    if not args.watch:
        st = await fetch()
        print(json.dumps(st.to_dict(), indent=2) if args.json else st)
        return 0
    clear = sys.stdout.isatty() and not args.json
    while True:
        st = await fetch()
        text = json.dumps(st.to_dict()) if args.json else str(st)
        if clear:
            sys.stdout.write("\x1b[H\x1b[2J")
        stamp = time.strftime("%H:%M:%S")
        print(text if args.json else f"{text}\n\n(every {args.interval:g}s at {stamp}; Ctrl-C to stop)\n", flush=True)
        await asyncio.sleep(args.interval)


# ---- logs --------------------------------------------------------------------------------------


def add_logs_parser(sub: argparse._SubParsersAction[P], address_type: Callable[[str], str]) -> P:
    logs = sub.add_parser("logs", help="print a live or dead actor's output log, read from its node")
    logs.add_argument("actor_id", help="the actor's id, or a unique prefix of it (as in '(Class pid=N id=...)')")
    add_cluster_args(logs, address_type)
    logs.add_argument(
        "--tail",
        type=_positive_int,
        default=2**20,
        help="print at most the last N bytes (default 1 MiB; at most 2 MiB, the rest stays in the file on the actor's node)",
    )
    logs.add_argument("--timeout", type=float, default=15.0)
    return logs


def run_logs(args: argparse.Namespace) -> int:
    """Print an actor's log, fetched through the master on a :class:`ClusterTarget` channel."""
    import grpc

    from actorrt.v1 import master_pb2, master_pb2_grpc

    target = ClusterTarget.from_args(args)

    async def fetch() -> master_pb2.GetActorLogResponse:
        async with target.channel() as channel:
            stub = master_pb2_grpc.MasterStub(channel)
            try:
                response: master_pb2.GetActorLogResponse = await stub.GetActorLog(
                    master_pb2.GetActorLogRequest(actor_id=args.actor_id, max_bytes=args.tail),
                    metadata=target.metadata(),
                    timeout=args.timeout,
                )
                return response
            except grpc.RpcError as e:
                if e.code() in (grpc.StatusCode.NOT_FOUND, grpc.StatusCode.INVALID_ARGUMENT):
                    raise CLIError(f"actorrt logs: {printable(e.details() or '')}") from e
                if e.code() == grpc.StatusCode.UNAVAILABLE and "no longer in the cluster" in (e.details() or ""):
                    raise CLIError(f"actorrt logs: {printable(e.details() or '')}") from e
                raise target.error(e) from e

    msg = loop.run(fetch())
    state = "alive" if msg.alive else f"dead: {printable(msg.cause)}" if msg.cause else "dead"
    note = " (showing the tail; --tail for more)" if msg.truncated else ""
    empty = "; it printed nothing" if not msg.data else ""
    head = f"{printable(msg.actor_id)} ({printable(msg.class_name)}) on {printable(msg.node)}"
    print(f"== actor {head}, {state}{note}{empty}", file=sys.stderr)
    sys.stdout.buffer.write(msg.data)
    sys.stdout.flush()
    return 0


# ---- argument types ------------------------------------------------------------------------------


def listen_port(text: str) -> int:
    """A port to listen on (0: any free one), as argparse takes it (``addresses.check_port``)."""
    try:
        return addresses.check_port(text, listen=True)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _positive(text: str) -> float:
    value = float(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be > 0, got {value}")
    return value


def _positive_int(text: str) -> int:
    value = int(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be > 0, got {value}")
    return value


def _log_bytes(text: str) -> int:
    value = int(text)
    if value < 1024:
        raise argparse.ArgumentTypeError(f"must be >= 1024, got {value}")
    return value
