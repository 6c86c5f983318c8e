"""``CallFuture``: what every remote operation returns. Await it, or block on ``.result()``. And
``get``, ``wait`` and ``as_completed``, over many futures.

A CallFuture is an ``asyncio.Future`` bound to the event loop of the cluster connection that
made it. Await it on that loop (exactly asyncio's own await: the hot path of every call), or on
any other running loop, say an actor's, whose methods run on its host's loop while a client of
the cluster runs on a loop thread of its own: there the await goes through a future of the
awaiting loop that takes the outcome (``call_soon_threadsafe``), and cancelling the awaiting
side cancels the CallFuture. From any other thread (a plain, non-async script),
``result(timeout)`` blocks that thread until the value arrives; calling ``result()`` on the
loop's own thread before the value is there raises instead of deadlocking.

``wait`` and ``as_completed`` take futures of any loops: CallFutures, or any asyncio future.
"""

from __future__ import annotations

import asyncio
import collections
import functools
import threading
import time
from _thread import get_ident as _get_ident
from collections.abc import AsyncIterator, Awaitable, Callable, Generator, Iterable, Iterator
from typing import Any, Generic, TypeVar

__all__ = ["CallFuture", "Completions", "as_completed", "get", "spawn", "wait"]

T = TypeVar("T")
F = TypeVar("F", bound="asyncio.Future[Any]")

_get_running_loop = asyncio._get_running_loop  # the C function: None when no loop runs here
# asyncio's own methods, looked up once: they run on the hot path of every await.
_future_done = asyncio.Future.done
_future_result = asyncio.Future.result

# The last (loop, thread) where an await found the future's loop running on its own thread:
# one tuple, replaced whole, so that threads recording at once never mix their halves. Asking
# for the running loop costs ~100 ns (a getpid() per call); this check, ~40 ns. If that loop
# has since moved to another thread, an await of its future on the old thread takes asyncio's
# own path and fails as it always did ("attached to a different loop").
_seen: tuple[asyncio.AbstractEventLoop | None, int] = (None, 0)


class CallFuture(asyncio.Future[T]):
    # The handle copies its call's arguments carry (actor id, token): settled if the call fails
    # without an answer (``_handle``).
    copies: list[tuple[str, str]] | None = None

    def __await__(self) -> Generator[Any, None, T]:
        """On this future's own loop (or once it is done), asyncio's own await. On another
        running loop, await a future of that loop that takes this one's outcome."""
        seen_loop, seen_thread = _seen
        if (self._loop is seen_loop and _get_ident() == seen_thread) or _future_done(self):
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

        def wake(_: asyncio.Future[T]) -> None:
            ready.set()

        loop.call_soon_threadsafe(self.add_done_callback, wake)
        if not ready.wait(timeout):
            try:  # a thread polling a long call must not pile up callbacks on it
                loop.call_soon_threadsafe(self.remove_done_callback, wake)
            except RuntimeError:  # the loop is closed
                pass
            raise TimeoutError(f"no result within {timeout}s")
        return _future_result(self)

    def cancel(self, msg: Any | None = None) -> bool:
        """Cancel the call's future. From a thread other than its loop's (a plain script after
        ``result(timeout)`` ran out), the cancel is done on the loop, in turn with the reply
        that may be settling it there: asyncio's futures are not thread-safe. True unless it
        was done already."""
        loop = self._loop
        if _get_running_loop() is loop or _future_done(self):
            return super().cancel(msg)
        try:
            loop.call_soon_threadsafe(functools.partial(asyncio.Future.cancel, self, msg))
        except RuntimeError:  # the loop is closed: nothing settles it any more
            return super().cancel(msg)
        return True


def _await_elsewhere(fut: CallFuture[T]) -> Generator[Any, None, T]:
    """``fut.__await__`` when the last (loop, thread) seen is not this one's."""
    global _seen
    running = _get_running_loop()
    if running is None:  # driven by hand, not by a loop: as asyncio does
        return iter(fut)
    if running is fut._loop:
        _seen = (running, _get_ident())
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


# ---- many futures: wait, as_completed ---------------------------------------------------------


def _checked(what: str, futures: Iterable[F], timeout: float | None) -> list[F]:
    """``futures`` as a list, each an asyncio future (a CallFuture or any other) given once."""
    if isinstance(futures, asyncio.Future):
        raise TypeError(f"{what}() takes a list of futures, not one future: {what}([fut])")
    items = list(futures)
    first_at: dict[int, int] = {}
    for i, fut in enumerate(items):
        if not isinstance(fut, asyncio.Future):
            raise TypeError(
                f"{what}(): futures[{i}] is a {type(fut).__module__}.{type(fut).__qualname__}, not a future "
                "(a CallFuture, or any asyncio future)"
            )
        j = first_at.setdefault(id(fut), i)
        if j != i:
            raise ValueError(f"{what}(): futures[{i}] is the same future as futures[{j}]; give each future once")
    if timeout is not None and not timeout >= 0:  # also NaN
        raise ValueError(f"{what}(): timeout must be None or >= 0 seconds, got {timeout!r}")
    return items


def _by_loop(futures: list[F]) -> dict[asyncio.AbstractEventLoop, list[F]]:
    groups: dict[asyncio.AbstractEventLoop, list[F]] = {}
    for fut in futures:
        groups.setdefault(fut.get_loop(), []).append(fut)
    return groups


def _add_callbacks(futures: list[F], callback: Callable[[F], None]) -> None:
    """On the futures' loop: ``callback(fut)`` when each is done (soon, for those that are)."""
    for fut in futures:
        fut.add_done_callback(callback)


def _remove_callbacks(futures: list[F], callback: Callable[[F], None]) -> None:
    """On the futures' loop: undo ``_add_callbacks`` for those not done yet."""
    for fut in futures:
        fut.remove_done_callback(callback)


_IDLE_LOOP: asyncio.AbstractEventLoop | None = None


def _idle_loop() -> asyncio.AbstractEventLoop:
    """A closed loop, for futures that are done when they are made and have no loop to belong
    to (``wait([])`` in a plain script): a done future is read without its loop."""
    global _IDLE_LOOP
    if _IDLE_LOOP is None:
        _IDLE_LOOP = asyncio.new_event_loop()
        _IDLE_LOOP.close()
    return _IDLE_LOOP


def wait(
    futures: Iterable[F], num_returns: int = 1, timeout: float | None = None
) -> CallFuture[tuple[list[F], list[F]]]:
    """Wait until ``num_returns`` of ``futures`` are done, or ``timeout`` seconds pass; Ray's
    ``wait``. A future of ``(done, pending)``: await it, or ``.result()`` in a plain script.

    ``done`` holds exactly ``num_returns`` done futures once that many are done (the first ones
    in the order given, if more are), fewer when the timeout ends the wait first; ``pending`` the
    rest. Both keep the order given. A future that failed or was cancelled is done too: its
    error is raised when you await it or ask for its ``result()``, never by ``wait``.
    ``timeout=0`` looks once and returns at once; ``None`` waits as long as it takes. The
    futures may belong to different event loops (clusters, actor hosts).

    Raises at once: ``TypeError`` for one future instead of a list, or an item that is not a
    future; ``ValueError`` for a future given twice, ``num_returns`` below 1 or above the number
    of futures, or a negative timeout. An empty list gives ``([], [])``.
    """
    items = _checked("wait", futures, timeout)
    if not isinstance(num_returns, int) or isinstance(num_returns, bool):
        raise TypeError(f"wait(): num_returns must be an int, got {num_returns!r}")
    if items and not 1 <= num_returns <= len(items):
        raise ValueError(
            f"wait(): num_returns must be between 1 and the number of futures ({len(items)}), got {num_returns}"
        )
    # The loop the answer belongs to: the caller's, when some futures live there (no hop for
    # async code on the cluster's loop); else the first future's, so that .result() works in a
    # sync function that runs on any other loop, and await works everywhere.
    running = _get_running_loop()
    if running is not None and any(fut.get_loop() is running for fut in items):
        home = running
    elif items:
        home = items[0].get_loop()
    else:
        home = running or _idle_loop()
    answer: CallFuture[tuple[list[F], list[F]]] = CallFuture(loop=home)
    if not items or timeout == 0 or sum(fut.done() for fut in items) >= num_returns:
        # Safe from any thread: nothing can be waiting on a future nobody has seen yet.
        answer.set_result(_split(items, num_returns))
        return answer
    _Waiting(items, num_returns, timeout, answer).start()
    return answer


def _split(futures: list[F], num_returns: int) -> tuple[list[F], list[F]]:
    """(the first ``num_returns`` done futures, the others), each in the order given."""
    done: list[F] = []
    pending: list[F] = []
    for fut in futures:
        (done if len(done) < num_returns and fut.done() else pending).append(fut)
    return done, pending


class _Waiting(Generic[F]):
    """One ``wait`` under way. Everything but ``start`` runs on the loop of its answer (``home``):
    completions on other loops are relayed there."""

    def __init__(self, futures: list[F], num_returns: int, timeout: float | None, answer: CallFuture[Any]) -> None:
        self.futures = futures
        self.num_returns = num_returns
        self.needed = num_returns  # completions still to hear of
        self.timeout = timeout
        self.answer = answer
        self.home = answer.get_loop()
        self.timer: asyncio.TimerHandle | None = None
        self.groups = _by_loop(futures)

    def start(self) -> None:
        """Any thread: arm the timeout, then hear of each completion (in this order on home)."""
        _call_on(self.home, self._arm)
        for loop, futures in self.groups.items():
            _call_on(loop, _add_callbacks, futures, self._hook(loop))

    def _hook(self, loop: asyncio.AbstractEventLoop) -> Callable[[F], None]:
        return self._one_done if loop is self.home else self._relay

    def _relay(self, fut: F) -> None:  # on the future's own loop
        try:
            self.home.call_soon_threadsafe(self._one_done, fut)
        except RuntimeError:  # home is closed: nobody waits any more
            pass

    def _arm(self) -> None:
        if self.timeout is not None:
            self.timer = self.home.call_later(self.timeout, self._finish)
        self.answer.add_done_callback(self._stop)  # finished, or cancelled by its awaiter

    def _one_done(self, fut: F) -> None:
        self.needed -= 1
        if self.needed <= 0:
            self._finish()

    def _finish(self) -> None:
        if not self.answer.done():
            self.answer.set_result(_split(self.futures, self.num_returns))

    def _stop(self, answer: CallFuture[Any]) -> None:
        """Cancel the timer and take the callbacks off the futures still pending, so that waiting
        again and again on what is left (``done, pending = await wait(pending)``) stays linear."""
        if self.timer is not None:
            self.timer.cancel()
        for loop, futures in self.groups.items():
            try:
                _call_on(loop, _remove_callbacks, futures, self._hook(loop))
            except RuntimeError:  # that loop is closed: its futures call nobody any more
                pass


def as_completed(futures: Iterable[F], timeout: float | None = None) -> Completions[F]:
    """The futures in the order they complete: ``async for fut in as_completed(futures)`` on any
    running loop, or ``for fut in ...`` in a plain script. Each comes done: ``await fut`` or
    ``fut.result()`` gives its value or raises its error (a failed future is completed too).

    ``timeout`` (seconds, from this call) bounds the whole iteration: once it passes, the next
    step raises ``TimeoutError``, naming how many futures are not done. The futures may belong
    to different event loops. Raises at once as ``wait`` does for what is not a list of distinct
    futures, or a negative timeout.
    """
    return Completions(_checked("as_completed", futures, timeout), timeout)


def _wake_waiter(loop: asyncio.AbstractEventLoop, waiter: asyncio.Future[None]) -> None:
    """Set ``waiter`` (a future of ``loop``) from any thread."""

    def wake() -> None:
        if not waiter.done():
            waiter.set_result(None)

    try:
        _call_on(loop, wake)
    except RuntimeError:  # that loop is closed: nobody iterates any more
        pass


class Completions(Generic[F]):
    """What ``as_completed`` returns: an async iterator (any running loop) and a plain one (a
    thread that runs none of the futures' loops) over the futures as they complete. One
    iteration at a time; the futures are watched from the moment it is made."""

    def __init__(self, futures: list[F], timeout: float | None) -> None:
        self._total = len(futures)
        self._left = len(futures)  # not yielded yet
        self._timeout = timeout
        self._deadline = None if timeout is None else time.monotonic() + timeout
        self._lock = threading.Lock()  # completions arrive on each future's own loop thread
        self._done: collections.deque[F] = collections.deque()  # completed, not yielded yet
        self._wake: Callable[[], None] | None = None  # the iteration waiting for the next one
        groups = _by_loop(futures)
        self._loops = set(groups)
        for loop, members in groups.items():
            _call_on(loop, _add_callbacks, members, self._completed)

    def _completed(self, fut: F) -> None:  # on the future's own loop
        with self._lock:
            self._done.append(fut)
            wake, self._wake = self._wake, None
        if wake is not None:
            wake()

    def _next_done(self, wake: Callable[[], None] | None) -> F | None:
        """The next completed future, or None (then ``wake`` is called at the next completion).
        Raises ``LookupError`` once every future has been yielded."""
        with self._lock:
            if self._done:
                self._left -= 1
                return self._done.popleft()
            if not self._left:
                raise LookupError
            self._wake = wake
            return None

    def _remaining(self) -> float | None:
        return None if self._deadline is None else max(0.0, self._deadline - time.monotonic())

    def _timed_out(self) -> TimeoutError:
        with self._lock:
            self._wake = None
            left = self._left - len(self._done)
        return TimeoutError(f"as_completed(): {left} of {self._total} futures not done within {self._timeout}s")

    def __aiter__(self) -> AsyncIterator[F]:
        return self

    async def __anext__(self) -> F:
        loop = asyncio.get_running_loop()
        while True:
            waiter: asyncio.Future[None] = loop.create_future()
            try:
                fut = self._next_done(functools.partial(_wake_waiter, loop, waiter))
            except LookupError:
                raise StopAsyncIteration from None
            if fut is not None:
                return fut
            try:
                async with asyncio.timeout(self._remaining()):
                    await waiter
            except TimeoutError:
                if self._done:  # one came just as time ran out
                    continue
                raise self._timed_out() from None

    def __iter__(self) -> Iterator[F]:
        return self

    def __next__(self) -> F:
        while True:
            ready = threading.Event()
            try:
                fut = self._next_done(ready.set)
            except LookupError:
                raise StopIteration from None
            if fut is not None:
                return fut
            if _get_running_loop() in self._loops:
                with self._lock:
                    self._wake = None
                raise RuntimeError(
                    "as_completed(): a plain 'for' here would block the event loop its futures need; use 'async for'"
                )
            if not ready.wait(self._remaining()):
                if self._done:  # one came just as time ran out
                    continue
                raise self._timed_out()
