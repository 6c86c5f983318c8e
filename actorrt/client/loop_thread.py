"""``LoopThread``: an event loop of its own on a background thread, for ``with connect()``.

A plain script has no running loop: its cluster connection runs on this thread's (uvloop's
when it is installed), and ``CallFuture.result()`` blocks only the caller's thread.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

from actorrt.common.loop import new_event_loop

__all__ = ["LoopThread"]

T = TypeVar("T")


class LoopThread:
    """A daemon thread running one event loop, from ``start`` until ``stop``."""

    def __init__(self, name: str = "actorrt-loop") -> None:
        self.name = name
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def start(self) -> asyncio.AbstractEventLoop:
        """Start the thread (caller's thread); its loop, running once this returns."""
        started = threading.Event()

        def run() -> None:
            loop = new_event_loop()
            asyncio.set_event_loop(loop)
            self._loop = loop
            started.set()
            loop.run_forever()
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.close()

        self._thread = threading.Thread(target=run, name=self.name, daemon=True)
        self._thread.start()
        started.wait()
        assert self._loop is not None  # set by the thread before ``started``
        return self._loop

    @property
    def alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def run(self, work: Coroutine[Any, Any, T], timeout_s: float | None = None) -> T:
        """Run ``work`` on the loop and wait for it (caller's thread, never the loop's). Raises
        what it raised, or TimeoutError after ``timeout_s``."""
        assert self._loop is not None, "the loop thread was not started"
        return asyncio.run_coroutine_threadsafe(work, self._loop).result(timeout_s)

    def stop(self) -> None:
        """Stop the loop and wait (10 s at most) for the thread to end; idempotent."""
        if self._thread is not None and self._loop is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)
            self._thread = None
