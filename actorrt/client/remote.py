"""``@remote_class``: marks a class whose instances live in an actor host process."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any, Generic, Protocol, TypeVar, cast, overload

from actorrt.client.cluster import current_cluster
from actorrt.client.future import CallFuture, spawn
from actorrt.client.handle import ActorHandle
from actorrt.client.options import ActorOptions, options_of

__all__ = ["RemoteClass", "remote_class"]

T = TypeVar("T")


class RemoteClass(Protocol[T]):
    """What ``@remote_class`` makes of a class ``T``: still ``T``, plus ``remote``/``options``."""

    def __call__(self, *args: Any, **kwargs: Any) -> T: ...

    def remote(self, *args: Any, **kwargs: Any) -> CallFuture[ActorHandle[T]]: ...

    def options(self, **overrides: Any) -> _Factory[T]: ...


class _Factory(Generic[T]):
    """Creates actors of ``cls`` with given options."""

    def __init__(self, cls: type[T], options: ActorOptions) -> None:
        self._cls = cls
        self._options = options

    def remote(self, *args: Any, **kwargs: Any) -> CallFuture[ActorHandle[T]]:
        """Place an actor on a free slot and construct it there, now; a future of its handle."""
        cluster = current_cluster()
        cls = self._cls
        if options_of(cls) != self._options:
            cls = type(
                cls.__name__,
                (cls,),
                {"_actorrt_options": self._options, "__qualname__": cls.__qualname__, "__module__": cls.__module__},
            )
        return spawn(cluster.loop, lambda: cluster.create_actor(cls, args, kwargs))

    def options(self, **overrides: Any) -> _Factory[T]:
        """The same class with some options changed: ``Cls.options(num_cpus=2).remote()``.

        Besides the decorator's options: ``name`` (unique in the cluster while the actor lives;
        ``actorrt.get_actor(name)`` finds it), ``lifetime="detached"`` (it outlives its creator
        and its handles, until ``kill``), ``scheduling="spread"`` (the node with the most free
        cpus; the default packs), ``node`` (a worker id from ``status``: place there only).
        """
        unknown = set(overrides) - set(ActorOptions.__dataclass_fields__)
        if unknown:
            raise TypeError(
                f"options: unknown option(s) {sorted(unknown)}; known: {sorted(ActorOptions.__dataclass_fields__)}"
            )
        return _Factory(self._cls, replace(self._options, **overrides))


class _RemoteDescriptor:
    """``Cls.remote`` / ``Cls.options``, bound to the class they are read from."""

    def __init__(self, attr: str) -> None:
        self.attr = attr

    def __get__(self, obj: Any, owner: type) -> Callable[..., Any]:
        factory: _Factory[Any] = _Factory(owner, options_of(owner))
        method: Callable[..., Any] = getattr(factory, self.attr)
        return method


@overload
def remote_class(cls: type[T], /) -> RemoteClass[T]: ...


@overload
def remote_class(
    *,
    num_cpus: int = 1,
    num_gpus: int = 0,
    max_memory_mb: int | None = None,
    max_concurrency: int = 1,
    placement_timeout: float | None = None,
    max_restarts: int = 0,
) -> Callable[[type[T]], RemoteClass[T]]: ...


def remote_class(
    cls: type[T] | None = None,
    /,
    *,
    num_cpus: int = 1,
    num_gpus: int = 0,
    max_memory_mb: int | None = None,
    max_concurrency: int = 1,
    placement_timeout: float | None = None,
    max_restarts: int = 0,
) -> Any:
    """Make ``cls`` creatable as an actor: ``handle = await Cls.remote(*args)``.

    The class itself is unchanged and still usable locally; ``Cls.remote`` and ``Cls.options``
    are added. Options: ``num_cpus``/``num_gpus`` reserved on one node, ``max_memory_mb`` (the
    actor is stopped past it), ``max_concurrency`` (how many ``async def`` calls may interleave),
    ``placement_timeout`` (seconds to wait for a free slot; default the connection's),
    ``max_restarts`` (how often the actor is constructed again, with the same arguments, when
    its process dies; -1: forever. Calls in flight then fail with ``ActorDiedError``; later
    calls wait for the new instance).
    """
    options = ActorOptions(num_cpus, num_gpus, max_memory_mb, max_concurrency, placement_timeout, max_restarts)

    def wrap(target: type[T]) -> RemoteClass[T]:
        if not isinstance(target, type):
            raise TypeError(f"remote_class decorates classes, not {type(target).__name__}")
        # What this decorator is for: attributes the class did not declare (mypy cannot see them).
        target._actorrt_options = options  # type: ignore[attr-defined]
        target.remote = _RemoteDescriptor("remote")  # type: ignore[attr-defined]
        target.options = _RemoteDescriptor("options")  # type: ignore[attr-defined]
        return cast("RemoteClass[T]", target)  # the class, with remote/options added just above

    return wrap(cls) if cls is not None else wrap
