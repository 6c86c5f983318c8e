"""The master's web status page: ``actorrt start --dashboard-port N``.

Serves, from the master's own event loop, ``/`` (a page that renders itself from the JSON and
refreshes every two seconds), ``/api/status`` (the JSON): nodes with their cpus, load, CPU %,
memory in use and slots used/free; actors with class, node, age, CPU %, calls/s, memory and
their client; clients; the most recent deaths with their causes; a ten-minute history of the
cluster's CPU % and calls/s; and ``/api/actors/<id>/log?lines=N``, an actor's last lines
(``dashboard_logs``). The data is what ``actorrt status`` shows (the master's
``GetClusterStatus`` answer: CPU %, memory in use and calls/s as the worker daemons measured
them, sent with their heartbeats), plus what only the cluster table knows (each node's memory,
the deaths it keeps) and what the dashboard keeps itself: actor ages and death times, sampled
from the table once a second, so within a second of the truth, and the history
(``LoadHistory``, fed by the same sampler).

Same posture as ``/metrics``: off unless a port is given, no token, loopback unless
``--dashboard-host`` says otherwise (logged). It is read-only, and on loopback it answers only
requests addressed to a loopback name, so a web page elsewhere cannot read it through DNS
rebinding. HTTP/1.1, GET and HEAD, one request per connection, request heads of at most 16 KiB.

Whoever can connect costs the master little, however slowly they read: the JSON is built at
most once per ``STATUS_PERIOD_S`` and every reader of that period is sent the same bytes (one
build at a time; those who ask meanwhile wait for it); it is written in ``WRITE_CHUNK`` pieces,
each once the last has left, so a reader that does not read holds one piece of the master's
memory; a connection has ``CONNECTION_S`` from its accept for all of it (request and answer),
then it is cut; at most ``MAX_CONNECTIONS`` are served at once, and one more is answered 503
and closed. An actor's log costs a round trip to its daemon, within those bounds and those of
``dashboard_logs`` (lines and bytes capped, a rate per reader and overall, a few at once).
Names and causes in the JSON, and the lines of a log, are escaped for the page
(``common.text.printable``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections import OrderedDict
from typing import TYPE_CHECKING, Any, cast

from actorrt.common.lifecycle import Service
from actorrt.common.status import ClusterStatus
from actorrt.common.text import printable
from actorrt.master.dashboard_logs import (
    LOG_TIMEOUT_S,
    TAIL_BYTES,
    LogGate,
    LogRequest,
    http_code,
    log_json,
    parse_log_request,
)
from actorrt.master.dashboard_page import PAGE_CSS, PAGE_HTML, PAGE_JS
from actorrt.master.load_history import LoadHistory, cluster_load
from actorrt.master.output import LogReadError
from actorrt.v1 import master_pb2 as pb

if TYPE_CHECKING:
    from actorrt.master.server import Master
    from actorrt.master.table import ClusterTable

__all__ = ["DEATHS_SHOWN", "Dashboard", "Sightings"]

log = logging.getLogger("actorrt.dashboard")

DEATHS_SHOWN = 50  # the most recent deaths the JSON lists (the table keeps up to 10,000)
SAMPLE_PERIOD_S = 1.0
MAX_HEAD_BYTES = 16 * 1024
READ_TIMEOUT_S = 10.0  # for the request's head
CONNECTION_S = 15.0  # for all of a connection, from its accept: 3 MB (~6,700 actors) at 200 kB/s
MAX_CONNECTIONS = 64  # served at once; one more is answered 503
STATUS_PERIOD_S = 1.0  # /api/status is built at most this often; its readers share it
WRITE_CHUNK = 64 * 1024  # an answer is written in pieces this large, each once the last left
CALLS_NOTE = (
    "CPU % and calls/s: measured by each worker daemon over its last 5 s and sent with its heartbeat; "
    "an actor's CPU % is of one core (its process tree), a node's of all its cores"
)
AGE_NOTE = "ages and death times are measured by the dashboard, sampling the cluster table every second"
_LOOPBACK = ("127.0.0.1", "localhost", "::1")


class Sightings:
    """When the dashboard first saw each live actor, and when it saw each death. Plain state,
    fed the cluster table by ``sample``; bounded by the table (live actors) and ``deaths_kept``."""

    def __init__(self, deaths_kept: int = 1000) -> None:
        self.first_seen: dict[str, float] = {}
        self.died_at: OrderedDict[str, float] = OrderedDict()
        self.deaths_kept = deaths_kept

    def sample(self, table: ClusterTable, now: float) -> None:
        live = table.actors
        for actor_id in live:
            if actor_id not in self.first_seen:
                self.first_seen[actor_id] = now
        for actor_id in [a for a in self.first_seen if a not in live]:
            del self.first_seen[actor_id]
        for actor_id in reversed(table.dead):  # newest first; stop at the first one already seen
            if actor_id in self.died_at:
                break
            self.died_at[actor_id] = now
        while len(self.died_at) > self.deaths_kept:
            self.died_at.popitem(last=False)


class Dashboard(Service):
    """The HTTP server of the status page, on the master's loop. ``url`` once started."""

    def __init__(self, master: Master, port: int, host: str = "127.0.0.1", *, logs: bool = True) -> None:
        """``logs``: serve actors' output at ``/api/actors/<id>/log`` (off: 403)."""
        self.master = master
        self.host = host
        self.port = port
        self.logs = logs
        self.sightings = Sightings()
        self.history = LoadHistory()
        self.log_gate = LogGate()
        self._server: asyncio.base_events.Server | None = None
        self._sampler: asyncio.Task[None] | None = None
        self._handlers: set[asyncio.Task[Any]] = set()
        # /api/status as last built (when, by time.monotonic; its bytes), and the build under way
        self._status: tuple[float, bytes] | None = None
        self._building: asyncio.Task[bytes] | None = None

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/"

    async def _start(self) -> None:
        if self.host not in _LOOPBACK:
            log.warning("dashboard on %s: anyone who can reach it sees the cluster's status (no token)", self.host)
        try:
            self._server = await asyncio.start_server(self._serve, self.host, self.port, limit=MAX_HEAD_BYTES)
        except OSError as e:
            raise OSError(f"cannot serve the dashboard on {self.host}:{self.port}: {e.strerror or e}") from e
        self.port = int(self._server.sockets[0].getsockname()[1])
        self._sample()
        self._sampler = asyncio.create_task(self._sample_forever())
        log.info("dashboard at %s", self.url)

    async def _close(self) -> None:
        if self._sampler is not None:
            self._sampler.cancel()
        if self._building is not None:
            self._building.cancel()
        if self._server is not None:
            self._server.close()
            for task in list(self._handlers):
                task.cancel()
            with contextlib.suppress(asyncio.TimeoutError):
                async with asyncio.timeout(2.0):
                    await self._server.wait_closed()

    async def _sample_forever(self) -> None:
        while True:
            await asyncio.sleep(SAMPLE_PERIOD_S)
            self._sample()

    def _sample(self) -> None:
        """Once a second: when actors came and went, and the load history (O(nodes))."""
        now = time.time()
        self.sightings.sample(self.master.table, now)
        self.history.sample(self.master.table, now)

    # ---- the data ---------------------------------------------------------------------------

    async def snapshot(self) -> dict[str, Any]:
        """What ``/api/status`` returns: ``actorrt status --json``'s data, with node memory,
        actor ages, recent deaths, the cluster's load now and over ten minutes, and notes."""
        now = time.time()
        table = self.master.table
        self.sightings.sample(table, now)
        request = pb.GetClusterStatusRequest()
        # The servicer's own answer, as `actorrt status` gets it (its context is not used).
        answer = await self.master.servicer.GetClusterStatus(request, cast("Any", None))
        data = ClusterStatus.from_proto(answer).to_dict()
        rss_by_worker: dict[str, int] = {}
        for actor in data["actors"]:
            rss = int(actor["rss_bytes"])
            rss_by_worker[actor["worker_id"]] = rss_by_worker.get(actor["worker_id"], 0) + rss
            seen = self.sightings.first_seen.get(actor["actor_id"])
            actor["age_s"] = round(now - seen, 1) if seen is not None else None
        for node in data["nodes"]:
            worker = table.workers.get(node["worker_id"])
            node["memory_bytes"] = worker.memory_bytes if worker is not None else 0
            node["actors_rss_bytes"] = rss_by_worker.get(node["worker_id"], 0)
            node["cpus_free"] = node["cpus"] - node["cpus_used"]
            node["actors"] = len(worker.actors) if worker is not None else 0
        deaths = []
        for actor_id in reversed(table.dead):
            dead = table.dead[actor_id]
            seen = self.sightings.died_at.get(actor_id)
            deaths.append(
                {
                    "actor_id": dead.actor_id,
                    "class_name": dead.class_name,
                    "node": dead.node,
                    "cause": dead.cause,
                    "ago_s": round(now - seen, 1) if seen is not None else None,
                }
            )
            if len(deaths) == DEATHS_SHOWN:
                break
        data["deaths"] = deaths
        data["deaths_kept"] = len(table.dead)
        cpu_percent, calls_per_s = cluster_load(table)
        data["cluster"] = {"cpu_percent": round(cpu_percent, 1), "calls_per_s": round(calls_per_s, 2)}
        data["history"] = self.history.to_json()
        data["actor_logs"] = self.logs
        data["generated_at"] = now
        data["refresh_s"] = 2.0
        data["notes"] = {"calls_per_s": CALLS_NOTE, "age_s": AGE_NOTE}
        _shown(data)
        return data

    async def status_body(self) -> bytes:
        """``/api/status``'s JSON, built at most once per ``STATUS_PERIOD_S`` and shared by every
        reader of that period; a reader that comes while it is built waits for that build. Master
        loop; raises what ``snapshot`` raises (the next reader builds it again)."""
        if self._status is not None and time.monotonic() - self._status[0] < STATUS_PERIOD_S:
            return self._status[1]
        if self._building is None:
            self._building = asyncio.create_task(self._build_status())
        return await asyncio.shield(self._building)  # a reader that goes does not stop the build

    async def _build_status(self) -> bytes:
        """Build and keep the JSON (a task of its own on the master's loop, so that a reader
        that goes does not cancel it). Raises what ``snapshot`` raises."""
        try:
            body = json.dumps(await self.snapshot()).encode()
            self._status = (time.monotonic(), body)
            return body
        finally:
            self._building = None

    # ---- HTTP -------------------------------------------------------------------------------

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """One connection, on the master's loop: answered, closed and forgotten within
        ``CONNECTION_S`` of its accept whatever the peer does (it is cut then); one over
        ``MAX_CONNECTIONS`` is answered 503. Raises nothing."""
        if len(self._handlers) >= MAX_CONNECTIONS:
            writer.write(_head(503, "text/plain", len(_BUSY), {"Retry-After": "2"}) + _BUSY)
            writer.close()  # 200 bytes: they fit the socket's buffer, nothing waits here
            return
        task = asyncio.current_task()
        if task is not None:
            self._handlers.add(task)
        try:
            async with asyncio.timeout(CONNECTION_S):
                with contextlib.suppress(
                    ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError
                ):
                    await self._answer(reader, writer)  # a peer gone, or a request we do not read: done
                writer.close()
                await writer.wait_closed()  # the answer's last piece has left
        except (OSError, TimeoutError):  # the peer went away, or did not read in time
            pass
        finally:
            if task is not None:
                self._handlers.discard(task)
            writer.transport.abort()  # what it did not read is dropped (nothing after a clean close)

    async def _answer(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        async with asyncio.timeout(READ_TIMEOUT_S):
            head = await reader.readuntil(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        parts = lines[0].split(" ")
        if len(parts) != 3 or not parts[2].startswith("HTTP/"):
            await _respond(writer, 400, "text/plain", b"bad request\n")
            return
        method, target = parts[0], parts[1]
        headers = {k.strip().lower(): v.strip() for k, _, v in (ln.partition(":") for ln in lines[1:] if ln)}
        if self.host in _LOOPBACK and not _loopback_name(headers.get("host", "")):
            await _respond(writer, 421, "text/plain", b"this dashboard answers requests to a loopback name only\n")
            return
        if method not in ("GET", "HEAD"):
            await _respond(writer, 405, "text/plain", b"GET or HEAD only\n", extra={"Allow": "GET, HEAD"})
            return
        path, _, query = target.partition("?")
        log_request = parse_log_request(path, query)
        if log_request is not None:
            peer = writer.get_extra_info("peername")
            who = str(peer[0]) if isinstance(peer, tuple) and peer else "?"
            await self._answer_log(writer, log_request, who, head_only=method == "HEAD")
            return
        body: bytes
        if path == "/":
            kind, body = "text/html; charset=utf-8", _HTML
        elif path == "/dashboard.js":
            kind, body = "text/javascript; charset=utf-8", _JS
        elif path == "/dashboard.css":
            kind, body = "text/css; charset=utf-8", _CSS
        elif path == "/api/status":
            kind, body = "application/json", await self.status_body()
        else:
            await _respond(
                writer, 404, "text/plain", b"not found: /, /api/status and /api/actors/ID/log are served here\n"
            )
            return
        await _respond(writer, 200, kind, body, head_only=method == "HEAD")

    async def _answer_log(
        self, writer: asyncio.StreamWriter, request: LogRequest | str, reader: str, *, head_only: bool
    ) -> None:
        """``/api/actors/<id>/log``: the actor's last lines as JSON, or ``{"error": ...}`` with a
        4xx or 5xx (``dashboard_logs``: bad input 400, logs off 403, unknown actor 404, its
        worker gone 410, over a rate 429, too many at once 503, the daemon silent 504)."""
        if isinstance(request, str):
            await _respond_error(writer, 400, request)
            return
        if not self.logs:
            await _respond_error(
                writer, 403, "actor logs are off on this dashboard (actorrt start --no-dashboard-logs)"
            )
            return
        refused = self.log_gate.admit(reader, time.monotonic())
        if refused is not None:
            code, wait = refused
            await _respond_error(writer, code, f"too many log reads; try again in {wait}s", {"Retry-After": str(wait)})
            return
        try:
            try:
                answer = await self.master.servicer.read_actor_log(
                    request.actor_id, TAIL_BYTES, exact=True, timeout_s=LOG_TIMEOUT_S
                )
            except LogReadError as e:
                await _respond_error(writer, http_code(e.code), e.message)
                return
            body = json.dumps(log_json(answer, request.lines)).encode()
            del answer
            await _respond(writer, 200, "application/json", body, head_only=head_only)
        finally:
            self.log_gate.done()


def _shown(data: dict[str, Any]) -> None:
    """Escape, in place, the text of the rows as a person will read it on the page
    (``common.text.printable``): names and causes others chose carry no control character,
    bidirectional override or line separator to the page (which writes them as text, never
    HTML). Ids and numbers are unchanged (they are printable)."""
    data["address"] = printable(data["address"])
    for key in ("nodes", "actors", "clients", "deaths"):
        for row in data[key]:
            for field, value in row.items():
                if isinstance(value, str):
                    row[field] = printable(value)


def _loopback_name(host_header: str) -> bool:
    """Whether a Host header names this machine's loopback (any port)."""
    host = host_header.strip().lower()
    if host.startswith("["):
        host = host[1 : host.find("]")] if "]" in host else host
    else:
        host = host.rsplit(":", 1)[0] if host.count(":") == 1 else host
    return host in _LOOPBACK


_REASONS = {
    200: "OK",
    400: "Bad Request",
    403: "Forbidden",
    404: "Not Found",
    405: "Method Not Allowed",
    410: "Gone",
    421: "Misdirected Request",
    429: "Too Many Requests",
    502: "Bad Gateway",
    503: "Service Unavailable",
    504: "Gateway Timeout",
}
_HTML, _JS, _CSS = PAGE_HTML.encode(), PAGE_JS.encode(), PAGE_CSS.encode()
_BUSY = f"busy: {MAX_CONNECTIONS} connections are being served; try again\n".encode()


async def _respond(
    writer: asyncio.StreamWriter,
    code: int,
    kind: str,
    body: bytes,
    *,
    head_only: bool = False,
    extra: dict[str, str] | None = None,
) -> None:
    """Write the answer: its head, then ``body`` (shared by other readers, never copied whole)
    in ``WRITE_CHUNK`` pieces, each once the last has left for the socket. Raises
    ConnectionError when the peer went."""
    writer.write(_head(code, kind, len(body), extra))
    if not head_only:
        view = memoryview(body)
        for start in range(0, len(view), WRITE_CHUNK):
            writer.write(view[start : start + WRITE_CHUNK])
            await writer.drain()
    await writer.drain()


async def _respond_error(
    writer: asyncio.StreamWriter, code: int, message: str, extra: dict[str, str] | None = None
) -> None:
    """An API error: ``{"error": message}`` with ``code``."""
    await _respond(writer, code, "application/json", json.dumps({"error": message}).encode(), extra=extra)


def _head(code: int, kind: str, length: int, extra: dict[str, str] | None = None) -> bytes:
    """An answer's status line and headers."""
    headers = {
        "Content-Type": kind,
        "Content-Length": str(length),
        "Cache-Control": "no-store",
        "X-Content-Type-Options": "nosniff",
        "Content-Security-Policy": (
            "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; "
            "base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
        ),
        "Referrer-Policy": "no-referrer",
        "Connection": "close",
        **(extra or {}),
    }
    head = f"HTTP/1.1 {code} {_REASONS[code]}\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers.items()) + "\r\n"
    return head.encode("latin-1")
