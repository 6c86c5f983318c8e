"""The gRPC boundary: channel and server options, TLS, the token check, status-code mapping.

Everything that turns a ``grpc.RpcError`` into an actorrt error lives here.
"""

from __future__ import annotations

import hmac
import logging
import os
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import grpc

from actorrt.common.errors import (
    ActorRTError,
    AuthenticationError,
    ClusterConnectionError,
    MasterUnreachableError,
    ProtocolVersionError,
)
from actorrt.common.text import printable

__all__ = [
    "PROTOCOL_VERSION",
    "TLS",
    "TokenInterceptor",
    "auth_metadata",
    "channel_options",
    "listen",
    "open_channel",
    "server_options",
    "translate",
    "version_mismatch",
]

log = logging.getLogger("actorrt")

# 2: large payloads between hosts stream in chunks (Payload.streamed, CallBatch/ReplyBatch.chunk).
# 3: actor hosts read bounded messages; a larger CallBatch is split (CallBatch.split_bytes).
# 5: a restart's ConstructActor says so (restarts); StartActor and LiveActor carry the actor's
#    name, lifetime, restart limit and count and shape (a restarted master rebuilds them).
PROTOCOL_VERSION = 5
# Workers and clients that lost the master try again after 0.1 s, doubling up to this.
RECONNECT_BACKOFF_MAX_S = 2.0
# What an actor host prints on stdout, with its port, once it serves (its daemon reads it).
HOST_READY_PREFIX = "ACTORRT-HOST-READY"
AUTH_KEY = "authorization"
VERSION_MISMATCH = "protocol version mismatch"

# What one message a server takes, at most. gRPC refuses a larger one from its length prefix,
# before it is buffered (RESOURCE_EXHAUSTED), so an unauthenticated peer costs at most this much
# per stream. The master's sessions and unary calls carry only small control messages (actor
# output is flushed in pieces far below this, log tails are capped at MAX_LOG_TAIL_BYTES); an
# actor host takes one chunk of a streamed payload (``_wire.CHUNK_BYTES``) plus headroom: every
# larger message is split into chunks by its sender (``_wire.split``).
MASTER_MAX_RECEIVE = 4 << 20
HOST_MAX_RECEIVE = (4 << 20) + (256 << 10)
MAX_LOG_TAIL_BYTES = 3 << 20

# Clients lift gRPC's 4 MiB receive default: they only talk to servers that hold the token.
_COMMON_OPTIONS: list[tuple[str, Any]] = [
    ("grpc.max_send_message_length", -1),
    ("grpc.keepalive_permit_without_calls", 1),
    ("grpc.http2.max_pings_without_data", 0),
]


def channel_options(keepalive_s: float = 5.0) -> list[tuple[str, Any]]:
    """Client-side options: keepalive pings find a dead peer within ~2x ``keepalive_s``."""
    ms = int(keepalive_s * 1000)
    return [
        *_COMMON_OPTIONS,
        ("grpc.max_receive_message_length", -1),
        ("grpc.keepalive_time_ms", ms),
        ("grpc.keepalive_timeout_ms", ms),
        ("grpc.enable_retries", 0),
        # gRPC's own backoff between connection attempts grows to 120 s: a worker or client
        # would find a master back after a long outage only that much later (and a new master
        # reports the actors no worker brought back within RECONNECT_BACKOFF_MAX_S as gone).
        # (Its "min" backoff is also its connect timeout, 20 s: left as it is.)
        ("grpc.max_reconnect_backoff_ms", int(RECONNECT_BACKOFF_MAX_S * 1000)),
    ]


def server_options(max_receive: int, keepalive_s: float = 5.0) -> list[tuple[str, Any]]:
    """Server-side options; ``max_receive``: the largest message this server reads, in bytes
    (``MASTER_MAX_RECEIVE`` or ``HOST_MAX_RECEIVE``)."""
    ms = int(keepalive_s * 1000)
    return [
        *_COMMON_OPTIONS,
        ("grpc.max_receive_message_length", max_receive),
        # Without this gRPC binds a busy port silently (SO_REUSEPORT) and two masters share it.
        ("grpc.so_reuseport", 0),
        ("grpc.keepalive_time_ms", ms),
        ("grpc.keepalive_timeout_ms", ms),
        ("grpc.http2.min_ping_interval_without_data_ms", max(1000, ms // 2)),
    ]


_Req = TypeVar("_Req")
_Resp = TypeVar("_Resp")

# ---- TLS ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TLS:
    """PEM file paths. Servers present ``cert``/``key``; clients verify servers with ``ca``.

    On a server, ``ca`` turns on mutual TLS: every client must present a certificate signed by
    it. On a client, ``cert``/``key`` are the certificate it presents for mutual TLS.
    """

    ca: str | None = None
    cert: str | None = None
    key: str | None = None

    def __post_init__(self) -> None:
        if (self.cert is None) != (self.key is None):
            raise ValueError("TLS: give both a certificate and its key, or neither")
        for name in ("ca", "cert", "key"):
            path = getattr(self, name)
            if path is not None and not Path(path).is_file():
                raise FileNotFoundError(f"TLS {name} file not found: {path}")

    @classmethod
    def from_env(cls, ca: str | None = None, cert: str | None = None, key: str | None = None) -> TLS | None:
        """Arguments first, then ``ACTORRT_TLS_CA/CERT/KEY``; None when nothing is set."""
        ca = ca or os.environ.get("ACTORRT_TLS_CA")
        cert = cert or os.environ.get("ACTORRT_TLS_CERT")
        key = key or os.environ.get("ACTORRT_TLS_KEY")
        return cls(ca, cert, key) if (ca or cert or key) else None

    def env(self) -> dict[str, str]:
        """The environment that hands this configuration to a child process."""
        pairs = {"ACTORRT_TLS_CA": self.ca, "ACTORRT_TLS_CERT": self.cert, "ACTORRT_TLS_KEY": self.key}
        return {k: os.path.abspath(v) for k, v in pairs.items() if v}

    def _read(self, name: str) -> bytes | None:
        path = getattr(self, name)
        return Path(path).read_bytes() if path else None

    def server_credentials(self) -> grpc.ServerCredentials:
        if not self.cert or not self.key:  # __post_init__ has both or neither
            raise ValueError("TLS: a server needs a certificate and key")
        ca = self._read("ca")
        return grpc.ssl_server_credentials(
            [(Path(self.key).read_bytes(), Path(self.cert).read_bytes())],
            root_certificates=ca,
            require_client_auth=ca is not None,
        )

    def channel_credentials(self) -> grpc.ChannelCredentials:
        return grpc.ssl_channel_credentials(
            root_certificates=self._read("ca"), private_key=self._read("key"), certificate_chain=self._read("cert")
        )


def open_channel(address: str, tls: TLS | None = None) -> grpc.aio.Channel:
    """A client channel to ``address``: TLS when configured, else plaintext."""
    if tls is None:
        return grpc.aio.insecure_channel(address, options=channel_options())
    return grpc.aio.secure_channel(address, tls.channel_credentials(), options=channel_options())


def listen(server: grpc.aio.Server, address: str, tls: TLS | None = None) -> int:
    """Bind ``server`` to ``address``; the port bound. Raises OSError when it cannot."""
    try:
        port = server.add_secure_port(address, tls.server_credentials()) if tls else server.add_insecure_port(address)
    except RuntimeError as e:
        raise OSError(f"cannot listen on {address}: the address is in use or not available") from e
    if port == 0:
        raise OSError(f"cannot listen on {address}: the address is in use or not available")
    return port


# ---- tokens ---------------------------------------------------------------------------------


def auth_metadata(token: str | None) -> tuple[tuple[str, str], ...]:
    return ((AUTH_KEY, f"Bearer {token}"),) if token else ()


class TokenInterceptor(grpc.aio.ServerInterceptor):
    """Refuses every RPC whose token is missing or wrong with UNAUTHENTICATED.

    The refusal reads no message of the RPC, unary ones included (it is served as a stream that
    ends at once), so nothing is buffered or unpickled for a peer without the token. Refusals
    are logged at most ``REFUSALS_LOGGED_PER_MIN`` a minute, the rest counted in the next line
    logged; the method path (chosen by the peer) is escaped and cut short. Runs on the server's
    event loop.
    """

    def __init__(self, token: str, clock: Callable[[], float] = time.monotonic) -> None:
        self._expected = f"Bearer {token}".encode()
        self._log = RateLimitedLog(REFUSALS_LOGGED_PER_MIN, 60.0, clock)

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler[_Req, _Resp] | None]],
        details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler[_Req, _Resp] | None:
        presented = b""
        for key, value in details.invocation_metadata or ():
            if key == AUTH_KEY:
                presented = value.encode() if isinstance(value, str) else value
                break
        if hmac.compare_digest(presented, self._expected):
            return await continuation(details)
        reason = "missing token" if not presented else "wrong token"
        self._log.warning("refused %s: %s", printable(details.method, _SHOWN_CHARS), reason)
        return _refusal(f"actorrt: {reason} (pass token=, ACTORRT_TOKEN or the token file)")


def _refusal(message: str) -> grpc.RpcMethodHandler[Any, Any]:
    """A handler that ends the RPC with UNAUTHENTICATED without reading a single message.

    A stream-stream handler whatever the method's kind: on the wire a unary call is a stream of
    one message, and a streaming handler is the only kind gRPC calls before a request is read.
    """

    async def deny(_requests: Any, context: grpc.aio.ServicerContext[Any, Any]) -> None:
        await context.abort(grpc.StatusCode.UNAUTHENTICATED, message)

    return grpc.stream_stream_rpc_method_handler(deny)


REFUSALS_LOGGED_PER_MIN = 10
_SHOWN_CHARS = 200


class RateLimitedLog:
    """Logs at most ``burst`` warnings per ``period_s``; the next line logged says how many were
    suppressed meanwhile. ``clock`` is injectable for tests. One event loop only."""

    def __init__(self, burst: int, period_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.burst = burst
        self.period_s = period_s
        self._clock = clock
        self._window_start = -float("inf")
        self._in_window = 0
        self.suppressed = 0

    def warning(self, msg: str, *args: Any) -> bool:
        """Log ``msg % args`` unless over the rate; True when it was logged."""
        now = self._clock()
        if now - self._window_start >= self.period_s:
            self._window_start, self._in_window = now, 0
        if self._in_window >= self.burst:
            self.suppressed += 1
            return False
        self._in_window += 1
        if self.suppressed:
            msg += f" ({self.suppressed} similar lines suppressed before this one)"
            self.suppressed = 0
        log.warning(msg, *args)
        return True


# ---- status mapping ---------------------------------------------------------------------------


def version_mismatch(theirs: int) -> str:
    return f"{VERSION_MISMATCH}: peer speaks actorrt protocol v{theirs}, this side speaks v{PROTOCOL_VERSION}"


def translate(e: grpc.RpcError, operation: str, address: str) -> ActorRTError:
    """Map a gRPC failure of ``operation`` against ``address`` to the error contract."""
    code = e.code() if hasattr(e, "code") else None
    details = (e.details() if hasattr(e, "details") else None) or str(e)
    if code == grpc.StatusCode.UNAUTHENTICATED:
        return AuthenticationError(f"{operation}: {address} refused this client: {details}")
    if code == grpc.StatusCode.FAILED_PRECONDITION and VERSION_MISMATCH in details:
        return ProtocolVersionError(f"{operation}: {details}")
    if code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
        return MasterUnreachableError(f"{operation}: no actorrt master answers at {address} ({details})")
    return ClusterConnectionError(f"{operation} failed against {address}: {code}: {details}")
