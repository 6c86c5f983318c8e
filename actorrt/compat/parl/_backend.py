"""Where the PARL layer's remote objects live: an actorrt cluster connection.

``Backend`` is what ``_proxy`` needs from a connection: create an object, send it a call (a
method, an attribute read, an attribute write, a listing of its attributes), let it go or stop
it, measure a warm host's memory, close. Every call answers with a ``concurrent.futures.Future``
whose error is actorrt's own (``RemoteError``, ``ActorDiedError``, ``PlacementError``...);
``_proxy`` turns them into PARL's.

``DirectBackend`` is a plain ``actorrt.connect()`` in this process, on its background loop
thread. A forked child cannot use gRPC inherited from its parent, so there ``_relay`` puts the
same ``DirectBackend`` in a fresh process of its own and speaks to it over a pipe.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import math
import os
import threading
from collections.abc import Sequence
from typing import Any, Literal, Protocol

from actorrt.client.cluster import connect, kill
from actorrt.client.future import CallFuture
from actorrt.client.handle import ActorHandle
from actorrt.client.options import MAX_MEMORY_MB, ActorOptions
from actorrt.client.remote_attrs import call_method, get_attr, list_attrs

__all__ = ["Backend", "CallKind", "DirectBackend", "memory_limit_mb"]

CallKind = Literal["call", "get", "set", "list"]


class Backend(Protocol):
    address: str
    closed: bool

    def create(
        self, cls: type, args: tuple[Any, ...], kwargs: dict[str, Any], num_gpus: int, max_memory_mb: int | None
    ) -> Any:
        """Place and construct an object of ``cls``; a reference for ``call``. Blocks."""
        ...

    def call(
        self, ref: Any, kind: CallKind, name: str, args: tuple[Any, ...] = (), kwargs: dict[str, Any] | None = None
    ) -> concurrent.futures.Future[Any]:
        """Send one call now (in order with the object's other calls). Raises
        ``SerializationError`` at once when an argument cannot be pickled."""
        ...

    def release(self, ref: Any) -> None:
        """This process no longer holds the object (the caller dropped ``ref``): it is released
        once its calls are answered. Returns at once, from any thread, even from a garbage
        collector's finalizer."""
        ...

    def kill(self, ref: Any) -> None:
        """Stop the object now and free its slot (a reset); returns at once, from any thread."""
        ...

    def baseline_bytes(self) -> int:
        """The memory of a warm actor host of the cluster (measured once, then remembered)."""
        ...

    def close(self) -> None: ...


def memory_limit_mb(max_memory: float, baseline_bytes: int) -> int:
    """actorrt's ``max_memory_mb`` for PARL's ``max_memory``: PARL stops a job that grows more
    than ``max_memory`` MB over its memory at start; actorrt stops an actor whose host's process
    tree holds more than ``max_memory_mb``. The warm host's memory plus ``max_memory``, rounded
    up (MB = MiB, as both count), and at most ``MAX_MEMORY_MB`` (the bound ``max_memory`` is
    checked against when the class is decorated: a limit that high is never reached)."""
    return min(MAX_MEMORY_MB, math.ceil(baseline_bytes / 2**20 + max_memory))


class DirectBackend:
    """An ``actorrt.connect(address, files=...)`` of this process; objects are actor handles."""

    def __init__(self, address: str, files: Sequence[str], token: str | None = None) -> None:
        self.address = address
        self.closed = False
        self.pid = os.getpid()
        self.cluster = connect(address, files=files, token=token)
        self.cluster.__enter__()  # its own loop thread; closed by close(), or at exit
        self._baseline: int | None = None
        self._baseline_lock = threading.Lock()
        self._kills: set[CallFuture[None]] = set()  # kills under way (cluster loop only)

    def create(
        self, cls: type, args: tuple[Any, ...], kwargs: dict[str, Any], num_gpus: int, max_memory_mb: int | None
    ) -> ActorHandle[Any]:
        # Given with the creation, never set on the user's class (two threads creating objects
        # of one class with other options must each get theirs; its methods named `remote` or
        # `options` stay the user's).
        options = ActorOptions(num_gpus=num_gpus, max_memory_mb=max_memory_mb)
        placed = asyncio.run_coroutine_threadsafe(
            self.cluster.create_actor(cls, args, kwargs, options), self.cluster.loop
        )
        return placed.result()

    def call(
        self,
        ref: ActorHandle[Any],
        kind: CallKind,
        name: str,
        args: tuple[Any, ...] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> concurrent.futures.Future[Any]:
        if kind == "call":  # by name: a method called like one of the handle's own (actor_id) is the user's
            sent = call_method(ref, name, *args, **(kwargs or {}))
        elif kind == "get":
            sent = get_attr(ref, name)
        elif kind == "set":  # its outcome comes with the next call: the listing right behind it
            setattr(ref, name, args[0])
            sent = list_attrs(ref)
        else:
            sent = list_attrs(ref)
        return self._concurrent(sent)

    def _concurrent(self, sent: CallFuture[Any]) -> concurrent.futures.Future[Any]:
        """The call's outcome in a future any thread may wait on or add callbacks to."""
        out: concurrent.futures.Future[Any] = concurrent.futures.Future()

        def settle(done: asyncio.Future[Any]) -> None:
            if done.cancelled():
                out.cancel()
            elif (error := done.exception()) is not None:
                out.set_exception(error)
            else:
                out.set_result(done.result())

        self.cluster.loop.call_soon_threadsafe(sent.add_done_callback, settle)
        return out

    def release(self, ref: ActorHandle[Any]) -> None:
        """Nothing to do: the handle's own lifetime releases the actor once this process holds
        no handle to it (the caller dropped the last) and its calls are answered."""

    def kill(self, ref: ActorHandle[Any]) -> None:
        if self.closed or os.getpid() != self.pid:
            return  # closing stops every actor anyway; a forked child's copy is not its own

        def start_kill() -> None:
            if not self.cluster.closed:
                killing = kill(ref)
                self._kills.add(killing)
                killing.add_done_callback(self._killed)

        try:
            self.cluster.loop.call_soon_threadsafe(start_kill)
        except RuntimeError:  # the loop closed meanwhile: the connection, and its actors, are gone
            pass

    def baseline_bytes(self) -> int:
        with self._baseline_lock:
            if self._baseline is None:
                from actorrt.compat._probe import MemoryProbe

                probe = self.create(MemoryProbe, (), {}, 0, None)
                try:
                    self._baseline = int(get_attr(probe, "tree_bytes").result(60))
                finally:
                    kill(probe).result(60)
            return self._baseline

    def _killed(self, done: CallFuture[None]) -> None:
        """A kill ended: nobody waits for it, so its error (the cluster closing) is dropped."""
        self._kills.discard(done)
        if not done.cancelled():
            done.exception()

    async def _finish_kills(self, timeout: float) -> None:
        """Let the kills under way end (closing stops the actors anyway; a kill cut off by the
        loop's end would be reported as a task destroyed while pending)."""
        if self._kills:
            _, late = await asyncio.wait(set(self._kills), timeout=timeout)
            for killing in late:
                killing.cancel()

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        if os.getpid() != self.pid:
            return
        loop = self.cluster.loop
        if loop.is_running() and not self.cluster.closed:  # else it is closed already (at exit)
            try:
                asyncio.run_coroutine_threadsafe(self._finish_kills(5.0), loop).result(10)
            except concurrent.futures.TimeoutError:
                pass
        self.cluster.__exit__(None, None, None)
