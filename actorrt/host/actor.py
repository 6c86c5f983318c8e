"""The hosted actor: the constructed user object, how its methods are found, and how many of its
calls run at once (``ConcurrencyLimit``). Host loop only."""

from __future__ import annotations

import asyncio
import collections
import inspect
from collections.abc import Callable
from typing import Any

from actorrt.host.stats import CallStats


class ConcurrencyLimit:
    """At most ``n`` calls of one actor run at once (sync ones inline, async ones as tasks).

    An ``asyncio.Semaphore`` whose uncontended take is a plain call, not a coroutine: it runs
    once per call on the host's hot path. Host loop only.
    """

    __slots__ = ("_waiters", "free")

    def __init__(self, n: int) -> None:
        self.free = n
        self._waiters: collections.deque[asyncio.Future[None]] = collections.deque()

    def take(self) -> bool:
        """Take a slot if one is free and nobody waits for one."""
        if self.free > 0 and not self._waiters:
            self.free -= 1
            return True
        return False

    async def wait_take(self) -> None:
        """Take a slot, waiting in line for one (``give`` hands it over)."""
        if self.take():
            return
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        try:
            await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():
                self.give()  # handed a slot, but cancelled: pass it on
            else:
                self._waiters.remove(waiter)
            raise

    def give(self) -> None:
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return
        self.free += 1


class HostedActor:
    """The constructed user object and the rules for running its methods."""

    def __init__(
        self,
        actor_id: str,
        class_name: str,
        instance: Any,
        max_concurrency: int,
        max_payload_bytes: int = 0,
        stats: CallStats | None = None,
    ) -> None:
        self.actor_id = actor_id
        self.max_payload_bytes = max_payload_bytes
        self.class_name = class_name
        self.instance = instance
        self.max_concurrency = max(1, max_concurrency)
        self.running = ConcurrencyLimit(self.max_concurrency)
        self.stats = stats or CallStats()  # reported to the daemon; see actorrt.host.stats
        self.stats.class_name = class_name
        self.report_fd: int | None = None  # the daemon's statistics pipe
        self._methods: dict[str, tuple[Callable[..., Any], bool]] = {}

    def method(self, name: str) -> tuple[Callable[..., Any], bool]:
        found = self._methods.get(name)
        if found is None:
            if name.startswith("__"):
                raise AttributeError(f"{self.class_name} has no remote method {name!r}")
            fn = getattr(self.instance, name)
            if not callable(fn):
                raise TypeError(
                    f"{self.class_name}.{name} is not a method but an attribute ({type(fn).__qualname__}): "
                    f"read it with actorrt.get_attr(handle, {name!r})"
                )
            found = (fn, inspect.iscoroutinefunction(fn))
            self._methods[name] = found
        return found


def attribute_names(instance: Any) -> list[str]:
    """The names ``getattr`` reads as values on ``instance`` (``CALL_KIND_LIST_ATTRS``), sorted:
    its instance attributes, those that shadow a method of its class included (Python reads the
    instance's first), and its class's properties and other attributes that are not methods.
    Names that start with two underscores are left out."""
    names = {name for name in getattr(instance, "__dict__", {}) if not name.startswith("__")}
    for name in dir(type(instance)):
        if name.startswith("__") or name in names:
            continue
        attr = inspect.getattr_static(instance, name)
        if isinstance(attr, (staticmethod, classmethod)) or inspect.isfunction(attr):
            continue
        if callable(attr) and not isinstance(attr, (property, type)):
            continue  # a method of another kind (a builtin function, a callable object)
        if type(attr).__module__ in ("actorrt.client.remote", "actorrt.client.options"):
            continue  # what @remote_class added: Cls.remote, Cls.options and their options
        if inspect.ismemberdescriptor(attr) and not hasattr(instance, name):
            continue  # a __slots__ entry never set
        names.add(name)
    return sorted(names)
