"""Peer systems for ``actor_calls.py --peers``: the same ``Echo`` actor on Ray (and PARL's status).

Each peer runs in its own interpreter (``--ray-python``; Ray pins packages that clash with
ours), driven by the same bench functions as actorrt. Ray runs on loopback only, dashboard off.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import time
from collections.abc import Awaitable, Callable
from typing import Any

# The gist of why each peer that cannot run here does not, shown in the table instead of numbers.
PARL_PIN = "parl==2.2.1"


class _RayRef:
    def __init__(self, actor: Any) -> None:
        self.actor = actor

    def method(self, name: str) -> Callable[..., Awaitable[Any]]:
        remote = getattr(self.actor, name).remote
        return remote


def _ray_init(cpus: int) -> None:
    import ray

    ray.init(
        include_dashboard=False,
        _node_ip_address="127.0.0.1",
        num_cpus=cpus,
        logging_level="ERROR",
        log_to_driver=False,
        configure_logging=False,
    )


class RaySystem:
    name = "ray"
    groups = frozenset({"cold_start", "create", "latency", "pipelined", "payload", "cpu", "idle"})

    def __init__(self, address: str | None, echo: type) -> None:
        if address:
            raise ValueError("--address is for actorrt; Ray always runs a local cluster here")
        self.echo_cls = echo
        self.remote_echo: Any = None

    async def open(self) -> None:
        import ray

        _ray_init(max(2, os.cpu_count() or 1))
        self.remote_echo = ray.remote(num_cpus=1)(self.echo_cls)

    async def close(self) -> None:
        import ray

        ray.shutdown()

    async def create(self) -> _RayRef:
        ref = _RayRef(self.remote_echo.remote())
        await ref.method("ping")()  # constructed and answering
        return ref

    async def kill(self, actor: Any) -> None:
        import ray

        ray.kill(actor.actor)
        await asyncio.sleep(0.2)  # Ray frees the actor's CPU asynchronously

    async def wait_idle(self, timeout_s: float = 60.0) -> None:
        await asyncio.sleep(0.2)  # Ray starts actor workers on demand: no pool to wait for

    def cold_start_child(self, started: float) -> None:
        import ray

        imported = time.perf_counter()
        entered = time.perf_counter()
        _ray_init(max(2, os.cpu_count() or 1))
        actor = ray.remote(num_cpus=1)(self.echo_cls).remote()
        ray.get(actor.ping.remote())
        done = time.perf_counter()
        print(
            json.dumps({"first_call": True, "connect_to_first_call_s": done - entered, "import_s": imported - started}),
            flush=True,
        )
        ray.shutdown()


def parl_status(python: str) -> str | None:
    """None when PARL imports in ``python``; else why not, in a line."""
    try:
        out = subprocess.run(
            [python, "-c", "import parl; print(parl.__version__)"], capture_output=True, text=True, timeout=120
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"no PARL interpreter ({e})"
    if out.returncode == 0:
        return None
    return (
        f"not installed: `pip install {PARL_PIN}` fails on Python 3.11: it pins grpcio==1.37.0, which has "
        "no 3.11 wheel, and building that sdist fails (ModuleNotFoundError: pkg_resources)"
    )
