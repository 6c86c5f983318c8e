"""``remote_class``: PARL's decorator, and the proxy objects its classes make.

Calling a decorated class creates the object on the cluster (an actorrt actor) and returns its
proxy. PARL's rules, as PARL users rely on them:

- **Methods or attributes**: the remote object's own ``__dict__`` decides, as in PARL. A name
  the object has as an attribute (an instance attribute, even one that shadows a method of its
  class; a property; a class constant) reads as its value, through ``actorrt.get_attr``; any
  other name is a method. The object's attribute names (``actorrt.list_attrs``) come with its
  construction and again behind every call and every write, so an attribute a method adds is
  seen at the next read.
- **wait=True** (the default): a method call returns its value. **wait=False**: it returns a
  ``FutureObject`` at once, construction runs in the background, and the calls of one object
  run in the order they were made (they are pipelined; PARL sent each after the one before had
  finished). Attribute reads return the value in both modes.
- **Lifetime**: the object is released (its actor stopped, its slot freed) when its proxy is
  garbage-collected: a ``weakref.finalize`` on the proxy drops the object's actor handle, and
  actorrt's reference counting releases the actor once no handle to it remains and its calls
  are answered; the collector never waits. After a remote error (an exception in a method, an
  attribute that is not there, a value that cannot be pickled) the object is reset, as PARL's
  job exits: the error is raised, the actor is stopped at once, and later uses raise again.
- **Errors** are PARL's (``exceptions``), each with the actorrt error as its ``__cause__``.

Not shared with ``actorrt``'s own handles: this layer keeps the object's attribute names and its
reset state, which an ``ActorHandle`` does not have.
"""

from __future__ import annotations

import concurrent.futures
import logging
import os
import threading
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar, Literal, TypeVar, overload

from actorrt.client.handle import member_kinds
from actorrt.client.options import MAX_MEMORY_MB
from actorrt.common.errors import ActorDiedError, ClusterConnectionError, PlacementError, SerializationError
from actorrt.common.errors import RemoteError as ActorRemoteError
from actorrt.compat.parl import _hooks
from actorrt.compat.parl._backend import memory_limit_mb
from actorrt.compat.parl._client import GlobalClient, get_global_client
from actorrt.compat.parl._future import FutureObject, failed
from actorrt.compat.parl.exceptions import (
    RemoteAttributeError,
    RemoteDeserializeError,
    RemoteError,
    RemoteSerializeError,
    ResourceError,
)

__all__ = ["RemoteProxy", "remote_class"]

log = logging.getLogger("actorrt.compat.parl")

T = TypeVar("T")
RESERVED_PREFIX = "_xparl"  # PARL's reserved prefix: names the proxy keeps for itself


@dataclass(frozen=True)
class _Spec:
    """What ``remote_class`` was given: the user's class and PARL's options."""

    cls: type
    wait: bool
    max_memory: float | None
    n_gpu: int
    methods: frozenset[str]
    forwards: bool
    """The class defines ``__getattr__``: a name it does not define is sent as a call anyway
    (the remote object's ``__getattr__`` decides, as in PARL)."""


def _method_names(cls: type) -> frozenset[str]:
    """The methods ``cls`` defines (or inherits), as actor handles see them."""
    return frozenset(name for name, is_method in member_kinds(cls).items() if is_method)


def _parl_error(name: str, e: BaseException, cls_name: str) -> BaseException:
    """PARL's error for what the runtime raised; ``e`` itself when it is this process's own (an
    argument that cannot be pickled: nothing was sent)."""
    if isinstance(e, PlacementError):
        return ResourceError(f"cannot create a {cls_name}: {e}")
    if isinstance(e, ActorRemoteError):
        text = f"{e.type_name}: {e.message}\ntraceback:\n{e.remote_traceback}"
        if isinstance(e.cause, SerializationError):
            kind = RemoteDeserializeError if "could not be unpickled" in e.message else RemoteSerializeError
            return kind(name, text)
        if isinstance(e.cause, AttributeError) or e.type_name == "builtins.AttributeError":
            return RemoteAttributeError(name, text)
        return RemoteError(name, text)
    if isinstance(e, ActorDiedError):
        return RemoteError(name, f"the remote {cls_name} object is gone: {e.cause}")
    if isinstance(e, ClusterConnectionError):
        return RemoteError(name, f"the connection to the cluster is gone: {e}")
    return e


class _RemoteObject:
    """One remote object as this process sees it: its reference, its attribute names, whether
    it was reset or released. Any thread."""

    def __init__(self, spec: _Spec, client: GlobalClient) -> None:
        self.spec = spec
        self.client = client
        self.pid = os.getpid()
        self.ref: Any = None
        self.attrs: frozenset[str] = frozenset()
        self.constructed: concurrent.futures.Future[None] = concurrent.futures.Future()
        self.refresh: concurrent.futures.Future[Any] | None = None  # the latest listing in flight
        self.broken: tuple[str, BaseException] | None = None  # the call that failed, PARL's error
        self.released = False
        self.abandoned = False  # its proxy went away before it was constructed
        self.lock = threading.RLock()  # RLock: a finalizer may run on a thread that holds it

    @property
    def cls_name(self) -> str:
        return self.spec.cls.__qualname__

    # ---- construction and release -----------------------------------------------------------

    def construct(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        """Place and construct the object, and read its attribute names. Blocks; raises PARL's
        error (and the object is unusable) when that fails."""
        backend = self.client.backend
        try:
            limit = None
            if self.spec.max_memory is not None:
                limit = memory_limit_mb(self.spec.max_memory, backend.baseline_bytes())
            ref = backend.create(self.spec.cls, args, kwargs, self.spec.n_gpu, limit)
        except BaseException as e:
            error = _parl_error("__init__", e, self.cls_name)
            if error is e and isinstance(e, SerializationError):  # PARL's, for constructor arguments
                error = RemoteSerializeError("__init__", f"the arguments cannot be pickled: {e}")
            self.broken = ("__init__", error)
            self.constructed.set_result(None)
            if error is e:
                raise
            raise error from e
        with self.lock:
            self.ref = ref
            abandoned = self.abandoned
        self.client.actor_num.add(1)
        try:
            if abandoned:  # its proxy was collected meanwhile (wait=False): nobody will use it
                self.release()
                return
            self.attrs = frozenset(self.outcome("__init__", backend.call(ref, "list", "")))
        finally:
            self.constructed.set_result(None)

    def construct_in_background(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        """``construct`` for ``wait=False``: its error shows at the object's next use."""
        try:
            self.construct(args, kwargs)
        except BaseException as e:  # noqa: BLE001 - kept in self.broken, raised at the next use
            log.error("creating a remote %s failed: %s", self.cls_name, e)

    def release(self, now: bool = False) -> None:
        """Let the remote object go, once: its handle is dropped, and the actor is released when
        its calls are answered (``now``: stopped at once, a reset). Never blocks: the proxy's
        finalizer calls it."""
        with self.lock:
            if self.released or os.getpid() != self.pid:
                return
            if self.ref is None:
                self.abandoned = True
                return
            self.released = True
            ref, self.ref = self.ref, None
        self.client.actor_num.add(-1)
        if now:
            self.client.backend.kill(ref)
        self.client.backend.release(ref)

    def fail(self, name: str, e: BaseException) -> BaseException:
        """PARL's error for a failed use of the object; a remote one resets the object."""
        error = _parl_error(name, e, self.cls_name)
        if error is not e:
            self.reset(name, error)
        return error

    def reset(self, name: str, error: BaseException) -> None:
        """``name`` failed with ``error``: the object is stopped, and its later uses raise (what
        PARL does when a job raises: the job exits). Only the first failure counts."""
        with self.lock:
            if self.broken is not None:
                return
            self.broken = (name, error)
        if not self.spec.wait:  # PARL prints it from its background thread
            log.error("remote %s object: %s failed: %s", self.cls_name, name, error)
        self.release(now=True)

    # ---- uses -------------------------------------------------------------------------------

    def usable(self, name: str) -> None:
        """Raise why the object cannot be used now, if it cannot."""
        if os.getpid() != self.pid:
            raise RemoteError(
                name,
                f"this remote {self.cls_name} object belongs to process {self.pid}; "
                "a forked process creates remote objects of its own",
            )
        if not self.constructed.done():  # wait=False: what it is used for comes after its construction
            concurrent.futures.wait([self.constructed])
        if self.broken is not None:
            failed_name, error = self.broken
            if not self.spec.wait:
                raise failed(failed_name, error)
            if failed_name == "__init__":
                raise RemoteError(name, f"this remote {self.cls_name} object was never constructed") from error
            raise RemoteError(
                name,
                f"this remote {self.cls_name} object was reset after `{failed_name}` failed "
                "(PARL resets a remote object after an error): create a new one",
            ) from error
        if self.client.closed:
            raise RemoteError(name, "its client was closed (parl.disconnect()), and its remote objects with it")

    def track(self, listing: concurrent.futures.Future[Any]) -> None:
        """The object's attribute names as ``listing`` will say (it left after the calls before it)."""
        self.refresh = listing

        def take(done: concurrent.futures.Future[Any]) -> None:
            if not done.cancelled() and done.exception() is None:
                self.attrs = frozenset(done.result())

        listing.add_done_callback(take)

    def outcome(self, name: str, fut: concurrent.futures.Future[Any]) -> Any:
        """The value of a call, or PARL's error for it (blocks)."""
        try:
            return fut.result()
        except BaseException as e:
            error = self.fail(name, e)
            if error is e:
                raise
            raise error from e

    def future_outcome(self, name: str, fut: concurrent.futures.Future[Any]) -> Any:
        """What ``FutureObject.get`` gives for a ``wait=False`` call that is done."""
        try:
            return fut.result()
        except BaseException as e:
            error = self.fail(name, e)
            if error is e:
                raise
            raise failed(name, error)  # noqa: B904 - its cause is the PARL error, set by failed()

    def get(self, name: str, proxy: RemoteProxy) -> Any:
        """``proxy.name``: the attribute's value, or the method to call (which keeps ``proxy``,
        and so the remote object, alive while it is held: ``Actor().run()`` runs)."""
        self.usable(name)
        if name not in self.attrs and name not in self.spec.methods and self.refresh is not None:
            concurrent.futures.wait([self.refresh])  # a call in flight may be adding it
        if name in self.attrs:
            read = self.client.backend.call(self.ref, "get", name)
            # wait=False: PARL reads through a future too, and a failed read is its FutureFunctionError
            return self.outcome(name, read) if self.spec.wait else self.future_outcome(name, read)
        return _Method(self, name, proxy)

    def set(self, name: str, value: Any) -> None:
        """``proxy.name = value``: set on the remote object (wait=False: in the background)."""
        self.usable(name)
        listing = self.client.backend.call(self.ref, "set", name, (value,))  # its error, if it failed
        self.track(listing)
        if self.spec.wait:
            self.outcome(name, listing)
        else:
            listing.add_done_callback(lambda done: self._settle_quietly(name, done))

    def call(self, name: str, args: tuple[Any, ...], kwargs: dict[str, Any], proxy: RemoteProxy) -> Any:
        """A method call; with ``wait=False`` its ``FutureObject`` keeps ``proxy`` alive until
        its value is taken."""
        self.usable(name)
        if name not in self.spec.methods and not self.spec.forwards:  # no such method or attribute: PARL's error
            error = RemoteAttributeError(
                name,
                f"AttributeError: {self.cls_name} object has no attribute {name!r} "
                f"(its attributes: {sorted(self.attrs)}; its methods: {sorted(self.spec.methods)})",
            )
            self.reset(name, error)
            if self.spec.wait:
                raise error
            done: concurrent.futures.Future[Any] = concurrent.futures.Future()
            done.set_exception(error)
            return FutureObject(name, done, lambda: _raise(failed(name, error)), keep=proxy)
        backend = self.client.backend
        fut = backend.call(self.ref, "call", name, args, kwargs)  # an argument that cannot be pickled: here
        listing = backend.call(self.ref, "list", "")  # right behind it: the names the call may have added
        self.track(listing)
        if self.spec.wait:  # the value and the object's names, together, as PARL's answer has them
            value = self.outcome(name, fut)
            concurrent.futures.wait([listing])
            return value
        fut.add_done_callback(lambda done: self._settle_quietly(name, done))
        return FutureObject(name, fut, lambda: self.future_outcome(name, fut), keep=proxy)

    def _settle_quietly(self, name: str, done: concurrent.futures.Future[Any]) -> None:
        """A ``wait=False`` call ended: a remote error resets the object now, whoever reads it."""
        if not done.cancelled() and (error := done.exception()) is not None:
            self.fail(name, error)


def _raise(error: BaseException) -> Any:
    raise error


class _Method:
    """``proxy.method``: calling it sends the call. Holds the proxy, as PARL's method wrappers
    hold their remote object: the object lives while one of its methods is held or running."""

    __slots__ = ("_name", "_obj", "_proxy")

    def __init__(self, obj: _RemoteObject, name: str, proxy: RemoteProxy) -> None:
        self._obj = obj
        self._name = name
        self._proxy = proxy

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._obj.call(self._name, args, kwargs, self._proxy)

    def __repr__(self) -> str:
        return f"<remote method {self._obj.cls_name}.{self._name}>"


class RemoteProxy:
    """Base of the classes ``remote_class`` makes: an instance is a remote object's proxy."""

    __slots__ = ("__weakref__", "_xparl_obj")
    _xparl_spec: ClassVar[_Spec]
    _xparl_obj: _RemoteObject

    def __new__(cls, *args: Any, **kwargs: Any) -> Any:
        if os.environ.get("ACTORRT_ACTOR_ID"):
            # inside a remote object (an actor's process), as PARL's jobs do: a plain local
            # instance (no __init__ of the proxy's follows: it is not a RemoteProxy)
            return cls._xparl_spec.cls(*args, **kwargs)
        return super().__new__(cls)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        for key in kwargs:
            if key.startswith(RESERVED_PREFIX):
                raise ValueError(f"{key!r}: names starting with {RESERVED_PREFIX!r} are reserved (as in PARL)")
        spec = type(self)._xparl_spec
        obj = _RemoteObject(spec, get_global_client())
        object.__setattr__(self, "_xparl_obj", obj)
        finalizer = weakref.finalize(self, obj.release)  # released when the proxy is collected
        finalizer.atexit = False  # at exit the client closes, and its actors stop with it
        if spec.wait:
            obj.construct(args, kwargs)
        else:
            threading.Thread(
                target=obj.construct_in_background, args=(args, kwargs), name=f"create-{spec.cls.__name__}", daemon=True
            ).start()

    def __getattr__(self, name: str) -> Any:
        if name.startswith(("__", RESERVED_PREFIX)):
            raise AttributeError(name)
        return self._xparl_obj.get(name, self)

    def __setattr__(self, name: str, value: Any) -> None:
        if name.startswith(("__", RESERVED_PREFIX)):
            raise AttributeError(
                f"{name!r}: names starting with {RESERVED_PREFIX!r} are reserved (as in PARL), "
                "and names starting with '__' are not set remotely"
            )
        self._xparl_obj.set(name, value)

    def __dir__(self) -> list[str]:
        obj = self._xparl_obj
        return sorted(obj.attrs | obj.spec.methods)

    def __repr__(self) -> str:
        obj = self._xparl_obj
        state = "reset" if obj.broken else "released" if obj.released else "live"
        return f"<remote {obj.cls_name} object of {obj.client.master_address} ({state})>"

    def __reduce__(self) -> Any:
        raise TypeError("a PARL remote object cannot be pickled or sent to another process (as in PARL)")


def _make(cls: type, wait: bool, max_memory: float | None, n_gpu: int) -> type:
    if not isinstance(cls, type):
        raise TypeError(f"remote_class decorates classes, not {type(cls).__name__}")
    if max_memory is not None and (isinstance(max_memory, bool) or not isinstance(max_memory, (int, float))):
        raise TypeError(f"remote_class: max_memory must be a number of MB or None, got {max_memory!r}")
    if max_memory is not None and not 0 < max_memory <= MAX_MEMORY_MB:  # NaN fails it too
        raise ValueError(
            f"remote_class: max_memory must be a finite number of MB in (0, {MAX_MEMORY_MB}], got {max_memory!r:.60}"
        )
    if isinstance(n_gpu, bool) or not isinstance(n_gpu, int) or n_gpu < 0:
        raise ValueError(f"remote_class: n_gpu must be an int >= 0, got {n_gpu!r}")
    spec = _Spec(cls, bool(wait), max_memory, n_gpu, _method_names(cls), hasattr(cls, "__getattr__"))
    if _hooks.installed():  # a script the runner runs: its hooks go to the object's host with the class
        setattr(cls, _hooks.HOOKS_ATTR, _hooks.HostHooks())
    namespace = {
        "__slots__": (),
        "__module__": cls.__module__,
        "__qualname__": cls.__qualname__,
        "__doc__": cls.__doc__,
        "__wrapped__": cls,
        "_xparl_spec": spec,
    }
    return type(cls.__name__, (RemoteProxy,), namespace)


# For type checkers: a wait=True class reads as the class itself (its methods return their
# values); a wait=False one as Any (its methods return FutureObjects).
@overload
def remote_class(cls: type[T], /) -> type[T]: ...


@overload
def remote_class(
    *, wait: Literal[True] = True, max_memory: float | None = None, n_gpu: int = 0
) -> Callable[[type[T]], type[T]]: ...


@overload
def remote_class(
    *, wait: bool, max_memory: float | None = None, n_gpu: int = 0
) -> Callable[[type[Any]], type[Any]]: ...


def remote_class(
    cls: type[T] | None = None, /, *, wait: bool = True, max_memory: float | None = None, n_gpu: int = 0
) -> Any:
    """PARL's ``@parl.remote_class``: instances of the class live on the cluster.

    ``@remote_class`` or ``@remote_class(wait=True, max_memory=None, n_gpu=0)``:

    - ``wait``: True, a method call returns its value; False, it returns a ``FutureObject``.
    - ``max_memory``: MB the object may grow by over its process's memory at start (PARL's
      measure); past it the object is stopped and its next use raises ``RemoteError`` saying so.
      Given to actorrt as ``max_memory_mb`` = a warm actor host's memory (measured once per
      client) + ``max_memory``.
    - ``n_gpu``: GPUs reserved for the object (``CUDA_VISIBLE_DEVICES`` names them there).

    Calling the decorated class creates the object (``connect`` first) and returns its proxy.
    """
    if cls is not None:
        return _make(cls, wait, max_memory, n_gpu)
    return lambda target: _make(target, wait, max_memory, n_gpu)
