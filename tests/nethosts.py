"""Test hosts on this machine: network namespaces joined by a bridge, each with its own address.

    with NetHosts(["master", "w1", "w2", "client"]) as net:
        proc = net.popen("w1", [sys.executable, "-m", "actorrt", ...])
        net.cut("w1")      # its link goes down: a partition
        net.heal("w1")

Addresses come from 10.213.<n>.0/24, used only inside namespaces this process creates and deletes;
nothing outside them is ever a target. Needs root (CAP_NET_ADMIN) and iproute2.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
from collections.abc import Sequence
from types import TracebackType
from typing import Any


def can_create_namespaces() -> str | None:
    """None when namespaces can be made here, else why not."""
    if shutil.which("ip") is None:
        return "iproute2 ('ip') is not installed"
    if os.geteuid() != 0:
        return "creating network namespaces needs root"
    probe = f"art-probe-{os.getpid()}"
    made = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True)
    if made.returncode != 0:
        return f"'ip netns add' failed: {made.stderr.strip()}"
    subprocess.run(["ip", "netns", "del", probe], capture_output=True)
    return None


def _ip(*args: str) -> None:
    out = subprocess.run(["ip", *args], capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)}: {out.stderr.strip()}")


class NetHosts:
    def __init__(self, hosts: Sequence[str], subnet: int | None = None) -> None:
        self.tag = f"{os.getpid() % 10000:04d}"
        self.subnet = subnet if subnet is not None else 100 + os.getpid() % 100
        self.hosts = list(hosts)
        self.bridge_ns = f"art{self.tag}-br"
        self.procs: list[subprocess.Popen[Any]] = []

    def ns(self, host: str) -> str:
        return f"art{self.tag}-{host}"

    def ip(self, host: str) -> str:
        return f"10.213.{self.subnet}.{self.hosts.index(host) + 1}"

    def _veth(self, host: str) -> tuple[str, str]:
        i = self.hosts.index(host)
        return f"a{self.tag}h{i}", f"a{self.tag}b{i}"  # host side, bridge side (<= 15 chars)

    def __enter__(self) -> NetHosts:
        try:
            _ip("netns", "add", self.bridge_ns)
            _ip("-n", self.bridge_ns, "link", "add", "br0", "type", "bridge")
            _ip("-n", self.bridge_ns, "link", "set", "br0", "up")
            for host in self.hosts:
                ns = self.ns(host)
                inner, outer = self._veth(host)
                _ip("netns", "add", ns)
                _ip("-n", ns, "link", "set", "lo", "up")
                _ip("link", "add", inner, "netns", ns, "type", "veth", "peer", "name", outer, "netns", self.bridge_ns)
                _ip("-n", ns, "addr", "add", f"{self.ip(host)}/24", "dev", inner)
                _ip("-n", ns, "link", "set", inner, "up")
                _ip("-n", self.bridge_ns, "link", "set", outer, "master", "br0")
                _ip("-n", self.bridge_ns, "link", "set", outer, "up")
        except BaseException:
            self.close()
            raise
        return self

    def popen(self, host: str, argv: Sequence[str], **kwargs: Any) -> subprocess.Popen[Any]:
        """Start ``argv`` inside ``host``; ``ip netns exec`` execs it, so the PID is its own."""
        proc = subprocess.Popen(["ip", "netns", "exec", self.ns(host), *argv], **kwargs)
        self.procs.append(proc)
        return proc

    def run(self, host: str, argv: Sequence[str], **kwargs: Any) -> subprocess.CompletedProcess[Any]:
        return subprocess.run(["ip", "netns", "exec", self.ns(host), *argv], **kwargs)

    def cut(self, host: str) -> None:
        _ip("-n", self.bridge_ns, "link", "set", self._veth(host)[1], "down")

    def heal(self, host: str) -> None:
        _ip("-n", self.bridge_ns, "link", "set", self._veth(host)[1], "up")

    def close(self) -> None:
        for proc in self.procs:  # stopped by PID
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in self.procs:
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        for host in self.hosts:
            subprocess.run(["ip", "netns", "del", self.ns(host)], capture_output=True)
        subprocess.run(["ip", "netns", "del", self.bridge_ns], capture_output=True)

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
