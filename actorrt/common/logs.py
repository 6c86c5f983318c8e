"""The daemons' own logs: one line per event, with the event's ids as ``key=value`` fields
(``--log-format text``) or as JSON objects (``--log-format json``), to a rotated file under the
home folder or to stderr.

Code attaches ids with ``log.info("...", extra=ids(actor_id=..., worker_id=...))``;
``RepeatedFailures`` logs work that fails over and over once, then by count. Used by the master,
the worker daemons and the client's session; configured once per process by the CLI.
"""

from __future__ import annotations

import io
import json
import logging
import logging.handlers
import os
import sys
import threading
import time
from collections.abc import Hashable
from pathlib import Path
from typing import Any, TextIO

from actorrt.common.text import printable

__all__ = ["DAEMON_LOG_BACKUPS", "DAEMON_LOG_BYTES", "DaemonLogFile", "RepeatedFailures", "configure_logging", "ids"]

_FIELDS = ("worker_id", "actor_id", "class_name", "client_id", "node", "slot", "pid", "cause", "address")


class RepeatedFailures:
    """Logs failures of work that goes on after each (called from within the ``except``): the
    traceback the first time for each key, then a count every ``every`` (some fail once per line
    of output)."""

    def __init__(self, logger: logging.Logger, every: int = 1000) -> None:
        self.logger = logger
        self.every = every
        self._counts: dict[Hashable, int] = {}

    def failed(self, key: Hashable, message: str, *args: Any) -> None:
        count = self._counts[key] = self._counts.get(key, 0) + 1
        if count == 1:
            self.logger.exception(message, *args)
        elif count % self.every == 0:
            self.logger.error(message + ", %d times now", *args, count)


def ids(**fields: Any) -> dict[str, Any]:
    """``extra=`` for a log call: the event's ids, shown as fields by the formatters below."""
    return {k: v for k, v in fields.items() if v not in (None, "")}


class EventFormatter(logging.Formatter):
    """``2026-01-02T03:04:05.678Z INFO actorrt.master actor died actor_id=3f.. cause="..."``.

    One line per event: the message and the fields carry names others chose (an actor's class,
    a node's name, a cause), so control characters in them are escaped
    (``common.text.printable``; quoted fields by JSON), never written to the terminal or file."""

    def format(self, record: logging.LogRecord) -> str:
        ts = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z"
        parts = [ts, record.levelname, record.name, printable(record.getMessage())]
        for key in _FIELDS:
            value = record.__dict__.get(key)
            if value not in (None, ""):
                text = str(value)
                parts.append(
                    f"{key}={json.dumps(text) if (' ' in text or '=' in text or not text) else printable(text)}"
                )
        line = " ".join(parts)
        if record.exc_info:
            line += " exc=" + json.dumps(self.formatException(record.exc_info))
        return line


class JsonFormatter(logging.Formatter):
    """One JSON object per event; JSON escapes every control character (``ensure_ascii``)."""

    def format(self, record: logging.LogRecord) -> str:
        event: dict[str, Any] = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        for key in _FIELDS:
            value = record.__dict__.get(key)
            if value not in (None, ""):
                event[key] = value
        if record.exc_info:
            event["exc"] = self.formatException(record.exc_info)
        return json.dumps(event, default=str)


DAEMON_LOG_BYTES = 10 * 2**20  # a daemon's log file, before it rotates
DAEMON_LOG_BACKUPS = 3  # rotated daemon log files kept
MAX_RAW_LINE = 2**16  # characters of one stdout/stderr line; longer ones are cut in pieces


def configure_logging(
    level: str = "info",
    fmt: str = "text",
    stream: TextIO | None = None,
    *,
    path: Path | None = None,
    max_bytes: int = DAEMON_LOG_BYTES,
    backups: int = DAEMON_LOG_BACKUPS,
) -> None:
    """Configure the root logger of a daemon process: one line per event on stderr.

    With ``path``, events go to that file instead, rotated at ``max_bytes`` with ``backups``
    older files kept, and so does everything the process writes to stdout and stderr (see
    :class:`DaemonLogFile`): the daemon's files stay under ``(backups + 1) x max_bytes``.
    """
    formatter: logging.Formatter = JsonFormatter() if fmt == "json" else EventFormatter()
    handler: logging.Handler
    if path is None:
        handler = logging.StreamHandler(stream or sys.stderr)
        handler.setFormatter(formatter)
    else:
        handler = DaemonLogFile(path, max_bytes, backups)
        handler.setFormatter(_RawOrEvent(formatter))
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(getattr(logging, level.upper()))
    if isinstance(handler, DaemonLogFile):
        max_line = min(MAX_RAW_LINE, max(1, max_bytes // 4))  # a piece fits in a file, in UTF-8
        sys.stdout = _HandlerStream(handler, 1, max_line)
        sys.stderr = _HandlerStream(handler, 2, max_line)


class DaemonLogFile(logging.handlers.RotatingFileHandler):
    """A daemon's own log file, rotated by size; file descriptors 1 and 2 follow it.

    Each time the file is (re)opened, stdout and stderr are pointed at it, so what is written
    below Python (a fatal error's report, gRPC's C core) lands in the same bounded files and
    counts toward the next rotation. Python's ``sys.stdout``/``sys.stderr`` write through this
    handler (:class:`_HandlerStream`), so prints and echoed actor lines rotate it too.
    """

    def __init__(self, path: Path, max_bytes: int, backups: int) -> None:
        if max_bytes < 1 or backups < 1:
            raise ValueError(f"a rotating log needs max_bytes >= 1 and backups >= 1, got {max_bytes}, {backups}")
        super().__init__(path, maxBytes=max_bytes, backupCount=backups, encoding="utf-8")

    def handleError(self, record: logging.LogRecord) -> None:
        """Drop the record: the report would go to stderr, which is this very file."""

    def _open(self) -> Any:
        stream = super()._open()
        stream.flush()
        for fd in (1, 2):
            os.dup2(stream.fileno(), fd)
        return stream


class _RawOrEvent(logging.Formatter):
    """Formats events with ``inner``, and lines written to stdout/stderr as they are."""

    def __init__(self, inner: logging.Formatter) -> None:
        super().__init__()
        self.inner = inner

    def format(self, record: logging.LogRecord) -> str:
        return record.getMessage() if getattr(record, "raw", False) else self.inner.format(record)


class _HandlerStream(io.TextIOBase):
    """``sys.stdout``/``sys.stderr`` of a daemon that logs to a file: whole lines, unformatted,
    through its rotating handler, cut in pieces of at most ``max_line`` characters (so one
    line never outgrows a file, nor memory). ``fileno`` is the descriptor that follows the
    current file."""

    def __init__(self, handler: logging.Handler, fd: int, max_line: int = MAX_RAW_LINE) -> None:
        super().__init__()
        self._handler = handler
        self._fd = fd
        self._max_line = max_line
        self._pending = ""
        self._lock = threading.RLock()
        self._writing = False

    @property
    def encoding(self) -> str:  # type: ignore[override]  # TextIOBase's is a read-only attribute
        return "utf-8"

    def writable(self) -> bool:
        return True

    def isatty(self) -> bool:
        return False

    def fileno(self) -> int:
        return self._fd

    def write(self, text: str) -> int:
        with self._lock:
            self._pending += text
            *lines, self._pending = self._pending.split("\n")
            if len(self._pending) > self._max_line:  # no newline in sight
                lines.append(self._pending)
                self._pending = ""
            for line in lines:
                for start in range(0, max(1, len(line)), self._max_line):
                    self._emit(line[start : start + self._max_line])
        return len(text)

    def flush(self) -> None:
        with self._lock:
            if self._pending:
                line, self._pending = self._pending, ""
                self._emit(line)

    def _emit(self, line: str) -> None:
        if self._writing:  # the handler reporting its own failure: no loop
            return
        self._writing = True
        try:
            self._handler.handle(logging.makeLogRecord({"msg": line, "args": None, "raw": True}))
        finally:
            self._writing = False
