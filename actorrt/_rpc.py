"""The gRPC boundary: channel and server options, the token check, status-code mapping.

Everything that turns a ``grpc.RpcError`` into an actorrt error lives here.
"""

from __future__ import annotations

import hmac
import logging
import os
import secrets
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Awaitable, Callable

import grpc

from actorrt._errors import (
    ActorRTError,
    AuthenticationError,
    ClusterConnectionError,
    MasterUnreachableError,
    ProtocolVersionError,
)

__all__ = [
    "PROTOCOL_VERSION",
    "TokenInterceptor",
    "auth_metadata",
    "channel_options",
    "server_options",
    "state_dir",
    "token_path",
    "load_token",
    "write_token",
    "new_token",
    "translate",
    "version_mismatch",
    "TLS",
    "open_channel",
    "listen",
]

log = logging.getLogger("actorrt")

# 2: large payloads between hosts stream in chunks (Payload.streamed, CallBatch/ReplyBatch.chunk).
PROTOCOL_VERSION = 2
AUTH_KEY = "authorization"
VERSION_MISMATCH = "protocol version mismatch"

# Large payloads are sent as single messages; -1 lifts gRPC's 4 MiB default on both ends.
_COMMON_OPTIONS: list[tuple[str, Any]] = [
    ("grpc.max_send_message_length", -1),
    ("grpc.max_receive_message_length", -1),
    ("grpc.keepalive_permit_without_calls", 1),
    ("grpc.http2.max_pings_without_data", 0),
]


def channel_options(keepalive_s: float = 5.0) -> list[tuple[str, Any]]:
    """Client-side options: keepalive pings find a dead peer within ~2x ``keepalive_s``."""
    ms = int(keepalive_s * 1000)
    return [
        *_COMMON_OPTIONS,
        ("grpc.keepalive_time_ms", ms),
        ("grpc.keepalive_timeout_ms", ms),
        ("grpc.enable_retries", 0),
    ]


def server_options(keepalive_s: float = 5.0) -> list[tuple[str, Any]]:
    ms = int(keepalive_s * 1000)
    return [
        *_COMMON_OPTIONS,
        # Without this gRPC binds a busy port silently (SO_REUSEPORT) and two masters share it.
        ("grpc.so_reuseport", 0),
        ("grpc.keepalive_time_ms", ms),
        ("grpc.keepalive_timeout_ms", ms),
        ("grpc.http2.min_ping_interval_without_data_ms", max(1000, ms // 2)),
    ]


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
        if not self.cert:
            raise ValueError("TLS: a server needs a certificate and key")
        ca = self._read("ca")
        return grpc.ssl_server_credentials(
            [(self._read("key"), self._read("cert"))], root_certificates=ca, require_client_auth=ca is not None
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


def state_dir(*parts: str, create: bool = False) -> Path:
    """Where the CLI keeps the token, PIDs and logs: ``$ACTORRT_HOME`` or ``~/.actorrt``.

    ``parts`` name a folder under it; ``create=True`` makes it with :func:`private_dir`.
    """
    path = Path(os.environ.get("ACTORRT_HOME") or Path.home() / ".actorrt").joinpath(*parts)
    return private_dir(path) if create else path


def private_dir(path: Path) -> Path:
    """Make ``path`` and each missing folder above it with mode 0700; return ``path``.

    ``Path.mkdir(parents=True, mode=0o700)`` gives that mode to the leaf alone: the state dir
    above it would get the umask's 0755 and let every local user list it.
    """
    missing = [p for p in [path, *path.parents] if not p.exists()]
    for folder in reversed(missing):
        try:
            folder.mkdir(mode=0o700)
        except FileExistsError:  # made by a concurrent start
            continue
        os.chmod(folder, stat.S_IRWXU)  # whatever the umask
    return path


def token_path() -> Path:
    return state_dir() / "token"


def new_token() -> str:
    """A random token that never starts with '-' (a command line would read it as an option)."""
    while (token := secrets.token_urlsafe(32)).startswith("-"):
        pass
    return token


def write_token(token: str, path: Path | None = None) -> Path:
    """Write the token to a file readable by its owner only (0600)."""
    path = path or token_path()
    private_dir(path.parent)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(token + "\n")
    os.chmod(path, stat.S_IRUSR | stat.S_IWUSR)
    return path


def load_token(explicit: str | None = None) -> str | None:
    """The token from the argument, ``ACTORRT_TOKEN``, or the file ``actorrt start`` wrote."""
    if explicit:
        return explicit
    env = os.environ.get("ACTORRT_TOKEN")
    if env:
        return env
    path = token_path()
    try:
        return path.read_text().strip() or None
    except FileNotFoundError:
        return None


def auth_metadata(token: str | None) -> tuple[tuple[str, str], ...]:
    return ((AUTH_KEY, f"Bearer {token}"),) if token else ()


class TokenInterceptor(grpc.aio.ServerInterceptor):
    """Refuses every RPC whose token is missing or wrong with UNAUTHENTICATED.

    The refusal happens before the handler reads a single message, so nothing is unpickled.
    Runs on the server's event loop.
    """

    def __init__(self, token: str) -> None:
        self._expected = f"Bearer {token}".encode()

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler]],
        details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler:
        presented = b""
        for key, value in details.invocation_metadata or ():
            if key == AUTH_KEY:
                presented = value.encode() if isinstance(value, str) else value
                break
        handler = await continuation(details)
        if hmac.compare_digest(presented, self._expected):
            return handler
        reason = "missing token" if not presented else "wrong token"
        log.warning("refused %s: %s", details.method, reason)
        return _refusal(handler, f"actorrt: {reason} (pass token=, ACTORRT_TOKEN or the token file)")


def _refusal(handler: grpc.RpcMethodHandler | None, message: str) -> grpc.RpcMethodHandler:
    async def deny(_request: Any, context: grpc.aio.ServicerContext) -> None:
        await context.abort(grpc.StatusCode.UNAUTHENTICATED, message)

    if handler is None or handler.unary_unary:
        return grpc.unary_unary_rpc_method_handler(deny)
    if handler.unary_stream:
        return grpc.unary_stream_rpc_method_handler(deny)
    if handler.stream_unary:
        return grpc.stream_unary_rpc_method_handler(deny)
    return grpc.stream_stream_rpc_method_handler(deny)


# ---- status mapping ---------------------------------------------------------------------------


def version_mismatch(theirs: int) -> str:
    return (
        f"{VERSION_MISMATCH}: peer speaks actorrt protocol v{theirs}, "
        f"this side speaks v{PROTOCOL_VERSION}"
    )


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
