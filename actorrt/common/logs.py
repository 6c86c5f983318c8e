"""Actor output and the daemons' own logs.

- ``LineSplitter`` (worker daemon): cuts an actor's raw output into lines, keeping at most
  ``MAX_LINE_BYTES`` of each (a longer one ends with ``[... N more bytes]``).
- ``OutputRelay`` (worker daemon): every line an actor prints goes to a per-actor log file with
  rotation under the worker's state dir, and, batched, rate-limited and bounded in bytes, to the
  master as an ``ActorOutput`` event, which forwards it to the owning client (see
  ``print_actor_output``).
- ``read_log_tail``: the tail of a live or dead actor's log, for ``actorrt logs``.
- ``configure_logging``: one line per event, with the event's ids as ``key=value`` fields
  (``--log-format text``) or as JSON objects (``--log-format json``). Code attaches ids with
  ``log.info("...", extra=ids(actor_id=..., worker_id=...))``.
"""

from __future__ import annotations

import collections
import fcntl
import io
import itertools
import json
import logging
import logging.handlers
import os
import queue
import sys
import threading
import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from actorrt.transport import rpc as _rpc
from actorrt.v1 import master_pb2 as pb

__all__ = [
    "NOTICE_PREFIX",
    "LineSplitter",
    "OutputPrinter",
    "OutputRelay",
    "configure_logging",
    "default_log_dir",
    "ids",
    "prefix",
    "print_actor_output",
    "read_log_tail",
]

DEFAULT_LOG_BYTES = 10 * 2**20  # per file; with BACKUPS rotations kept
BACKUPS = 2
MAX_ACTOR_LOGS = 1000  # per log folder (every daemon of an ACTORRT_HOME shares it); the oldest go first
FORWARD_LINES_PER_S = 1000.0  # to the client; the log file keeps everything
FORWARD_BURST = 5000
FORWARD_MAX_LINE = 8192
FORWARD_MAX_BYTES = 256 * 2**10  # of text in one forwarded ActorOutput message; it flushes then
MAX_LINE_BYTES = 64 * 2**10  # of one output line kept anywhere; the rest is counted, not kept
FLUSH_AFTER_S = 0.05
DEFAULT_TAIL_BYTES = 2**20
MAX_LOG_ANSWER_BYTES = 2 * 2**20  # of log data in one ActorLog answer: well under the master's 4 MiB message cap


def default_log_dir() -> Path:
    return _rpc.state_dir() / "logs" / "actors"


def prefix(class_name: str, actor_id: str, pid: int) -> str:
    """``(Counter pid=4242 id=3f2a9c1b)``: how an actor's lines are labelled everywhere."""
    return f"({class_name or 'actor'} pid={pid} id={actor_id[:8]})"


def print_actor_output(msg: pb.ActorOutput, out: TextIO | None = None, err: TextIO | None = None) -> None:
    """Print forwarded lines on the client's terminal, stdout lines to stdout, stderr to stderr."""
    label = prefix(msg.class_name, msg.actor_id, msg.pid)
    out, err = out or sys.stdout, err or sys.stderr
    try:
        # One write per run of lines to the same stream: the order between stdout and stderr
        # lines stays the actor's on a terminal showing both.
        for is_err, run in itertools.groupby(msg.lines, key=lambda line: line.stderr):
            _write_beside_the_program(err if is_err else out, "".join(f"{label} {line.text}\n" for line in run))
    except (OSError, ValueError):  # a closed terminal must not break the session
        pass


def _write_beside_the_program(stream: TextIO, text: str) -> None:
    """Write whole lines, from the printer's thread, to a stream the program's threads print to.

    A ``TextIOWrapper`` (``sys.stdout`` and ``sys.stderr`` are) is not thread-safe: before
    Python 3.12.4 (CPython gh-118138, gh-119506) a write that lands while another thread's write
    flushes into a full pipe can drop or garble text. So this thread never writes to it: the
    lines, encoded as the wrapper would (characters it cannot encode escaped, not a reason to
    drop the batch), go to its binary buffer, which holds a lock. What the program printed and
    the wrapper still holds comes out after them. Other streams (a notebook's, a capture) get a
    plain ``write``."""
    buffer = getattr(stream, "buffer", None)
    if not isinstance(stream, io.TextIOWrapper) or not isinstance(buffer, io.BufferedIOBase):
        stream.write(text)
        stream.flush()
        return
    buffer.write(text.encode(stream.encoding or "utf-8", "backslashreplace"))
    buffer.flush()


# How the master's own lines in an actor's output begin (a count of lines it dropped).
NOTICE_PREFIX = "[actorrt:"


class OutputPrinter:
    """Prints forwarded actor output on a thread of its own, so a terminal that blocks (a full
    pipe nobody reads, a paused pager) never holds the client's event loop, and with it every
    call. At most ``max_pending`` messages wait; past that they are dropped and counted, and a
    notice says how many once the terminal takes output again."""

    def __init__(self, max_pending: int = 1000) -> None:
        self._queue: queue.Queue[pb.ActorOutput | None] = queue.Queue(max_pending)
        self._dropped = 0  # lines; touched by submit (the loop) and read by the thread
        # The master's own notices ("[actorrt: N lines of output dropped ...]") are never
        # dropped here: kept apart (bounded) when the queue is full, printed next.
        self._notices: collections.deque[pb.ActorOutput] = collections.deque(maxlen=max_pending)
        self._thread: threading.Thread | None = None

    def submit(self, msg: pb.ActorOutput) -> None:
        """Queue lines to print; never blocks. Client loop."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="actorrt-output", daemon=True)
            self._thread.start()
        try:
            self._queue.put_nowait(msg)
        except queue.Full:
            notices = [line for line in msg.lines if line.text.startswith(NOTICE_PREFIX)]
            self._dropped += len(msg.lines) - len(notices)
            if notices:
                kept = pb.ActorOutput(actor_id=msg.actor_id, class_name=msg.class_name, pid=msg.pid)
                kept.lines.extend(notices)
                self._notices.append(kept)

    def close(self, wait_s: float = 1.0) -> None:
        """Print what is queued (for at most ``wait_s``), then end the thread."""
        if self._thread is None:
            return
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            try:
                self._queue.put(None, timeout=0.05)
                break
            except queue.Full:
                continue
        self._thread.join(max(0.0, deadline - time.monotonic()))
        self._thread = None

    def _run(self) -> None:
        while (msg := self._queue.get()) is not None:
            print_actor_output(msg)
            while self._notices:
                print_actor_output(self._notices.popleft())
            if self._dropped:
                dropped, self._dropped = self._dropped, 0
                try:
                    _write_beside_the_program(
                        sys.stderr, f"actorrt: {dropped} lines of actor output dropped (the terminal did not keep up)\n"
                    )
                except (OSError, ValueError):
                    pass


# ---- worker side -------------------------------------------------------------------------------


class LineSplitter:
    """Cuts an actor's raw output (chunks of bytes, any shape) into text lines, keeping at most
    ``max_bytes`` of each; a longer line ends with ``[... N more bytes]``. Memory stays bounded
    whatever comes: a line with no newline is counted, never buffered whole."""

    def __init__(self, max_bytes: int = MAX_LINE_BYTES) -> None:
        self.max_bytes = max_bytes
        self._kept = bytearray()  # the start of the line not yet ended
        self._more = 0  # its bytes past max_bytes, dropped

    def feed(self, chunk: bytes) -> list[str]:
        """The lines that ``chunk`` ends, oldest first."""
        lines: list[str] = []
        start = 0
        while (end := chunk.find(b"\n", start)) >= 0:
            self._take(chunk, start, end)
            lines.append(self._end_line())
            start = end + 1
        self._take(chunk, start, len(chunk))
        return lines

    def finish(self) -> list[str]:
        """At end of stream: the last line, if it had no newline."""
        return [self._end_line()] if self._kept or self._more else []

    def _take(self, chunk: bytes, start: int, end: int) -> None:
        room = max(0, self.max_bytes - len(self._kept))
        keep = min(room, end - start)
        if keep:
            self._kept += chunk[start : start + keep]
        self._more += end - start - keep

    def _end_line(self) -> str:
        text = self._kept.decode(errors="replace")
        if self._more:
            text += f" [... {self._more} more bytes]"
        self._kept, self._more = bytearray(), 0
        return text


@dataclass
class _ActorLog:
    actor_id: str
    class_name: str
    pid: int
    file: logging.Handler
    lock: int = -1  # the fd holding ``<id>.lock``: the log is live (another daemon's prune keeps it)
    pending: list[pb.OutputLine] = field(default_factory=list)
    pending_bytes: int = 0
    tokens: float = FORWARD_BURST
    refilled: float = field(default_factory=time.monotonic)
    dropped: int = 0


class OutputRelay:
    """Per-actor log files and forwarding of output lines. The worker daemon's loop only.

    ``emit`` gets one ``ActorOutput`` message per flush (the daemon puts it on its session); a
    message holds at most 500 lines and about ``FORWARD_MAX_BYTES`` of text.
    """

    def __init__(
        self,
        emit: Callable[[pb.ActorOutput], None],
        log_dir: Path | None = None,
        *,
        max_bytes: int = DEFAULT_LOG_BYTES,
        backups: int = BACKUPS,
        forward: bool = True,
    ) -> None:
        self.emit = emit
        self.log_dir = log_dir or default_log_dir()
        self.max_bytes = max_bytes
        self.backups = backups
        self.forward = forward
        self._streams: dict[str, _ActorLog] = {}
        self._flush_handle: Any = None

    def line(self, actor_id: str, class_name: str, pid: int, text: str, stderr: bool) -> None:
        self.lines(actor_id, class_name, pid, [text], stderr)

    def lines(self, actor_id: str, class_name: str, pid: int, texts: list[str], stderr: bool) -> None:
        """Lines the actor printed, in order: all to its log file (one write), and to its owner
        as far as the rate limit allows (the rest are counted and said so)."""
        if not texts:
            return
        s = self._streams.get(actor_id) or self._open(actor_id, class_name, pid)
        try:
            s.file.emit(logging.makeLogRecord({"msg": "\n".join(texts), "args": None}))
        except Exception:  # noqa: BLE001 - a full disk must not stop the actor's output
            pass
        if not self.forward:
            return
        now = time.monotonic()
        s.tokens = min(FORWARD_BURST, s.tokens + (now - s.refilled) * FORWARD_LINES_PER_S)
        s.refilled = now
        sent = min(len(texts), int(s.tokens))
        s.tokens -= sent
        s.dropped += len(texts) - sent
        for text in texts[:sent]:
            if len(text) > FORWARD_MAX_LINE:
                text = text[:FORWARD_MAX_LINE] + f" [... {len(text) - FORWARD_MAX_LINE} more characters]"
            s.pending.append(pb.OutputLine(text=text, stderr=stderr))
            s.pending_bytes += len(text) if text.isascii() else len(text.encode())
            if len(s.pending) >= 500 or s.pending_bytes >= FORWARD_MAX_BYTES:
                self._flush_one(s)
        if (s.pending or s.dropped) and self._flush_handle is None:
            import asyncio

            self._flush_handle = asyncio.get_running_loop().call_later(FLUSH_AFTER_S, self.flush)

    def flush(self) -> None:
        self._flush_handle = None
        for s in list(self._streams.values()):
            self._flush_one(s)

    def _flush_one(self, s: _ActorLog) -> None:
        if s.dropped:
            s.pending.append(
                pb.OutputLine(
                    text=f"[actorrt: {s.dropped} lines not forwarded (over {FORWARD_LINES_PER_S:g} lines/s); "
                    f"'actorrt logs {s.actor_id}' has them all]",
                    stderr=True,
                )
            )
            s.dropped = 0
        if s.pending:
            lines, s.pending, s.pending_bytes = s.pending, [], 0
            self.emit(pb.ActorOutput(actor_id=s.actor_id, class_name=s.class_name, pid=s.pid, lines=lines))

    def actor_ended(self, actor_id: str) -> None:
        """Forward what is pending and close the log file (it stays readable)."""
        s = self._streams.pop(actor_id, None)
        if s is None:
            return
        self._flush_one(s)
        s.file.close()
        if s.lock >= 0:
            (self.log_dir / f"{_safe(actor_id)}.lock").unlink(missing_ok=True)
            os.close(s.lock)  # its flock goes with it

    def close(self) -> None:
        if self._flush_handle is not None:
            self._flush_handle.cancel()
            self._flush_handle = None
        for actor_id in list(self._streams):
            self.actor_ended(actor_id)

    def _open(self, actor_id: str, class_name: str, pid: int) -> _ActorLog:
        _rpc.private_dir(self.log_dir)
        self._prune()
        handler = logging.handlers.RotatingFileHandler(
            self.log_dir / f"{_safe(actor_id)}.log",
            maxBytes=self.max_bytes,
            backupCount=self.backups,
            encoding="utf-8",
            delay=True,
        )
        handler.setFormatter(logging.Formatter("%(message)s"))
        s = _ActorLog(actor_id, class_name, pid, handler, _hold(self.log_dir / f"{_safe(actor_id)}.lock"))
        self._streams[actor_id] = s
        return s

    def _prune(self) -> None:
        """Keep the newest ``MAX_ACTOR_LOGS`` logs of the folder, which every daemon of this
        ``ACTORRT_HOME`` shares: a live actor's (its ``.lock`` held, here or by another daemon)
        is never removed, however quiet."""
        try:
            logs = sorted(self.log_dir.glob("*.log"), key=lambda p: p.stat().st_mtime)
        except OSError:
            return
        for old in logs[: max(0, len(logs) - MAX_ACTOR_LOGS + 1)]:
            lock = old.with_suffix(".lock")
            if old.stem in self._streams or _held(lock):
                continue
            for path in [old, *old.parent.glob(old.name + ".*"), lock]:
                path.unlink(missing_ok=True)

    def read(self, actor_id: str, max_bytes: int = DEFAULT_TAIL_BYTES) -> tuple[bool, bytes, bool]:
        s = self._streams.get(actor_id)
        if s is not None:
            s.file.flush()
        return read_log_tail(self.log_dir, actor_id, max_bytes)


def _hold(lock: Path) -> int:
    """Create and flock ``lock`` (the fd, kept while the actor lives), or -1 if that fails."""
    try:
        fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o600)
    except OSError:
        return -1
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return -1
    return fd


def _held(lock: Path) -> bool:
    """Whether a live process holds ``lock`` (``_hold``)."""
    try:
        fd = os.open(lock, os.O_RDWR)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return False
    except BlockingIOError:
        return True
    except OSError:
        return False
    finally:
        os.close(fd)


def read_log_tail(log_dir: Path, actor_id: str, max_bytes: int = DEFAULT_TAIL_BYTES) -> tuple[bool, bytes, bool]:
    """(found, the last ``max_bytes`` of the actor's log over its rotations, truncated)."""
    base = log_dir / f"{_safe(actor_id)}.log"
    rotated = sorted(log_dir.glob(base.name + ".*"), key=lambda p: -int(p.suffix[1:]) if p.suffix[1:].isdigit() else 0)
    files = [p for p in [*rotated, base] if p.exists()]
    if not files:
        return False, b"", False
    chunks: list[bytes] = []
    need = max_bytes if max_bytes > 0 else DEFAULT_TAIL_BYTES
    truncated = False
    newest_first = list(reversed(files))
    for i, path in enumerate(newest_first):
        with open(path, "rb") as f:
            size = f.seek(0, 2)
            if size > need:
                f.seek(size - need)
                chunks.append(f.read(need))
                truncated = True
                break
            f.seek(0)
            data = f.read()
        chunks.append(data)
        need -= len(data)
        if need <= 0 and i < len(newest_first) - 1:
            truncated = True
            break
    return True, b"".join(reversed(chunks)), truncated


def _safe(actor_id: str) -> str:
    return "".join(ch for ch in actor_id if ch.isalnum() or ch in "-_") or "unknown"


# ---- structured logs of the daemons ----------------------------------------------------------

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
    """``2026-01-02T03:04:05.678Z INFO actorrt.master actor died actor_id=3f.. cause="..."``."""

    def format(self, record: logging.LogRecord) -> str:
        ts = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z"
        parts = [ts, record.levelname, record.name, record.getMessage()]
        for key in _FIELDS:
            value = record.__dict__.get(key)
            if value not in (None, ""):
                text = str(value)
                parts.append(f"{key}={json.dumps(text) if (' ' in text or '=' in text or not text) else text}")
        line = " ".join(parts)
        if record.exc_info:
            line += " exc=" + json.dumps(self.formatException(record.exc_info))
        return line


class JsonFormatter(logging.Formatter):
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


def answer_log_read(output: OutputRelay, cmd: pb.ReadActorLog) -> pb.ActorLog:
    """The worker's answer to the master's ``ReadActorLog``: at most ``MAX_LOG_ANSWER_BYTES`` of
    the log's tail, whatever was asked, so the event never breaks the worker's session."""
    try:
        max_bytes = min(cmd.max_bytes or DEFAULT_TAIL_BYTES, MAX_LOG_ANSWER_BYTES)
        found, data, truncated = output.read(cmd.actor_id, max_bytes)
    except OSError:
        found, data, truncated = False, b"", False
    return pb.ActorLog(request_id=cmd.request_id, actor_id=cmd.actor_id, found=found, data=data, truncated=truncated)
