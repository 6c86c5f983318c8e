"""``actorrt start | connect | status | logs | stop``: the parser, and the commands that inspect and
stop a cluster (``start`` and ``connect`` are in ``nodes``).

Every failure the user can cause (bad flags, unreachable address, busy port, missing token)
prints one line to stderr and exits non-zero, without a traceback.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import NoReturn

from actorrt.cli import nodes
from actorrt.cli import ops as _ops
from actorrt.cli.ops import CLIError
from actorrt.cli.records import alive, read_records, start_time
from actorrt.common.errors import ActorRTError
from actorrt.transport import addresses

DEFAULT_PORT = _ops.DEFAULT_PORT


def cmd_status(args: argparse.Namespace, argv: list[str]) -> int:
    import grpc

    from actorrt.common.status import ClusterStatus
    from actorrt.v1 import master_pb2, master_pb2_grpc

    target = _ops.ClusterTarget.from_args(args)

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
        return _ops.run(status())
    except KeyboardInterrupt:
        if args.watch:  # how a watch ends
            return 0
        raise


def cmd_logs(args: argparse.Namespace, argv: list[str]) -> int:
    return _ops.run_logs(args)


def cmd_stop(args: argparse.Namespace, argv: list[str]) -> int:
    records, others = read_records()
    targets = []
    for record in records:
        pid = int(record["pid"])
        if alive(record):
            os.kill(pid, signal.SIGTERM)
            targets.append(record)
        else:  # gone, or its PID now belongs to another process: nothing of ours to signal
            Path(record["_path"]).unlink(missing_ok=True)
            if record.get("start_time") is None and start_time(pid) is not None:
                print(
                    f"not signalling pid {pid}: its record has no start time to tell it from a recycled PID; "
                    f"kill it yourself if it is an actorrt {record.get('kind', 'process')}"
                )
    deadline = time.monotonic() + args.timeout
    while any(alive(r) for r in targets) and time.monotonic() < deadline:
        time.sleep(0.05)
    for record in targets:
        pid = int(record["pid"])
        if alive(record):
            os.kill(pid, signal.SIGKILL)
        Path(record["_path"]).unlink(missing_ok=True)
        print(f"stopped {record.get('kind', 'process')} pid {pid} ({record.get('address', '')})")
    if not targets:
        print("nothing to stop: no actorrt process started from this machine is running")
    if others:  # a home shared with other machines: theirs are stopped there
        print(f"left alone: {others} record(s) of actorrt processes on other machines (run stop there)")
    return 0


def _add_tls_flags(parser: argparse.ArgumentParser) -> None:
    """TLS flags of the daemons; clients' are in ``_ops.add_cluster_args``."""
    parser.add_argument("--tls-cert", help="PEM certificate this node serves with (turns TLS on)")
    parser.add_argument("--tls-key", help="PEM private key of --tls-cert")
    parser.add_argument("--tls-ca", help="PEM CA: verify peers with it, and require client certificates (mutual TLS)")


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


def _address(text: str) -> str:
    try:
        return addresses.check_address(text, "")
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


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
    start.add_argument(
        "--port", type=_ops.listen_port, default=DEFAULT_PORT, help=f"master port (default {DEFAULT_PORT})"
    )
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
    start.add_argument(
        "--keep-workers",
        action="store_true",
        help="a stop (SIGTERM, Ctrl-C, actorrt stop) ends the master alone: its workers keep their actors and "
        "join the next master on this address, as after a crash (a master restarted under its workers). "
        "Default: a stop ends the whole cluster, every worker included",
    )
    _add_tls_flags(start)
    start.add_argument("--block", action="store_true", help="stay in the foreground")
    start.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    _ops.add_daemon_args(start)
    _ops.add_dashboard_args(start)
    start.set_defaults(func=nodes.cmd_start)

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
    conn.add_argument(
        "--token",
        default=None,
        help="cluster token (default: an embedded cluster's on that address, else ACTORRT_TOKEN, else the token file)",
    )
    conn.add_argument("--timeout", type=float, default=10.0, help="seconds to wait for the master")
    conn.add_argument("--preload", help="modules warm actor hosts import ahead, e.g. torch,gymnasium")
    _add_tls_flags(conn)
    conn.add_argument("--block", action="store_true", help="stay in the foreground")
    conn.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    _ops.add_daemon_args(conn)
    conn.set_defaults(func=nodes.cmd_connect)

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
