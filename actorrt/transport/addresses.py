"""Addresses: ``HOST:PORT`` as gRPC reads it, checked where users give one, and which of this
machine's addresses a peer reaches.

Plain functions asked of the kernel (ioctls, a connected UDP socket); nothing is ever sent.
Used by the CLI (what address to advertise), the master and the daemons (endpoints they hand out),
and every entry point that takes a master's address (``check_address``: the CLI's ``--address``,
``actorrt.connect``, ``parl.connect``, ``ACTORRT_ADDRESS``) before anything is dialled.
"""

from __future__ import annotations

import fcntl
import ipaddress
import re
import socket
import struct

__all__ = [
    "LOOPBACK_HOSTS",
    "PORT_MAX",
    "WILDCARD_HOSTS",
    "check_address",
    "check_port",
    "host_port",
    "interface_addresses",
    "route_source",
]

PORT_MAX = 65535
# A host name or an IPv4 address: letters, digits, dots, dashes, underscores (a DNS name is at
# most 253 characters, and may end with the root's dot). IPv6 addresses come in brackets.
_HOST_NAME = re.compile(r"[A-Za-z0-9_](?:[A-Za-z0-9._-]{0,251}[A-Za-z0-9_])?\.?")
_PORT = re.compile(r"[0-9]{1,5}")
_SHOWN = 100  # characters of a refused address an error repeats


def check_port(text: str, *, listen: bool = False) -> int:
    """A port as given on a command line, checked: 1..65535, or 0..65535 for one to ``listen``
    on (0: any free port). Raises ValueError saying the range."""
    least = 0 if listen else 1
    if not _PORT.fullmatch(text) or not least <= int(text) <= PORT_MAX:
        raise ValueError(f"must be {least}..{PORT_MAX}, got {text[:_SHOWN]!r}")
    return int(text)


def check_address(address: object, what: str) -> str:
    """``address`` if it is ``HOST:PORT`` as a user may give a master's: a host name, IPv4
    address or bracketed IPv6 address (``[::1]:8010``), and a port of 1..65535 in plain
    digits. gRPC would read more (a port past 65535 modulo 65536, spaces, ``dns:///`` targets),
    and dial another address than the one meant, with the cluster token. Raises ValueError
    naming ``what`` (``connect: address``, ``ACTORRT_ADDRESS``, ...; "" for an argparse type)
    and the address, cut."""
    if isinstance(address, str):
        host, sep, port = address.rpartition(":")
        if sep and _PORT.fullmatch(port) and 1 <= int(port) <= PORT_MAX and _valid_host(host):
            return address
    shown = repr(address[:_SHOWN] if isinstance(address, str) else address)[: _SHOWN + 2]
    form = f"HOST:PORT with a port in 1..{PORT_MAX} (an IPv6 host in brackets: [::1]:8010), got {shown}"
    raise ValueError(f"{what} must be {form}" if what else form)


def _valid_host(host: str) -> bool:
    if host.startswith("[") and host.endswith("]"):
        try:
            ipaddress.IPv6Address(host[1:-1])
        except ValueError:
            return False
        return True
    return _HOST_NAME.fullmatch(host) is not None


def host_port(host: str, port: int | str) -> str:
    """``HOST:PORT`` as gRPC reads it: an IPv6 address in brackets (``[::1]:8010``)."""
    return f"[{host}]:{port}" if ":" in host and not host.startswith("[") else f"{host}:{port}"


LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")
WILDCARD_HOSTS = ("0.0.0.0", "::", "")


def interface_addresses() -> list[tuple[str, str]]:
    """(interface, IPv4 address) of this machine's interfaces that are up and not loopback,
    asked of the kernel (Linux ioctls; nothing is sent anywhere)."""
    found = []
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        for _, name in socket.if_nameindex():
            request = struct.pack("256s", name.encode()[:15])
            try:
                flags = struct.unpack("H", fcntl.ioctl(probe.fileno(), _SIOCGIFFLAGS, request)[16:18])[0]
                if not flags & _IFF_UP or flags & _IFF_LOOPBACK:
                    continue
                found.append((name, socket.inet_ntoa(fcntl.ioctl(probe.fileno(), _SIOCGIFADDR, request)[20:24])))
            except OSError:  # no IPv4 address on it
                continue
    return found


_SIOCGIFFLAGS, _SIOCGIFADDR, _IFF_UP, _IFF_LOOPBACK = 0x8913, 0x8915, 0x1, 0x8


def route_source(address: str) -> str | None:
    """The local address this machine reaches ``address`` (HOST:PORT) from: the one a peer on
    that network reaches it at. A UDP socket is connected to ask the kernel's routing table;
    nothing is sent. None when ``address`` does not resolve or has no route."""
    host, _, port = address.rpartition(":")
    try:
        found = socket.getaddrinfo(host.strip("[]"), int(port), type=socket.SOCK_DGRAM)
    except (OSError, ValueError):
        return None
    found.sort(key=lambda info: info[0] != socket.AF_INET)  # IPv4 first, as gRPC's clients dial
    for family, kind, proto, _, sockaddr in found:
        try:
            with socket.socket(family, kind, proto) as probe:
                probe.connect(sockaddr)
                return str(probe.getsockname()[0])
        except OSError:
            continue
    return None
