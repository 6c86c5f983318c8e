"""The bulk side channel: large payloads between processes that do not share /dev/shm.

gRPC moves a large payload at 0.5-1.1 GiB/s here (its receiver copies every message into a
Python ``bytes`` and wakes the event loop per message), under half of what one TCP socket does
(``bench/payload_floor.py``). So each Calls stream that cannot use shared memory gets one TCP
connection beside it, opened by the client and closed with the stream, and a payload whose
buffers would be streamed in chunks (``Payload.streamed``) travels on it instead as one frame:

    key (u64: the call's or reply's seq) | n (u32) | n sizes (u64 each) | the n buffers' bytes

The message on the stream still carries the pickle and the sizes, with ``Payload.bulk`` set;
the receiver unpickles once both are in, whichever came first. The sender writes the buffers'
own memory with ``sendall`` on the calling thread, under a lock per connection, so the bytes are
in the kernel when the call returns (the caller may change its array right after, as on the
other paths) and nothing is copied in Python. A reader thread per connection ``recv_into``s
fresh buffers and hands each frame to the event loop; it always drains, so a sender never
waits on the receiver's loop (no deadlock when both ends send large payloads at once), and
what is not yet claimed is buffered there. So that a client pipelining large calls to a slow
actor does not fill the actor's memory that way, a connection keeps at most
``client.bulk_links.BULK_UNANSWERED_MAX`` (1 GiB) of arguments unanswered on it; past that they stream in
chunks on the Calls stream, whose flow control holds them in the client until the host reads
them. A frame over the receiver's payload limit is read and dropped; the call fails with the
size error.

Opening: the host answers a stream's first batch with ``ReplyBatch.bulk_port`` and a fresh
random ``bulk_key`` (on the stream, so under its token check and TLS). The client connects to
that port, sends ``MAGIC`` and the key, and the host pairs the connection with the stream whose
key it is (each key works once) and answers ``OK``. A connection has ``HANDSHAKE_S`` from its
accept for all of that (its TLS handshake included), whatever pace its bytes come at; at most
``MAX_HANDSHAKES`` are under way, and one more cuts the one that has waited longest. A client
whose connection could not be opened asks for another offer with the reopen backoff. With TLS
configured the connection is TLS with the cluster's certificates, both ways as on gRPC.
``ACTORRT_BULK=0`` turns the channel off (payloads then stream in chunks on gRPC).

When a connection breaks, what waits on it fails (that call fails with ``ActorDiedError``, at
most once, as on a broken stream), payloads go in chunks on the stream meanwhile, and the client
asks for another (``CallBatch.bulk_reopen``; 0.5 s after the break, doubling to 30 s, at most
``StreamLinks.MAX_OFFERS`` per stream). Offers are numbered in the order the host makes them and
``Payload.bulk`` names the connection a frame went on, so a frame already sent on the old one is
still found there.
"""

from __future__ import annotations

import asyncio
import hmac
import itertools
import os
import secrets
import socket
import ssl
import struct
import sys
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from actorrt.transport.rpc import TLS

__all__ = ["MAGIC", "BulkError", "Link", "Server", "connect", "enabled"]

MAGIC = b"actorrt-bulk-1\n"
KEY_BYTES = 16
OK = b"K"
_FRAME = struct.Struct("!QI")  # key, number of buffers
MAX_BUFFERS = 1 << 16
_NUMPY_MIN = 1 << 20
# Each recv_into asks for at most this much (the kernel gives what it has).
_RECV = 16 << 20
# How long a connecting peer may take to say who it is: its whole handshake (TLS and hello),
# counted from the moment it was accepted.
HANDSHAKE_S = 10.0
# At most this many connections may be in their handshake at once; one more cuts the oldest
# (a real client says who it is within a round trip or two; a stranger's is the one waiting).
MAX_HANDSHAKES = 64
# How long the listener waits after a failed accept (no file descriptor left, say) to try again.
ACCEPT_RETRY_S = 0.05
# A sendall that makes no progress for this long breaks the connection (the peer is stuck).
SEND_STALL_S = 60.0

# What a frame's consumer gets: its buffers, None when it was over the limit (read and
# dropped), or the error that broke the connection before it came.
Arrival = list[Any] | None | BaseException
Consumer = Callable[[Arrival], None]


def _fresh(n: int) -> Any:
    """A writable buffer of ``n`` bytes for ``recv_into`` to fill: a numpy array when numpy is
    loaded (no zero-fill: with transparent huge pages a fresh 64 MiB is ready in a few ms,
    against ~27 ms for a ``bytearray``, which zeroes every page first), else a ``bytearray``.
    Reusing buffers between frames did not pay (bench/README.md, "The bulk side channel")."""
    np = sys.modules.get("numpy")
    if np is not None and n >= _NUMPY_MIN:
        return np.empty(n, np.uint8)
    return bytearray(n)


class BulkError(ConnectionError):
    """The bulk connection broke before a frame came."""


def enabled() -> bool:
    return os.environ.get("ACTORRT_BULK", "1") != "0"


class Link:
    """One connected bulk socket, both directions. ``send`` from any thread; ``expect`` and
    ``drop`` on the loop; ``close`` from anywhere."""

    def __init__(
        self,
        send_sock: socket.socket,
        recv_sock: socket.socket,
        loop: asyncio.AbstractEventLoop,
        limit: int,
        name: str,
        epoch: int = 1,
        on_end: Callable[[Link], None] | None = None,
    ) -> None:
        # One socket both ways, or (TLS: an SSL object is not safe to read and write from two
        # threads at once) one connection per direction.
        self.send_sock = send_sock
        self.recv_sock = recv_sock
        self.loop = loop
        self.limit = limit  # the largest frame kept, in bytes (0: no limit)
        self.epoch = epoch  # its number on its stream (``Payload.bulk``)
        self._on_end = on_end  # called on the loop once the connection is gone
        self.closed = False
        self.error: BulkError | None = None
        self.bytes_in = 0
        self.bytes_out = 0
        self._send_lock = threading.Lock()
        # key -> its frame, arrived before anyone claimed it; key -> who waits for it
        self._arrived: dict[int, Arrival] = {}
        self._consumers: dict[int, Consumer] = {}
        self._dropped: set[int] = set()
        self._ended = False  # the reader thread ended and what waited was failed (loop thread)
        self._reader = threading.Thread(target=self._read_loop, name=f"actorrt-bulk-{name}", daemon=True)
        self._reader.start()

    # ---- sending (any thread) -----------------------------------------------------------------

    def send(self, key: int, buffers: Sequence[memoryview]) -> bool:
        """Write one frame: True once its bytes are all in the kernel; False when the link is
        closed or breaks meanwhile, or the frame has more buffers than a peer reads (then
        nothing was delivered: send the payload another way)."""
        if len(buffers) > MAX_BUFFERS:
            return False
        head = _FRAME.pack(key, len(buffers)) + struct.pack(f"!{len(buffers)}Q", *(b.nbytes for b in buffers))
        with self._send_lock:
            if self.closed:
                return False
            try:
                _send_all(self.send_sock, head)
                for buffer in buffers:
                    _send_all(self.send_sock, buffer)
            except OSError as e:  # the peer is gone or stuck: the reader side fails what waits
                self._break(f"sending on the bulk connection failed: {e}")
                return False
        self.bytes_out += len(head) + sum(b.nbytes for b in buffers)
        return True

    # ---- receiving ----------------------------------------------------------------------------

    def expect(self, key: int, consumer: Consumer) -> None:
        """Call ``consumer`` with frame ``key`` once it is here (now if it is). Loop thread."""
        if key in self._arrived:
            consumer(self._arrived.pop(key))
        elif self._ended:  # the reader is gone: no frame comes any more
            consumer(self.error or BulkError("the bulk connection is closed"))
        else:
            self._consumers[key] = consumer

    async def take(self, key: int) -> list[Any] | None:
        """Frame ``key``'s buffers (None: over the limit, dropped). Raises BulkError."""
        fut: asyncio.Future[Arrival] = self.loop.create_future()

        def deliver(got: Arrival) -> None:
            if not fut.done():
                fut.set_result(got)

        self.expect(key, deliver)
        try:
            got = await fut
        except asyncio.CancelledError:  # nobody takes it now: let it go when it comes
            if self._consumers.get(key) is deliver:
                del self._consumers[key]
                self._dropped.add(key)
            raise
        if isinstance(got, BaseException):
            raise got
        return got

    def drop(self, key: int) -> None:
        """Nobody wants frame ``key``: let it go when it comes. Loop thread."""
        if self._arrived.pop(key, 0) == 0:
            self._dropped.add(key)

    def _arrive(self, key: int, buffers: Arrival) -> None:
        consumer = self._consumers.pop(key, None)
        if consumer is not None:
            consumer(buffers)
        elif key in self._dropped:
            self._dropped.discard(key)
        else:
            self._arrived[key] = buffers

    def _read_loop(self) -> None:
        reason = "the peer closed the bulk connection"
        try:
            while (head := self._read_exact(_FRAME.size)) is not None:
                key, count = _FRAME.unpack(head)
                if count > MAX_BUFFERS:
                    raise ValueError(f"a bulk frame of {count} buffers")
                sizes = struct.unpack(f"!{count}Q", self._read_exact(8 * count) or b"")
                total = sum(sizes)
                buffers: list[Any] | None
                if self.limit and total > self.limit:
                    self._skip(total)
                    buffers = None
                else:
                    try:
                        buffers = [_fresh(n) for n in sizes]
                    except MemoryError:  # this frame is lost, the connection is not
                        self._skip(total)
                        self.bytes_in += 8 * count + _FRAME.size + total
                        lost = BulkError(f"no memory for a bulk payload of {total} bytes")
                        self.loop.call_soon_threadsafe(self._arrive, key, lost)
                        continue
                    self._read_all(buffers)
                self.bytes_in += 8 * count + _FRAME.size + total
                self.loop.call_soon_threadsafe(self._arrive, key, buffers)
                del buffers  # this thread keeps no frame while it waits for the next one
        except (OSError, ValueError, struct.error) as e:
            reason = f"the bulk connection broke: {e}"
        except RuntimeError:  # the loop is closed: the process is going
            reason = ""
        except Exception as e:  # noqa: BLE001 - whatever ends the reader must fail what waits for it
            reason = f"the bulk connection's reader failed: {e!r}"
        finally:
            self._release()
        if reason:
            try:
                self.loop.call_soon_threadsafe(self._fail_waiting, reason)
            except RuntimeError:
                pass

    def _read_all(self, buffers: list[Any]) -> None:
        """Fill ``buffers`` in turn (a method: no loop variable of the reader keeps the last one)."""
        for buffer in buffers:
            self._read_into(buffer)

    def _read_exact(self, n: int) -> bytes | None:
        """``n`` bytes; None at a clean end before the first; raises at an end inside them."""
        buffer = bytearray(n)
        got = self._read_into(buffer, eof_ok=True)
        return None if got == 0 else bytes(buffer)

    def _read_into(self, buffer: Any, eof_ok: bool = False) -> int:
        view = memoryview(buffer)
        pos = 0
        while pos < len(buffer):
            try:
                n = self.recv_sock.recv_into(view[pos:], min(_RECV, len(buffer) - pos))
            except TimeoutError:  # idle: the socket's timeout is for stuck sends
                continue
            if n == 0:
                if eof_ok and pos == 0:
                    return 0
                raise ConnectionError("the peer closed the bulk connection inside a frame")
            pos += n
        return pos

    def _skip(self, n: int) -> None:
        scratch = bytearray(min(n, _RECV))
        while n:
            take = min(n, len(scratch))
            self._read_into(scratch if take == len(scratch) else bytearray(take))
            n -= take

    def _fail_waiting(self, reason: str) -> None:
        """The connection is gone: fail every frame waited for, and every later ``expect``."""
        self.error = self.error or BulkError(reason)
        self._ended = True  # frames that came whole before the end stay, for their calls to claim
        consumers, self._consumers = self._consumers, {}
        for consumer in consumers.values():
            consumer(self.error)
        if self._on_end is not None:
            self._on_end(self)

    def _break(self, reason: str) -> None:
        self.error = self.error or BulkError(reason)
        self.close()

    def close(self) -> None:
        """Shut the connection down: the reader thread wakes and ends, a send in flight fails,
        later ones are refused. Any thread, idempotent. The file descriptors are closed by the
        reader thread as it ends (``_release``), never under a thread still using them: a
        number closed while a recv or send is on its way in another thread can be given to a
        new socket (gRPC's, say) before that call reaches the kernel."""
        if self.closed:
            return
        self.closed = True
        for sock in {self.send_sock, self.recv_sock}:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def _release(self) -> None:
        """Close the sockets once no thread can be using them: the reader's last act, after
        any send in flight (a send on a shut-down socket fails at once)."""
        self.close()
        with self._send_lock:
            for sock in {self.send_sock, self.recv_sock}:
                sock.close()


class StreamLinks:
    """The host's side of one stream's bulk connections: its offers, numbered from 1, and the
    connections that took them. A later offer answers the client's ``bulk_reopen`` after its
    connection broke; the old ones stay until the stream ends, for frames already on them."""

    MAX_OFFERS = 16  # per stream: a connection that keeps breaking is not worth more

    def __init__(self, server: Server, loop: asyncio.AbstractEventLoop, limit: int, name: str) -> None:
        self.server = server
        self.loop = loop
        self.limit = limit
        self.name = name
        self.epoch = 0  # the latest offer's number
        self._ready: dict[int, asyncio.Future[Link]] = {}
        self._keys: list[bytes] = []

    def offer(self) -> tuple[int, bytes] | None:
        """A new offer: ``(port, key)``; None once the stream has had ``MAX_OFFERS``."""
        if self.epoch >= self.MAX_OFFERS:
            return None
        self.epoch += 1
        epoch = self.epoch
        ready: asyncio.Future[Link] = self.loop.create_future()

        def on_link(recv_sock: socket.socket, send_sock: socket.socket) -> None:
            link = Link(send_sock, recv_sock, self.loop, self.limit, self.name, epoch)
            if ready.done():  # the stream ended meanwhile
                link.close()
            else:
                ready.set_result(link)

        key = self.server.offer(on_link)
        self._keys.append(key)
        self._ready[epoch] = ready
        return self.server.port, key

    @property
    def current(self) -> Link | None:
        """The latest connection, when it is open and whole."""
        ready = self._ready.get(self.epoch)
        if ready is None or not ready.done() or ready.cancelled():
            return None
        link = ready.result()
        return None if link.closed else link

    async def take(self, epoch: int, key: int) -> list[Any] | None:
        """Frame ``key`` from connection ``epoch`` (None: over the limit, read and dropped).
        Raises BulkError when that connection never opened or broke before the frame came."""
        ready = self._ready.get(epoch)
        if ready is None:
            raise BulkError(f"no bulk connection number {epoch} was offered on this stream")
        try:
            async with asyncio.timeout(HANDSHAKE_S):
                link = await asyncio.shield(ready)
        except TimeoutError:
            raise BulkError(f"bulk connection number {epoch} never opened") from None
        except asyncio.CancelledError:
            if not ready.cancelled():  # the caller is cancelled, not the offer: pass it on
                raise
            raise BulkError(f"the stream ended before bulk connection number {epoch} opened") from None
        return await link.take(key)

    def drop(self, epoch: int, key: int) -> None:
        """Nobody will take frame ``key`` of connection ``epoch``: let it go (when it comes, on
        the connection once it is open)."""
        ready = self._ready.get(epoch)
        if ready is None:
            return
        if ready.done():
            if not ready.cancelled():
                ready.result().drop(key)
        else:
            ready.add_done_callback(lambda f: None if f.cancelled() else f.result().drop(key))

    def close(self) -> None:
        for key in self._keys:
            self.server.withdraw(key)
        for ready in self._ready.values():
            if ready.done() and not ready.cancelled():
                ready.result().close()
            else:
                ready.cancel()


def _send_all(sock: socket.socket, data: Any) -> None:
    """``sock.sendall(data)``, with the socket's timeout bounding a stall rather than the whole
    transfer (a plain socket's ``sendall`` gives up once the timeout has passed since it began,
    even while bytes still flow: a 1 GiB reply over a shared 1 GbE link takes longer)."""
    view = memoryview(data).cast("B")
    while view:
        view = view[sock.send(view) :]


def _tune(sock: socket.socket) -> None:
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    # Keepalive: a NAT or firewall that forgets idle connections (weights every few minutes)
    # keeps this one, and a peer machine gone without a word is noticed within ~2 minutes.
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
    for name, value in (("TCP_KEEPIDLE", 60), ("TCP_KEEPINTVL", 10), ("TCP_KEEPCNT", 6)):
        if hasattr(socket, name):  # Linux; macOS has TCP_KEEPALIVE instead of KEEPIDLE
            sock.setsockopt(socket.IPPROTO_TCP, getattr(socket, name), value)
    sock.settimeout(SEND_STALL_S)


# The role a connection plays, its first byte after the key: both directions on one socket
# (plaintext), or one direction each (TLS).
BOTH, UP, DOWN = b"B", b"U", b"D"  # UP: client to host


class Server:
    """A host's bulk listener, beside its gRPC port. ``offer`` a key per stream; the
    connection(s) that present it are handed to that stream (``on_link(recv_sock, send_sock)``,
    on the loop: the host's view, the same socket twice without TLS)."""

    def __init__(self, bind: str, loop: asyncio.AbstractEventLoop, tls: TLS | None) -> None:
        family = socket.AF_INET6 if ":" in bind else socket.AF_INET
        self.sock = socket.create_server((bind, 0), family=family, backlog=64)
        self.closed = False
        self.port: int = self.sock.getsockname()[1]
        self.loop = loop
        self._ssl: ssl.SSLContext | None = None
        if tls is not None and tls.cert and tls.key:
            ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
            ctx.load_cert_chain(tls.cert, tls.key)
            if tls.ca:
                ctx.load_verify_locations(tls.ca)
                ctx.verify_mode = ssl.CERT_REQUIRED
            self._ssl = ctx
        self._roles = (UP, DOWN) if self._ssl is not None else (BOTH,)
        # key -> (who gets the connections, those come so far by role)
        self._offers: dict[
            bytes, tuple[Callable[[socket.socket, socket.socket], None], dict[bytes, socket.socket]]
        ] = {}
        self._lock = threading.Lock()
        # The handshakes under way, oldest first (their sockets, to cut one when a newer comes),
        # and the threads running handshakes, cut ones included (at most twice the bound).
        self._hellos: OrderedDict[int, socket.socket] = OrderedDict()
        self._hello_threads = 0
        self._hello_ids = itertools.count()
        threading.Thread(target=self._accept_loop, name="actorrt-bulk-accept", daemon=True).start()

    def offer(self, on_link: Callable[[socket.socket, socket.socket], None]) -> bytes:
        """A fresh key; the connections that present it go to ``on_link`` (loop thread)."""
        key = secrets.token_bytes(KEY_BYTES)
        with self._lock:
            self._offers[key] = (on_link, {})
        return key

    def withdraw(self, key: bytes) -> None:
        with self._lock:
            offer = self._offers.pop(key, None)
        for sock in offer[1].values() if offer else ():
            sock.close()

    def _accept_loop(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                if self.closed:
                    self.sock.close()
                    return
                # a connection that failed before it was accepted, or no file descriptor left:
                # the listener stays (one error must not turn the channel off for the host's life)
                time.sleep(ACCEPT_RETRY_S)
                continue
            deadline = time.monotonic() + HANDSHAKE_S
            with self._lock:
                if self._hello_threads >= 2 * MAX_HANDSHAKES:  # cut ones that have not ended yet
                    conn.close()
                    continue
                if len(self._hellos) >= MAX_HANDSHAKES:
                    _cut(self._hellos.popitem(last=False)[1])
                hello_id = next(self._hello_ids)
                self._hellos[hello_id] = conn
                self._hello_threads += 1
            threading.Thread(
                target=self._handshake, args=(conn, hello_id, deadline), name="actorrt-bulk-hello", daemon=True
            ).start()

    def _handshake(self, conn: socket.socket, hello_id: int, deadline: float) -> None:
        """One accepted connection's handshake, on a thread of its own, all of it by ``deadline``
        (``time.monotonic``); a connection that does not complete one is closed. Raises nothing."""
        socks: dict[bytes, socket.socket] = {}
        complete = False
        try:
            if self._ssl is not None:
                conn.settimeout(_left(deadline))  # bounds the TLS handshake as a whole (one call)
                conn = self._ssl.wrap_socket(conn, server_side=True)
                with self._lock:
                    if hello_id in self._hellos:  # cut it, not the plain socket it replaced
                        self._hellos[hello_id] = conn
            hello = _recv_exact(conn, len(MAGIC) + KEY_BYTES + 1, deadline)
            if hello is None or not hmac.compare_digest(hello[: len(MAGIC)], MAGIC):
                conn.close()
                return
            key, role = hello[len(MAGIC) : -1], hello[-1:]
            with self._lock:
                offer = self._offers.get(key)
                cut = self._hellos.pop(hello_id, None) is None  # cut for a newer one: it is shut down
                if cut or offer is None or role not in self._roles or role in offer[1]:
                    conn.close()
                    return
                on_link, socks = offer
                socks[role] = conn
                complete = len(socks) == len(self._roles)
                if complete:
                    del self._offers[key]
            _tune(conn)
            # The answer first: once the link is the stream's, its reader thread reads this
            # socket (an SSL object must not be read and written from two threads at once).
            # A call that names the link before the loop has it waits for it (``on_link``).
            conn.sendall(OK)
            if complete:
                recv_sock, send_sock = (conn, conn) if role == BOTH else (socks[UP], socks[DOWN])
                self.loop.call_soon_threadsafe(on_link, recv_sock, send_sock)
        except (OSError, RuntimeError):  # ssl.SSLError and TimeoutError are OSErrors
            conn.close()
            if complete:  # the offer is spent: nobody else will close its connections
                for sock in socks.values():
                    sock.close()
        finally:
            with self._lock:
                self._hellos.pop(hello_id, None)
                self._hello_threads -= 1

    def close(self) -> None:
        """Stop listening: the accept thread wakes (a plain ``close`` does not wake a thread in
        ``accept`` on Linux, which then lived on) and closes the socket as it ends. Where a
        listening socket cannot be shut down (macOS, BSD), it is closed here."""
        self.closed = True
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            self.sock.close()


def _left(deadline: float) -> float:
    """Seconds left until ``deadline`` (``time.monotonic``). Raises TimeoutError once it passed."""
    left = deadline - time.monotonic()
    if left <= 0:
        raise TimeoutError("the bulk handshake took too long")
    return left


def _cut(sock: socket.socket) -> None:
    """Wake the thread reading ``sock`` (it closes it): a handshake cut for a newer one. The
    plain socket's shutdown, never an SSL socket's own (which drops its SSL object under the
    reading thread); a socket already handed to an SSL one has no descriptor any more (its
    handshake then ends by its deadline)."""
    try:
        socket.socket.shutdown(sock, socket.SHUT_RDWR)
    except OSError:
        pass


def _recv_exact(sock: socket.socket, n: int, deadline: float | None = None) -> bytes | None:
    """``n`` bytes from ``sock``; None at an end before them. With ``deadline``, all of them by
    then (raises TimeoutError); else each read waits the socket's own timeout."""
    data = b""
    while len(data) < n:
        if deadline is not None:
            sock.settimeout(_left(deadline))
        got = sock.recv(n - len(data))
        if not got:
            return None
        data += got
    return data


def connect(
    endpoint: str, port: int, key: bytes, tls: TLS | None, timeout_s: float = HANDSHAKE_S
) -> tuple[socket.socket, socket.socket]:
    """Open the bulk connection(s) to the host at ``endpoint`` (its gRPC address; the bulk
    ``port`` is beside it) and present ``key``: ``(send_sock, recv_sock)``, one socket twice
    without TLS. Blocking: run it off the loop. Raises OSError."""
    if tls is None:
        sock = _connect_one(endpoint, port, key + BOTH, None, timeout_s)
        return sock, sock
    up = _connect_one(endpoint, port, key + UP, tls, timeout_s)
    try:
        return up, _connect_one(endpoint, port, key + DOWN, tls, timeout_s)
    except BaseException:
        up.close()
        raise


def _connect_one(endpoint: str, port: int, hello: bytes, tls: TLS | None, timeout_s: float) -> socket.socket:
    host = endpoint.rsplit(":", 1)[0].strip("[]")
    sock = socket.create_connection((host, port), timeout=timeout_s)
    try:
        if tls is not None:
            ctx = ssl.create_default_context(cafile=tls.ca)
            if tls.cert and tls.key:
                ctx.load_cert_chain(tls.cert, tls.key)
            sock = ctx.wrap_socket(sock, server_hostname=host)
        sock.sendall(MAGIC + hello)
        if _recv_exact(sock, len(OK)) != OK:
            raise ConnectionError(f"the host at {host}:{port} refused the bulk connection")
        _tune(sock)
        return sock
    except BaseException:
        sock.close()
        raise
