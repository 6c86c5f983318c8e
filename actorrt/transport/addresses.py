"""Addresses: ``HOST:PORT`` as gRPC reads it, and which of this machine's addresses a peer reaches.

Plain functions asked of the kernel (ioctls, a connected UDP socket); nothing is ever sent.
Used by the CLI (what address to advertise), the master and the daemons (endpoints they hand out).
"""

from __future__ import annotations

import fcntl
import socket
import struct

__all__ = ["LOOPBACK_HOSTS", "WILDCARD_HOSTS", "host_port", "interface_addresses", "route_source"]


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
