"""The status page's actor logs: ``GET /api/actors/<id>/log?lines=N``, the last lines an actor
printed, read through the same path as ``actorrt logs`` (``MasterLogs.read_actor_log``: the
master asks the daemon that hosts or hosted the actor for its log file's tail).

Anyone who can reach the page reads it, with no token (docs/security.md), so what one reader
can make the master and the daemons do is bounded here:

- ``lines`` is 1 to ``MAX_LINES`` (``DEFAULT_LINES`` when not given); the daemon is asked for
  at most ``TAIL_BYTES`` of the tail, whatever ``lines`` says, and each line is cut to
  ``MAX_LINE_CHARS``; lines are escaped text (``common.text.printable``) in JSON, never HTML.
- ``LogGate``: each reader (its address) may ask ``READER_RATE`` times a second (bursts of
  ``READER_BURST``), all readers together ``OVERALL_RATE`` (bursts of ``OVERALL_BURST``), the
  rest answered 429 with ``Retry-After``; at most ``AT_ONCE`` log answers are read or written
  at a time (503 past it), so the master holds at most that many tails.
- The daemon has ``LOG_TIMEOUT_S`` to answer (504 past it), within the page's connection
  deadline.
"""

from __future__ import annotations

import math
import re
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, unquote

import grpc

from actorrt.common.text import printable
from actorrt.v1 import master_pb2 as pb

__all__ = [
    "AT_ONCE",
    "DEFAULT_LINES",
    "MAX_LINES",
    "TAIL_BYTES",
    "LogGate",
    "LogRequest",
    "http_code",
    "log_json",
    "parse_log_request",
]

DEFAULT_LINES = 100
MAX_LINES = 1000
TAIL_BYTES = 64 * 1024  # of the log's tail asked of the daemon, whatever `lines` says
MAX_LINE_CHARS = 4096  # of one line shown; the rest counted
LOG_TIMEOUT_S = 5.0
READER_RATE, READER_BURST = 2.0, 10
OVERALL_RATE, OVERALL_BURST = 10.0, 20
AT_ONCE = 8  # log answers read or written at a time
READERS_KEPT = 1024  # readers whose rate is tracked; the one seen longest ago goes first

_PATH = re.compile(r"/api/actors/([^/]*)/log")
_ACTOR_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")


@dataclass(frozen=True)
class LogRequest:
    actor_id: str
    lines: int


def parse_log_request(path: str, query: str) -> LogRequest | str | None:
    """The request a target's ``path`` and ``query`` make, a string that says why it is a bad
    one (a 400), or None when ``path`` is not ``/api/actors/<id>/log``."""
    match = _PATH.fullmatch(path)
    if match is None:
        return None
    actor_id = unquote(match.group(1))
    if not _ACTOR_ID.fullmatch(actor_id):
        return "an actor id is 1 to 64 letters, digits, '_' or '-'"
    try:
        fields = parse_qs(query, keep_blank_values=True, strict_parsing=bool(query), max_num_fields=4)
    except ValueError:
        return "bad query: ?lines=N only"
    if set(fields) - {"lines"} or len(fields.get("lines", ())) > 1:
        return "bad query: ?lines=N only"
    text = fields.get("lines", [str(DEFAULT_LINES)])[0]
    if not (text.isascii() and text.isdigit() and len(text) <= 6 and 1 <= int(text) <= MAX_LINES):
        return f"lines must be a whole number from 1 to {MAX_LINES}"
    return LogRequest(actor_id, int(text))


def log_json(answer: pb.GetActorLogResponse, lines: int) -> dict[str, Any]:
    """``/api/actors/<id>/log``'s JSON: who the actor is, and the last ``lines`` lines of the
    tail the daemon sent (the first, cut by the tail, left out), escaped; ``more``: the log
    has lines before these."""
    text = answer.data.decode("utf-8", errors="replace")
    rows = text.split("\n")
    if rows and rows[-1] == "":
        rows.pop()  # the newline that ends the last line
    more = answer.truncated
    if answer.truncated and rows:
        rows.pop(0)  # the tail began within that line
    if len(rows) > lines:
        rows, more = rows[-lines:], True
    return {
        "actor_id": answer.actor_id,
        "class_name": printable(answer.class_name),
        "node": printable(answer.node),
        "alive": answer.alive,
        "cause": printable(answer.cause),
        "lines": [printable(row, MAX_LINE_CHARS) for row in rows],
        "more": more,
    }


_HTTP = {
    grpc.StatusCode.NOT_FOUND: 404,
    grpc.StatusCode.INVALID_ARGUMENT: 400,
    grpc.StatusCode.UNAVAILABLE: 410,  # its worker left the cluster: the log stays on that node
    grpc.StatusCode.DEADLINE_EXCEEDED: 504,
}


def http_code(code: grpc.StatusCode) -> int:
    """The HTTP status for a ``LogReadError``'s gRPC one."""
    return _HTTP.get(code, 502)


class _Bucket:
    """A token bucket: ``rate`` a second, at most ``burst`` at once."""

    def __init__(self, rate: float, burst: int, now: float) -> None:
        self.rate, self.burst = rate, burst
        self.tokens, self.when = float(burst), now

    def wait(self, now: float) -> float:
        """Seconds until a token is there (0: now), after refilling to ``now``."""
        self.tokens = min(self.burst, self.tokens + max(0.0, now - self.when) * self.rate)
        self.when = now
        return 0.0 if self.tokens >= 1 else (1 - self.tokens) / self.rate


class LogGate:
    """Who may ask for a log now: a rate per reader and overall, and a cap on answers at once.
    Plain state on the master's loop; times from the caller."""

    def __init__(
        self,
        reader_rate: tuple[float, int] = (READER_RATE, READER_BURST),
        overall_rate: tuple[float, int] = (OVERALL_RATE, OVERALL_BURST),
        at_once: int = AT_ONCE,
        readers_kept: int = READERS_KEPT,
    ) -> None:
        self.reader_rate, self.at_once, self.readers_kept = reader_rate, at_once, readers_kept
        self._overall = _Bucket(*overall_rate, now=0.0)
        self._readers: OrderedDict[str, _Bucket] = OrderedDict()
        self.in_use = 0  # answers admitted and not done

    def admit(self, reader: str, now: float) -> tuple[int, int] | None:
        """None: ``reader`` may ask now (counted; call ``done`` once answered); else (HTTP
        status, seconds to wait): 429 over a rate, 503 with ``at_once`` answers under way."""
        if self.in_use >= self.at_once:
            return 503, 1
        bucket = self._readers.get(reader)
        if bucket is None:
            bucket = self._readers[reader] = _Bucket(*self.reader_rate, now=now)
            while len(self._readers) > self.readers_kept:
                self._readers.popitem(last=False)
        self._readers.move_to_end(reader)
        wait = max(bucket.wait(now), self._overall.wait(now))
        if wait > 0:
            return 429, max(1, math.ceil(wait))
        bucket.tokens -= 1
        self._overall.tokens -= 1
        self.in_use += 1
        return None

    def done(self) -> None:
        """An admitted answer was written (or given up)."""
        self.in_use -= 1
