"""Actor output on the worker daemon: every line an actor host prints, relayed and kept.

- ``LineSplitter``: cuts an actor's raw output into lines, keeping at most ``MAX_LINE_BYTES``
  of each (a longer one ends with ``[... N more bytes]``).
- ``OutputRelay``: every line goes to a per-actor log file with rotation under the home
  folder's ``logs/actors``, and, batched, rate-limited and bounded in bytes, to the master as
  an ``ActorOutput`` event, which forwards it to the owning client.
- ``read_log_tail`` and ``answer_log_read``: the tail of a live or dead actor's log, for
  ``actorrt logs`` (the master's ``ReadActorLog``).

Everything runs on the daemon's event loop.
"""

from __future__ import annotations

import asyncio
import fcntl
import logging
import logging.handlers
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from actorrt.common import home
from actorrt.common.actor_output import DEFAULT_TAIL_BYTES
from actorrt.v1 import master_pb2 as pb

__all__ = ["LineSplitter", "OutputRelay", "answer_log_read", "default_log_dir", "read_log_tail"]

DEFAULT_LOG_BYTES = 10 * 2**20  # per file; with BACKUPS rotations kept
BACKUPS = 2
MAX_ACTOR_LOGS = 1000  # per log folder (every daemon of an ACTORRT_HOME shares it); the oldest go first
FORWARD_LINES_PER_S = 1000.0  # to the client; the log file keeps everything
FORWARD_BURST = 5000
FORWARD_MAX_LINE = 8192
FORWARD_MAX_BYTES = 256 * 2**10  # of text in one forwarded ActorOutput message; it flushes then
MAX_LINE_BYTES = 64 * 2**10  # of one output line kept anywhere; the rest is counted, not kept
FLUSH_AFTER_S = 0.05
MAX_LOG_ANSWER_BYTES = 2 * 2**20  # of log data in one ActorLog answer: well under the master's 4 MiB message cap


def default_log_dir() -> Path:
    return home.state_dir() / "logs" / "actors"


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
        home.private_dir(self.log_dir)
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


def answer_log_read(output: OutputRelay, cmd: pb.ReadActorLog) -> pb.ActorLog:
    """The worker's answer to the master's ``ReadActorLog``: at most ``MAX_LOG_ANSWER_BYTES`` of
    the log's tail, whatever was asked, so the event never breaks the worker's session."""
    try:
        max_bytes = min(cmd.max_bytes or DEFAULT_TAIL_BYTES, MAX_LOG_ANSWER_BYTES)
        found, data, truncated = output.read(cmd.actor_id, max_bytes)
    except OSError:
        found, data, truncated = False, b"", False
    return pb.ActorLog(request_id=cmd.request_id, actor_id=cmd.actor_id, found=found, data=data, truncated=truncated)
