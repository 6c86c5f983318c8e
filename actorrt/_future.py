"""``CallFuture``: what every remote operation returns. Await it, or block on ``.result()``.

A CallFuture is an ``asyncio.Future`` bound to the cluster's event loop. From that loop, await
it. From any other thread (a plain, non-async script), ``result(timeout)`` blocks that thread
until the value arrives; calling ``result()`` on the loop's own thread before the value is there
raises instead of deadlocking.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, TypeVar

__all__ = ["CallFuture", "get", "spawn"]

T = TypeVar("T")


class CallFuture(asyncio.Future[T]):
    def result(self, timeout: float | None = None) -> T:
        """The value; blocks this thread (never the loop's) until it is there.

        Raises the call's error, ``TimeoutError`` after ``timeout`` seconds, or ``RuntimeError``
        when called on the loop's own thread before the value is there.
        """
        if self.done():  # also how every await ends (asyncio's Task asks a subclass for result())
            return asyncio.Future.result(self)
        loop = self.get_loop()
        if _on_loop_thread(loop):
            raise RuntimeError("CallFuture.result() would block the event loop it waits for; use 'await'")
        ready = threading.Event()
        loop.call_soon_threadsafe(self.add_done_callback, lambda _: ready.set())
        if not ready.wait(timeout):
            raise TimeoutError(f"no result within {timeout}s")
        return asyncio.Future.result(self)


def _on_loop_thread(loop: asyncio.AbstractEventLoop) -> bool:
    try:
        return asyncio.get_running_loop() is loop
    except RuntimeError:
        return False


def spawn(loop: asyncio.AbstractEventLoop, make: Callable[[], Awaitable[T]]) -> CallFuture[T]:
    """Start ``make()`` on ``loop`` now, from any thread; its outcome lands in a CallFuture."""
    fut: CallFuture[T] = CallFuture(loop=loop)

    def start() -> None:
        task = asyncio.ensure_future(make())

        def settle(t: asyncio.Future[T]) -> None:
            if fut.done():
                return
            if t.cancelled():
                fut.cancel()
            elif (error := t.exception()) is not None:
                fut.set_exception(error)
            else:
                fut.set_result(t.result())

        task.add_done_callback(settle)
        fut.add_done_callback(lambda f: task.cancel() if f.cancelled() else None)

    if _on_loop_thread(loop):
        start()
    else:
        loop.call_soon_threadsafe(start)
    return fut


def get(futures: Iterable[CallFuture[Any]] | CallFuture[Any], timeout: float | None = None) -> Any:
    """Block until one future or each of many is done; their values (PARL/Ray ``get`` habit)."""
    if isinstance(futures, CallFuture):
        return futures.result(timeout)
    return [f.result(timeout) for f in futures]
