"""Actor output on the client's terminal: what the master forwards from the actors this client
owns (``ActorOutput`` notices on its session), printed with each actor's label.

``OutputPrinter`` prints on a thread of its own, so a terminal that blocks never holds the
client's event loop; ``print_actor_output`` is one message's printing.
"""

from __future__ import annotations

import collections
import io
import itertools
import queue
import sys
import threading
import time
from typing import TextIO

from actorrt.common.actor_output import NOTICE_PREFIX, prefix
from actorrt.v1 import master_pb2 as pb

__all__ = ["OutputPrinter", "print_actor_output"]


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
