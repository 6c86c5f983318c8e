"""PARL's ``parl.utils.machine_info``: GPUs, this machine's address, free ports."""

from __future__ import annotations

import os
import random
import socket

from actorrt.common.resources import visible_gpus
from actorrt.compat.parl.utils import logger
from actorrt.transport.addresses import interface_addresses

__all__ = [
    "get_free_tcp_port",
    "get_gpu_count",
    "get_ip_address",
    "get_port_from_range",
    "is_gpu_available",
    "is_port_available",
    "is_xpu_available",
]


def get_ip_address() -> str | None:
    """This machine's IPv4 address (its first interface that is up, loopback aside), or None
    with a warning (as PARL)."""
    found = interface_addresses()
    if not found:
        logger.warning("get_ip_address failed, please set ip address manually.")
        return None
    return found[0][1]


def get_gpu_count() -> int:
    """The GPUs ``CUDA_VISIBLE_DEVICES`` names when it is set (empty: none), else those
    ``nvidia-smi`` lists (none without a driver)."""
    devices = os.environ.get("CUDA_VISIBLE_DEVICES")
    if devices is not None:
        try:
            count = len([d for d in devices.split(",") if d.strip() and int(d) >= 0])
        except ValueError:  # GPU UUIDs, or garbage: PARL counts none
            count = 0
        logger.info(f"CUDA_VISIBLE_DEVICES found gpu count: {count}")
        return count
    count = visible_gpus() or 0
    logger.info(f"nvidia-smi -L found gpu count: {count}")
    return count


def is_gpu_available() -> bool:
    return get_gpu_count() > 0


def is_xpu_available() -> bool:
    """Baidu's XPUs are Paddle's: never here."""
    return False


def get_free_tcp_port() -> str:
    """A TCP port free now, as a string (PARL's type)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as tcp:
        tcp.bind(("", 0))
        return str(tcp.getsockname()[1])


def is_port_available(port: int | str) -> bool:
    """Whether nothing listens on ``port`` on localhost."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        return sock.connect_ex(("localhost", int(port))) != 0


def get_port_from_range(start: int, end: int) -> int:
    """A random port in ``[start, end]`` that nothing listens on."""
    while True:
        port = random.randint(start, end)
        if is_port_available(port):
            return port
