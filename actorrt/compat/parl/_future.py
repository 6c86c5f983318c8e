"""``FutureObject``: what a method of a ``remote_class(wait=False)`` object returns."""

from __future__ import annotations

import concurrent.futures
import threading
from collections.abc import Callable
from typing import Any

from actorrt.compat.parl.exceptions import FutureFunctionError, FutureGetRepeatedlyError, FutureObjectEmpty

__all__ = ["FutureObject"]


class FutureObject:
    """The value of one call, once it is there: ``get()`` it, once.

    ``get(block=True, timeout=None)`` waits for it; with ``block=False`` (``get_nowait()``) or
    once ``timeout`` seconds pass without it, ``FutureObjectEmpty``. A second ``get`` after the
    value was returned raises ``FutureGetRepeatedlyError``. A call that failed raises
    ``FutureFunctionError`` (its cause the remote error), and so do the object's later uses:
    PARL resets a remote object after an error. Any thread.
    """

    def __init__(
        self, name: str, future: concurrent.futures.Future[Any], outcome: Callable[[], Any], keep: Any = None
    ) -> None:
        self._name = name
        self._future = future
        self._outcome = outcome  # the value, or raises the error PARL shows for this call
        self._keep = keep  # the remote object's proxy: it lives until the value is taken
        self._lock = threading.Lock()
        self._taken = False

    def get(self, block: bool = True, timeout: float | None = None) -> Any:
        if timeout is not None and timeout <= 0:
            raise ValueError(f"FutureObject.get: timeout must be > 0 seconds or None, got {timeout!r}")
        with self._lock:
            if self._taken:
                raise FutureGetRepeatedlyError()
            if not self._future.done():
                if not block:
                    raise FutureObjectEmpty()
                concurrent.futures.wait([self._future], timeout)
                if not self._future.done():
                    raise FutureObjectEmpty()
            self._taken = True
            try:
                return self._outcome()
            finally:
                self._keep = None

    def get_nowait(self) -> Any:
        """``get(block=False)``: the value if it is there, else ``FutureObjectEmpty``."""
        return self.get(block=False)

    def empty(self) -> bool:
        """True while the value is not there (False does not promise that ``get`` will not wait:
        another thread may take it first)."""
        return not self._future.done()

    def __repr__(self) -> str:
        state = "taken" if self._taken else "ready" if self._future.done() else "pending"
        return f"<FutureObject {self._name} ({state})>"


def failed(name: str, error: BaseException) -> FutureFunctionError:
    """The ``FutureFunctionError`` a failed ``wait=False`` call raises, ``error`` its cause."""
    wrapped = FutureFunctionError(name)
    wrapped.__cause__ = error
    return wrapped
