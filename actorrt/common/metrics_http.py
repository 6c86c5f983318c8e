"""Serving a prometheus-client registry at ``/metrics`` over HTTP, the same way in every process
that exports metrics: the master, the worker daemons (``--metrics-port``) and user processes
(``actorrt.metrics.serve``). prometheus-client's server runs on a thread of its own.

Names follow Prometheus conventions: ``actorrt_`` prefix, base units, ``_total`` counters.
"""

from __future__ import annotations

import asyncio
import logging

from prometheus_client import CollectorRegistry, disable_created_metrics, start_http_server

__all__ = ["MetricsServer", "serve"]

log = logging.getLogger("actorrt.metrics")


class MetricsServer:
    """``/metrics`` for one registry on ``host:port``; ``close()`` stops it and joins its thread."""

    def __init__(self, registry: CollectorRegistry, port: int, host: str = "127.0.0.1") -> None:
        try:
            self._server, self._thread = start_http_server(port, addr=host, registry=registry)
        except OSError as e:
            raise OSError(f"cannot serve metrics on {host}:{port}: {e.strerror or e}") from e
        self.host = host
        self.port = int(self._server.server_address[1])

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}/metrics"

    def stop(self) -> None:
        """Stop serving and join the server thread. Any thread but the server's own."""
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5)

    async def close(self) -> None:
        """``stop()`` without blocking the caller's event loop (the shutdown polls for ~0.5 s)."""
        await asyncio.to_thread(self.stop)


def serve(registry: CollectorRegistry, port: int, host: str = "127.0.0.1") -> MetricsServer:
    """Serve ``registry`` at ``http://host:port/metrics`` (port 0: any free port)."""
    disable_created_metrics()  # type: ignore[no-untyped-call]  # prometheus-client leaves it unannotated; the *_created series only double what scrapes already show
    server = MetricsServer(registry, port, host)
    log.info("serving metrics at %s", server.url)
    return server
