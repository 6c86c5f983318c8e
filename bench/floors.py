"""The transport's floors, measured in the same run as the actor systems.

Two echo "systems" that the latency and pipelined benches drive exactly as they drive an actor:

- ``grpc_floor``: a bare ``grpc.aio`` bidirectional stream to an echo server in another process;
  one gRPC message per call, no batching, no pickling (raw bytes, identity serializers).
- ``tcp_floor``: a raw asyncio TCP connection to an echo server in another process; each call is
  one length-prefixed frame (the kernel may coalesce pipelined frames, as it would for anyone).

Each "actor" is one connection (two actors: two connections to the same server). Servers run on
uvloop when it is installed, as actorrt's hosts do. ``serve(kind)`` is the server's entry point
(``actor_calls.py --_floor-server KIND``): it prints its port on stdout and serves until stdin
closes.
"""

from __future__ import annotations

import asyncio
import collections
import os
import struct
import subprocess
import sys
import threading
from collections.abc import Awaitable, Callable
from typing import Any

_METHOD = "/floor.Echo/Echo"
_FRAME = struct.Struct("!I")
PING = b"p"


def _identity(x: bytes) -> bytes:
    return x


# ---- servers (their own process) --------------------------------------------------------------


async def _grpc_server() -> None:
    import grpc

    async def echo(requests: Any, context: Any) -> Any:
        async for msg in requests:
            yield msg

    handler = grpc.method_handlers_generic_handler(
        "floor.Echo", {"Echo": grpc.stream_stream_rpc_method_handler(echo, _identity, _identity)}
    )
    server = grpc.aio.server(options=[("grpc.so_reuseport", 0)])
    server.add_generic_rpc_handlers((handler,))
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    print(port, flush=True)
    await _until_stdin_closes()
    await server.stop(None)


async def _tcp_server() -> None:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readexactly(4)
                body = await reader.readexactly(_FRAME.unpack(head)[0])
                writer.write(head + body)
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.CancelledError):
            writer.close()  # the client went, or the server is closing

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    print(server.sockets[0].getsockname()[1], flush=True)
    await _until_stdin_closes()
    server.close()


async def _until_stdin_closes() -> None:
    done = asyncio.get_running_loop().create_future()

    def watch() -> None:
        while sys.stdin.buffer.read(4096):
            pass
        done.get_loop().call_soon_threadsafe(done.set_result, None)

    threading.Thread(target=watch, daemon=True).start()
    await done


def serve(kind: str) -> None:
    main = {"grpc": _grpc_server, "tcp": _tcp_server}[kind]
    try:
        import uvloop

        uvloop.run(main())
    except ImportError:
        asyncio.run(main())


# ---- clients ----------------------------------------------------------------------------------


class _Conn:
    """One echo connection; ``ping()`` sends one message now and returns a future of its echo."""

    def __init__(self) -> None:
        self.waiting: collections.deque[asyncio.Future[bytes]] = collections.deque()

    def method(self, name: str) -> Callable[..., Awaitable[Any]]:
        if name != "ping":
            raise NotImplementedError(f"the floors measure ping only, not {name}")
        return self.ping

    def ping(self) -> Awaitable[bytes]:
        raise NotImplementedError

    def _resolve(self, msg: bytes) -> None:
        fut = self.waiting.popleft()
        if not fut.done():
            fut.set_result(msg)

    async def close(self) -> None:
        raise NotImplementedError


class _GrpcConn(_Conn):
    def __init__(self, call: Any) -> None:
        super().__init__()
        self.call = call
        self.outbox: asyncio.Queue[bytes] = asyncio.Queue()
        self.tasks = [asyncio.create_task(self._write()), asyncio.create_task(self._read())]

    def ping(self) -> Awaitable[bytes]:
        fut = asyncio.get_running_loop().create_future()
        self.waiting.append(fut)
        self.outbox.put_nowait(PING)
        return fut

    async def _write(self) -> None:
        while True:
            await self.call.write(await self.outbox.get())  # grpc.aio: one write at a time

    async def _read(self) -> None:
        import grpc

        while (msg := await self.call.read()) is not grpc.aio.EOF:
            self._resolve(msg)

    async def close(self) -> None:
        for t in self.tasks:
            t.cancel()
        self.call.cancel()


class _TcpConn(_Conn):
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        super().__init__()
        self.reader, self.writer = reader, writer
        self.frame = _FRAME.pack(len(PING)) + PING
        self.task = asyncio.create_task(self._read())

    def ping(self) -> Awaitable[bytes]:
        fut = asyncio.get_running_loop().create_future()
        self.waiting.append(fut)
        self.writer.write(self.frame)
        return fut

    async def _read(self) -> None:
        while True:
            head = await self.reader.readexactly(4)
            self._resolve(await self.reader.readexactly(_FRAME.unpack(head)[0]))

    async def close(self) -> None:
        self.task.cancel()
        self.writer.close()


class PingPong:
    """The strictest floor: one grpc.aio stream, ``await write(); await read()`` per call, no
    task, queue or future in between (``_GrpcConn`` has a writer and a reader task so that it
    can pipeline, as an actor runtime must; that costs it ~5-10 % of a round trip)."""

    def __init__(self, script: str) -> None:
        self.floor = FloorSystem("grpc", script)
        self.call: Any = None

    async def open(self) -> None:
        await self.floor.open()
        self.call = self.floor.channel.stream_stream(
            _METHOD, request_serializer=_identity, response_deserializer=_identity
        )()

    async def ping(self) -> bytes:
        await self.call.write(PING)
        return await self.call.read()

    async def close(self) -> None:
        if self.call is not None:
            self.call.cancel()
        await self.floor.close()


class FloorSystem:
    """A ``System`` whose actors are echo connections (latency and pipelined benches only)."""

    groups = frozenset({"latency", "pipelined"})

    def __init__(self, kind: str, script: str) -> None:
        self.kind = kind
        self.name = f"{kind}_floor"
        self.script = script
        self.proc: subprocess.Popen[bytes] | None = None
        self.port = 0
        self.channel: Any = None
        self.conns: list[_Conn] = []

    async def open(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, self.script, "--_floor-server", self.kind],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=dict(os.environ, PYTHONUNBUFFERED="1"),
        )
        assert self.proc.stdout is not None
        self.port = int(self.proc.stdout.readline())
        if self.kind == "grpc":
            import grpc

            self.channel = grpc.aio.insecure_channel(f"127.0.0.1:{self.port}")

    async def close(self) -> None:
        for c in self.conns:
            await c.close()
        if self.channel is not None:
            await self.channel.close()
        if self.proc is not None:
            assert self.proc.stdin is not None
            self.proc.stdin.close()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    async def create(self) -> _Conn:
        conn: _Conn
        if self.kind == "grpc":
            call = self.channel.stream_stream(_METHOD, request_serializer=_identity, response_deserializer=_identity)()
            conn = _GrpcConn(call)
        else:
            reader, writer = await asyncio.open_connection("127.0.0.1", self.port)
            conn = _TcpConn(reader, writer)
        await conn.ping()
        self.conns.append(conn)
        return conn

    async def kill(self, actor: Any) -> None:
        await actor.close()
        self.conns.remove(actor)

    async def wait_idle(self, timeout_s: float = 60.0) -> None:
        return None

    def cold_start_child(self, started: float) -> None:
        raise NotImplementedError("the floors have no cluster to start")
