"""``CallFuture``: what every remote operation returns. Await it, or block on ``.result()``.

A CallFuture is an ``asyncio.Future`` bound to the event loop of the cluster connection that
made it. Await it on that loop (exactly asyncio's own await: the hot path of every call), or on
any other running loop, say an actor's, whose methods run on its host's loop while a client of
the cluster runs on a loop thread of its own: there the await goes through a future of the
awaiting loop that takes the outcome (``call_soon_threadsafe``), and cancelling the awaiting
side cancels the CallFuture. From any other thread (a plain, non-async script),
``result(timeout)`` blocks that thread until the value arrives; calling ``result()`` on the
loop's own thread before the value is there raises instead of deadlocking.
"""

from __future__ import annotations

import asyncio
import threading
from _thread import get_ident as _get_ident
from collections.abc import Awaitable, Callable, Generator, Iterable
from typing import Any, TypeVar

__all__ = ["CallFuture", "get", "spawn"]

T = TypeVar("T")

_get_running_loop = asyncio._get_running_loop  # the C function: None when no loop runs here
# asyncio's own methods, looked up once: they run on the hot path of every await.
_future_done = asyncio.Future.done
_future_result = asyncio.Future.result

# The last (loop, thread) where an await found the future's loop running on its own thread.
# Asking for the running loop costs ~100 ns (a getpid() per call); this check, ~40 ns. If that
# loop has since moved to another thread, an await of its future on the old thread takes
# asyncio's own path and fails as it always did ("attached to a different loop").
_seen_loop: asyncio.AbstractEventLoop | None = None
_seen_thread = 0


class CallFuture(asyncio.Future[T]):
    def __await__(self) -> Generator[Any, None, T]:
        """On this future's own loop (or once it is done), asyncio's own await. On another
        running loop, await a future of that loop that takes this one's outcome."""
        if (self._loop is _seen_loop and _get_ident() == _seen_thread) or _future_done(self):
            return iter(self)  # asyncio's own await: its __iter__ is its __await__
        return _await_elsewhere(self)

    def result(self, timeout: float | None = None) -> T:
        """The value; blocks this thread (never the loop's) until it is there.

        Raises the call's error, ``TimeoutError`` after ``timeout`` seconds, or ``RuntimeError``
        when called on the loop's own thread before the value is there.
        """
        if _future_done(self):  # also how every await ends (asyncio's Task asks a subclass for result())
            return _future_result(self)
        loop = self._loop
        if _get_running_loop() is loop:
            raise RuntimeError("CallFuture.result() would block the event loop it waits for; use 'await'")
        ready = threading.Event()
        loop.call_soon_threadsafe(self.add_done_callback, lambda _: ready.set())
        if not ready.wait(timeout):
            raise TimeoutError(f"no result within {timeout}s")
        return _future_result(self)


def _await_elsewhere(fut: CallFuture[T]) -> Generator[Any, None, T]:
    """``fut.__await__`` when the last (loop, thread) seen is not this one's."""
    global _seen_loop, _seen_thread
    running = _get_running_loop()
    if running is None:  # driven by hand, not by a loop: as asyncio does
        return iter(fut)
    if running is fut._loop:
        _seen_loop, _seen_thread = running, _get_ident()
        return iter(fut)
    return _mirror(fut, running).__await__()


def _mirror(fut: asyncio.Future[T], loop: asyncio.AbstractEventLoop) -> asyncio.Future[T]:
    """A future of ``loop`` (running on this thread) that takes the outcome of ``fut``, a future
    of another loop, once it is done. Cancelling the mirror cancels ``fut``."""
    source = fut.get_loop()
    mirror: asyncio.Future[T] = loop.create_future()

    def send(done: asyncio.Future[T]) -> None:  # on the source loop: read the outcome there
        if done.cancelled():
            outcome: tuple[bool, BaseException | None, Any] = (True, None, None)
        else:
            error = done.exception()
            outcome = (False, error, None if error is not None else done.result())
        try:
            loop.call_soon_threadsafe(_settle, mirror, *outcome)
        except RuntimeError:  # the awaiting loop is closed: nobody waits any more
            pass

    def cancel_source(m: asyncio.Future[T]) -> None:  # on the awaiting loop
        if m.cancelled() and not fut.done():
            try:
                source.call_soon_threadsafe(fut.cancel)
            except RuntimeError:  # the source loop is closed: nothing left to cancel
                pass

    try:
        source.call_soon_threadsafe(fut.add_done_callback, send)
    except RuntimeError as e:
        raise RuntimeError(f"cannot await a future of a closed event loop ({e})") from None
    mirror.add_done_callback(cancel_source)
    return mirror


def _settle(fut: asyncio.Future[Any], cancelled: bool, error: BaseException | None, value: Any) -> None:
    """Give ``fut`` (on its loop) an outcome read elsewhere, unless it has one already."""
    if fut.done():
        return
    if cancelled:
        fut.cancel()
    elif error is not None:
        fut.set_exception(error)
    else:
        fut.set_result(value)


def _on_loop_thread(loop: asyncio.AbstractEventLoop) -> bool:
    return _get_running_loop() is loop


def _call_on(loop: asyncio.AbstractEventLoop, fn: Callable[..., None], *args: Any) -> None:
    """``fn(*args)`` on ``loop``: now when this thread runs it, else soon, from any thread."""
    if _on_loop_thread(loop):
        fn(*args)
    else:
        loop.call_soon_threadsafe(fn, *args)


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

    _call_on(loop, start)
    return fut


def get(futures: Iterable[CallFuture[Any]] | CallFuture[Any], timeout: float | None = None) -> Any:
    """Block until one future or each of many is done; their values (PARL/Ray ``get`` habit)."""
    if isinstance(futures, CallFuture):
        return futures.result(timeout)
    return [f.result(timeout) for f in futures]
