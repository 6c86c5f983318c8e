"""Large payloads between two processes: the socket's floor and ours, side by side in one run.

Three peers move the same numpy buffer each way, at 1/16/64/256 MiB:

- ``tcp``: a raw TCP connection; the sender ``sendall``s the array's memory, the receiver
  ``recv_into``s a preallocated buffer (no copy in Python at all): the socket's floor.
- ``grpc``: a bare ``grpc.aio`` stream of 4 MiB messages (identity serializers, no protobuf);
  the sender slices the array into ``bytes`` (gRPC takes nothing else), the receiver copies
  each message into a preallocated buffer: what any gRPC user pays.
- ``tls``: the same raw TCP connection under TLS (Python's ``ssl``, a throwaway self-signed
  pair): what a bulk side channel that keeps TLS could reach at best (not run by default).
- ``actorrt``: an actor call with ``ACTORRT_SHM=0`` (the path between machines, on the bulk
  connection beside the Calls stream, ``actorrt/_bulk.py``): ``take(x)``
  (to the actor) and ``give(n)`` (from it, an array the actor keeps).
- ``actorrt_chunks``: the same with ``ACTORRT_BULK=0``: the payload in 4 MiB chunk messages on
  the Calls stream (gRPC), as before the bulk connection.

Each runs on loopback, then between two network namespaces joined by veth pairs (the partition
test's ``tests/nethosts.py``; skipped with the reason when not root or without ``ip``). The
server side runs in one namespace, the client in the other. For each peer, size and direction:
the median transfer time (one call: from the send's start to the receiver holding every byte),
GiB/s and its ratio to ``tcp`` at the same size, direction and network; CPU seconds per MiB of
the sender and of the receiver (``/proc/PID/stat`` over all the repetitions), their context
switches per MiB (every thread's, voluntary and not), and each side's peak RSS above what it
held before (``/proc/PID/status`` VmHWM after resetting it through ``clear_refs``), also as a
multiple of the payload.

    python bench/payload_floor.py                    # everything, JSON lines on stdout
    python bench/payload_floor.py --sizes 64 --nets loopback --peers grpc,actorrt
    python bench/payload_floor.py --peers tcp,tls --nets loopback

``PAYLOAD_FLOOR_GRPC_CHUNK_KIB`` sets the bare gRPC peer's message size (4096 by default) and
``PAYLOAD_FLOOR_GRPC_OPTIONS`` (JSON ``[[name, value], ...]``) adds channel arguments at both of
its ends, to try them.

Roles (internal): ``--_serve tcp|grpc`` runs a server, ``--_client PEER`` a measuring client.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

MIB = 1 << 20
GRPC_CHUNK = int(os.environ.get("PAYLOAD_FLOOR_GRPC_CHUNK_KIB", "4096")) << 10  # the bare gRPC message size
_HEAD = struct.Struct("!cQ")
_UP = "/floor.Bulk/Up"
_DOWN = "/floor.Bulk/Down"
TOKEN = "payload-floor-token"
ROOT = Path(__file__).resolve().parent.parent


REPS = 0  # --reps: calls per direction (0: automatic)


def _reps(size: int) -> int:
    """At least 256 MiB per direction (CPU ticks are 10 ms), at least 3 calls."""
    return REPS or max(3, (256 * MIB) // size)


def _array(size: int) -> Any:
    import numpy as np

    return np.full(size, 7, dtype=np.uint8)


# ---- per-process accounting (any PID of this PID namespace) ------------------------------------


def _cpu_s(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _switches(pid: int) -> int:
    total = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/status") as f:
                for line in f:
                    if "ctxt_switches" in line:
                        total += int(line.split()[1])
        except OSError:
            pass
    return total


def _status_kb(pid: int, key: str) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return 0


def _reset_peak(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


class Meter:
    """CPU, context switches and peak RSS of one process over a stretch of time."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.peak_reset = _reset_peak(pid)
        self.rss0 = _status_kb(pid, "VmRSS")
        self.cpu0 = _cpu_s(pid)
        self.sw0 = _switches(pid)

    def done(self, mib: float, payload_mib: float) -> dict[str, Any]:
        extra = (_status_kb(self.pid, "VmHWM") - self.rss0) / 1024 if self.peak_reset else None
        return {
            "cpu_ms_per_mib": round((_cpu_s(self.pid) - self.cpu0) * 1e3 / mib, 3),
            "switches_per_mib": round((_switches(self.pid) - self.sw0) / mib, 2),
            "rss_before_mib": round(self.rss0 / 1024, 1),
            "peak_extra_mib": None if extra is None else round(extra, 1),
            "peak_extra_payloads": None if extra is None else round(extra / payload_mib, 2),
        }


def _grpc_options() -> list[tuple[str, Any]]:
    """The bare gRPC peer's channel arguments, both ends; ``PAYLOAD_FLOOR_GRPC_OPTIONS`` (a JSON
    list of [name, value]) adds some, to try them."""
    extra = [tuple(o) for o in json.loads(os.environ.get("PAYLOAD_FLOOR_GRPC_OPTIONS", "[]"))]
    return [("grpc.max_receive_message_length", -1), ("grpc.max_send_message_length", -1), *extra]


# ---- servers ----------------------------------------------------------------------------------


def _recv_exact(conn: socket.socket, view: memoryview) -> None:
    got = 0
    while got < len(view):
        n = conn.recv_into(view[got:])
        if not n:
            raise ConnectionError("peer closed")
        got += n


def _tls_context(server: bool) -> Any:
    """The ``tls`` peer's context: the self-signed pair in ``PAYLOAD_FLOOR_TLS_DIR``."""
    import ssl

    where = Path(os.environ["PAYLOAD_FLOOR_TLS_DIR"])
    if server:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(where / "cert.pem", where / "key.pem")
        return ctx
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.load_verify_locations(where / "cert.pem")
    ctx.check_hostname = False
    return ctx


def _serve_tcp(host: str, port: int, tls: bool = False) -> None:
    ctx = _tls_context(server=True) if tls else None
    arrays: dict[int, Any] = {}
    sink: dict[int, bytearray] = {}
    with socket.create_server((host, port)) as srv:
        print("ready", flush=True)
        while True:
            conn, _ = srv.accept()
            if ctx is not None:
                conn = ctx.wrap_socket(conn, server_side=True)
            with conn:
                conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                head = bytearray(_HEAD.size)
                try:
                    while True:
                        _recv_exact(conn, memoryview(head))
                        op, size = _HEAD.unpack(head)
                        if op == b"U":
                            buf = sink.get(size) or sink.setdefault(size, bytearray(size))
                            _recv_exact(conn, memoryview(buf))
                            conn.sendall(b"k")
                        elif op == b"D":
                            arr = arrays.get(size)
                            if arr is None:
                                arr = arrays[size] = _array(size)
                            conn.sendall(memoryview(arr).cast("B"))
                        else:
                            conn.sendall(struct.pack("!Q", os.getpid()))
                except ConnectionError:
                    pass


async def _serve_grpc(host: str, port: int) -> None:
    import grpc

    arrays: dict[int, Any] = {}
    sink: dict[int, bytearray] = {}

    async def up(requests: Any, context: Any) -> bytes:
        buf: bytearray | None = None
        pos = 0
        async for msg in requests:
            if buf is None:  # the first message names the size
                size = struct.unpack("!Q", msg)[0]
                buf = sink.get(size) or sink.setdefault(size, bytearray(size))
                continue
            buf[pos : pos + len(msg)] = msg
            pos += len(msg)
        return b"k"

    async def down(request: bytes, context: Any) -> Any:
        size = struct.unpack("!Q", request)[0]
        if size == 0:
            yield struct.pack("!Q", os.getpid())
            return
        arr = arrays.get(size)
        if arr is None:
            arr = arrays[size] = _array(size)
        view = memoryview(arr).cast("B")
        for start in range(0, size, GRPC_CHUNK):
            yield bytes(view[start : start + GRPC_CHUNK])

    handler = grpc.method_handlers_generic_handler(
        "floor.Bulk",
        {
            "Up": grpc.stream_unary_rpc_method_handler(up),
            "Down": grpc.unary_stream_rpc_method_handler(down),
        },
    )
    server = grpc.aio.server(options=[*_grpc_options(), ("grpc.so_reuseport", 0)])
    server.add_generic_rpc_handlers((handler,))
    server.add_insecure_port(f"{host}:{port}")
    await server.start()
    print("ready", flush=True)
    await server.wait_for_termination()


# ---- clients: one peer, one size, both directions ---------------------------------------------


Transfer = Callable[[], Awaitable[None]]


async def _measure(
    peer: str, size: int, net: str, sender_receiver: dict[str, tuple[int, int]], calls: dict[str, Transfer]
) -> list[dict[str, Any]]:
    out = []
    for direction, call in calls.items():
        await call()  # warm-up: buffers allocated, windows opened
        send_pid, recv_pid = sender_receiver[direction]
        reps = _reps(size)
        meters = Meter(send_pid), Meter(recv_pid)
        times = []
        for _ in range(reps):
            start = time.perf_counter()
            await call()
            times.append(time.perf_counter() - start)
        mib, payload = reps * size / MIB, size / MIB
        sender, receiver = (m.done(mib, payload) for m in meters)
        t = statistics.median(times)
        out.append(
            {
                "net": net,
                "peer": peer,
                "size_mib": size // MIB,
                "direction": direction,
                "reps": reps,
                "median_ms": round(t * 1e3, 3),
                "gib_s": round(size / t / 2**30, 3),
                "best_gib_s": round(size / min(times) / 2**30, 3),
                "sender": sender,
                "receiver": receiver,
            }
        )
    return out


async def _client_tcp(
    addr: str, sizes: list[int], net: str, server_pid: int, peer: str = "tcp"
) -> list[dict[str, Any]]:
    host, port = addr.rsplit(":", 1)
    _reader, writer = await asyncio.open_connection(host, int(port))
    sock = writer.get_extra_info("socket")
    raw = socket.socket(fileno=os.dup(sock.fileno()))
    writer.close()
    raw.setblocking(True)
    raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    if peer == "tls":
        raw = _tls_context(server=False).wrap_socket(raw)
    me = os.getpid()
    results: list[dict[str, Any]] = []
    for size in sizes:
        arr = memoryview(_array(size)).cast("B")
        sink = bytearray(size)

        async def up(size: int = size, arr: memoryview = arr) -> None:
            raw.sendall(_HEAD.pack(b"U", size))
            raw.sendall(arr)
            _recv_exact(raw, memoryview(bytearray(1)))

        async def down(size: int = size, sink: bytearray = sink) -> None:
            raw.sendall(_HEAD.pack(b"D", size))
            _recv_exact(raw, memoryview(sink))

        pids = {"to_server": (me, server_pid), "from_server": (server_pid, me)}
        results.extend(await _measure(peer, size, net, pids, {"to_server": up, "from_server": down}))
        assert sink[0] == 7 and sink[-1] == 7
        del arr
    raw.close()
    return results


async def _client_grpc(addr: str, sizes: list[int], net: str, server_pid: int) -> list[dict[str, Any]]:
    import grpc

    async with grpc.aio.insecure_channel(addr, options=_grpc_options()) as channel:
        up_rpc: Any = channel.stream_unary(_UP)
        down_rpc: Any = channel.unary_stream(_DOWN)
        me = os.getpid()
        results: list[dict[str, Any]] = []
        for size in sizes:
            arr = memoryview(_array(size)).cast("B")
            sink = bytearray(size)

            async def up(size: int = size, arr: memoryview = arr) -> None:
                def messages() -> Iterator[bytes]:
                    yield struct.pack("!Q", size)
                    for start in range(0, size, GRPC_CHUNK):
                        yield bytes(arr[start : start + GRPC_CHUNK])

                await up_rpc(messages())

            async def down(size: int = size, sink: bytearray = sink) -> None:
                pos = 0
                async for msg in down_rpc(struct.pack("!Q", size)):
                    sink[pos : pos + len(msg)] = msg
                    pos += len(msg)
                assert pos == size

            pids = {"to_server": (me, server_pid), "from_server": (server_pid, me)}
            results.extend(await _measure("grpc", size, net, pids, {"to_server": up, "from_server": down}))
            assert sink[0] == 7 and sink[-1] == 7
            del arr
        return results


class Bulk:
    """The actor: takes arrays, and gives one it keeps (made on the first call of a size)."""

    def __init__(self) -> None:
        self.arrays: dict[int, Any] = {}

    def pid(self) -> int:
        return os.getpid()

    def take(self, x: Any) -> None:
        return None

    def give(self, size: int) -> Any:
        arr = self.arrays.get(size)
        if arr is None:
            import numpy as np

            arr = self.arrays[size] = np.full(size, 7, dtype=np.uint8)
        return arr


async def _client_actorrt(
    addr: str, sizes: list[int], net: str, server_pid: int, peer: str = "actorrt"
) -> list[dict[str, Any]]:
    import actorrt

    remote_bulk = actorrt.remote_class(Bulk)
    async with actorrt.connect(addr, token=TOKEN, timeout=30):
        actor = await remote_bulk.remote()
        host_pid = await actor.pid()
        me = os.getpid()
        results: list[dict[str, Any]] = []
        for size in sizes:
            arr = _array(size)

            async def up(arr: Any = arr) -> None:
                await actor.take(arr)

            async def down(size: int = size) -> None:
                got = await actor.give(size)
                assert got.nbytes == size

            pids = {"to_server": (me, host_pid), "from_server": (host_pid, me)}
            results.extend(await _measure(peer, size, net, pids, {"to_server": up, "from_server": down}))
            del arr
        return results


async def _client_tls(addr: str, sizes: list[int], net: str, server_pid: int) -> list[dict[str, Any]]:
    return await _client_tcp(addr, sizes, net, server_pid, peer="tls")


async def _client_actorrt_chunks(addr: str, sizes: list[int], net: str, server_pid: int) -> list[dict[str, Any]]:
    return await _client_actorrt(addr, sizes, net, server_pid, peer="actorrt_chunks")


_CLIENTS = {
    "tcp": _client_tcp,
    "tls": _client_tls,
    "grpc": _client_grpc,
    "actorrt": _client_actorrt,
    "actorrt_chunks": _client_actorrt_chunks,
}


# ---- orchestration ----------------------------------------------------------------------------


class Net:
    """Where servers and clients run: this namespace, or two network namespaces."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.hosts: Any = None

    def __enter__(self) -> Net:
        if self.name == "veth":
            sys.path.insert(0, str(ROOT))
            from tests.nethosts import NetHosts

            self.hosts = NetHosts(["server", "client"]).__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.hosts is not None:
            self.hosts.close()

    def ip(self, role: str) -> str:
        return "127.0.0.1" if self.hosts is None else self.hosts.ip(role)

    def argv(self, role: str, argv: list[str]) -> list[str]:
        return argv if self.hosts is None else ["ip", "netns", "exec", self.hosts.ns(role), *argv]


def _veth_unavailable() -> str | None:
    sys.path.insert(0, str(ROOT))
    from tests.nethosts import can_create_namespaces

    return can_create_namespaces()


def _env() -> dict[str, str]:
    return dict(os.environ, ACTORRT_SHM="0", PYTHONPATH=str(ROOT), PYTHONUNBUFFERED="1")


def _start_servers(net: Net, peers: list[str], home: str) -> tuple[dict[str, tuple[str, int]], list[Any]]:
    """Each peer's server on the 'server' side: (address, PID), and the processes to stop."""
    host = net.ip("server")
    if "tls" in peers:  # a throwaway self-signed pair; both ends find it through the environment
        key, cert = os.path.join(home, "key.pem"), os.path.join(home, "cert.pem")
        argv = ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
        argv += ["-keyout", key, "-out", cert, "-days", "1", "-subj", "/CN=payload-floor"]
        subprocess.run(argv, check=True, capture_output=True)
        os.environ["PAYLOAD_FLOOR_TLS_DIR"] = home
    procs: list[Any] = []
    where: dict[str, tuple[str, int]] = {}
    for i, peer in enumerate(peers):
        port = 18310 + i
        if peer.startswith("actorrt"):
            argv = [sys.executable, "-m", "actorrt", "start", "--block", "--host", host, "--port", str(port)]
            argv += ["--cpus", "1", "--token", TOKEN]
            env = dict(_env(), ACTORRT_HOME=home)
            log = open(os.path.join(home, "actorrt.log"), "wb")
            proc = subprocess.Popen(net.argv("server", argv), env=env, stdout=log, stderr=log)
            procs.append(proc)
            where[peer] = (f"{host}:{port}", proc.pid)
            continue
        argv = [sys.executable, __file__, "--_serve", peer, "--_host", host, "--_port", str(port)]
        proc = subprocess.Popen(net.argv("server", argv), env=_env(), stdout=subprocess.PIPE)
        procs.append(proc)
        assert proc.stdout is not None
        if proc.stdout.readline().strip() != b"ready":
            raise RuntimeError(f"the {peer} server did not start")
        where[peer] = (f"{host}:{port}", proc.pid)
    # Wait for the node to take actors: the client's connect retries meanwhile.
    if any(p.startswith("actorrt") for p in where):
        time.sleep(2.0)
    return where, procs


def run(nets: list[str], peers: list[str], sizes: list[int]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for net_name in nets:
        if net_name == "veth" and (why := _veth_unavailable()):
            line: dict[str, Any] = {"net": "veth", "skipped": why}
            print(json.dumps(line), flush=True)
            out.append(line)
            continue
        with tempfile.TemporaryDirectory(prefix="payload-floor-") as home, Net(net_name) as net:
            where, procs = _start_servers(net, peers, home)
            try:
                rows: list[dict[str, Any]] = []
                for size in sizes:  # peers alternate per size, so drift hits them alike
                    for peer in peers:
                        addr, pid = where[peer]
                        argv = [sys.executable, __file__, "--_client", peer, "--_addr", addr]
                        argv += ["--_pid", str(pid), "--_net", net_name, "--sizes", str(size // MIB)]
                        argv += ["--reps", str(REPS)]
                        env = dict(_env(), ACTORRT_BULK="0") if peer == "actorrt_chunks" else _env()
                        res = subprocess.run(net.argv("client", argv), env=env, capture_output=True, text=True)
                        if res.returncode != 0:
                            failed: dict[str, Any] = {
                                "net": net_name,
                                "peer": peer,
                                "size_mib": size // MIB,
                                "error": res.stderr[-1500:],
                            }
                            print(json.dumps(failed), flush=True)
                            out.append(failed)
                            continue
                        for text in res.stdout.splitlines():
                            row = json.loads(text)
                            floor = next(
                                (
                                    r
                                    for r in rows
                                    if r["peer"] == "tcp"
                                    and r["size_mib"] == row["size_mib"]
                                    and r["direction"] == row["direction"]
                                ),
                                None,
                            )
                            if floor is not None:
                                row["of_tcp_floor"] = round(row["gib_s"] / floor["gib_s"], 3)
                            rows.append(row)
                            print(json.dumps(row), flush=True)
                out.extend(rows)
            finally:
                for proc in procs:
                    proc.terminate()
                for proc in procs:
                    try:
                        proc.wait(10)
                    except subprocess.TimeoutExpired:
                        proc.kill()
                        proc.wait()
    return out


def table(rows: list[dict[str, Any]]) -> str:
    lines = [
        "net       peer           MiB  direction    GiB/s  of tcp  snd ms/MiB  rcv ms/MiB  snd sw/MiB  rcv sw/MiB  snd peak+  rcv peak+"
    ]
    for r in rows:
        if "gib_s" not in r:
            continue
        s, v = r["sender"], r["receiver"]
        lines.append(
            f"{r['net']:<9} {r['peer']:<14} {r['size_mib']:>3}  {r['direction']:<11} {r['gib_s']:>6.2f}  "
            f"{r.get('of_tcp_floor', 1.0):>6.2f}  {s['cpu_ms_per_mib']:>10.2f}  {v['cpu_ms_per_mib']:>10.2f}  "
            f"{s['switches_per_mib']:>10.1f}  {v['switches_per_mib']:>10.1f}  "
            f"{s['peak_extra_payloads']!s:>9}  {v['peak_extra_payloads']!s:>9}"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sizes", default="1,16,64,256", help="MiB, comma-separated")
    p.add_argument("--nets", default="loopback,veth")
    p.add_argument("--peers", default="tcp,grpc,actorrt,actorrt_chunks")
    p.add_argument("--reps", type=int, default=0, help="calls per direction (default: 256 MiB worth, at least 3)")
    p.add_argument("--table", action="store_true", help="a table on stderr at the end")
    p.add_argument("--_serve", help=argparse.SUPPRESS)
    p.add_argument("--_client", help=argparse.SUPPRESS)
    p.add_argument("--_host", help=argparse.SUPPRESS)
    p.add_argument("--_port", type=int, help=argparse.SUPPRESS)
    p.add_argument("--_addr", help=argparse.SUPPRESS)
    p.add_argument("--_pid", type=int, help=argparse.SUPPRESS)
    p.add_argument("--_net", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    global REPS
    REPS = args.reps
    sizes = [int(s) * MIB for s in args.sizes.split(",")]
    if args._serve in ("tcp", "tls"):
        _serve_tcp(args._host, args._port, tls=args._serve == "tls")
        return 0
    if args._serve == "grpc":
        asyncio.run(_serve_grpc(args._host, args._port))
        return 0
    if args._client:
        client = _CLIENTS[args._client]
        for row in asyncio.run(client(args._addr, sizes, args._net, args._pid)):
            print(json.dumps(row), flush=True)
        return 0
    peers = args.peers.split(",")
    if "tcp" in peers:  # the floor first: ratios are to it
        peers.remove("tcp")
        peers.insert(0, "tcp")
    rows = run(args.nets.split(","), peers, sizes)
    if args.table:
        print(table(rows), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
