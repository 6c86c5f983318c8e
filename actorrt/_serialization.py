"""cloudpickle with pickle protocol 5; large buffers travel out of band, never re-pickled.

Classes and functions from the user's script and from local, non-installed modules travel by
value (``cloudpickle.register_pickle_by_value``), so nothing needs installing on workers beyond
actorrt. All functions here are synchronous and thread-safe.
"""

from __future__ import annotations

import functools
import os
import pickle
import site
import sys
import sysconfig
from pathlib import Path
from typing import Any, Callable

import cloudpickle

from actorrt import _shm
from actorrt._errors import SerializationError
from actorrt.v1 import common_pb2

__all__ = ["dumps", "loads", "dump_args", "payload_size", "shared_names", "ship_local_modules", "EMPTY"]

EMPTY = common_pb2.Payload()
NO_ARGS: tuple[tuple[()], dict[str, Any]] = ((), {})


# Out-of-band buffers adding up to at least this much skip the protobuf message and go
# hand-encoded (``_wire``) when they travel inline: one copy instead of four.
RAW_MIN = 1 << 20


def pickle_parts(value: Any) -> tuple[bytes, list[memoryview]]:
    """The pickle and its out-of-band buffers as contiguous byte views (not copied: they are the
    value's own memory, so encode them before the value can change)."""
    buffers: list[pickle.PickleBuffer] = []
    data = cloudpickle.dumps(value, protocol=5, buffer_callback=buffers.append)
    return data, [b.raw() for b in buffers]


def to_payload(data: bytes, raws: list[memoryview]) -> common_pb2.Payload:
    # protobuf takes bytes only (not memoryview): one copy per buffer.
    return common_pb2.Payload(pickle=data, buffers=[r.tobytes() for r in raws])


def dumps(value: Any, pool: _shm.Pool | None = None) -> common_pb2.Payload:
    """Pickle ``value``; raises whatever pickling raises.

    With a ``pool``, out-of-band buffers of at least ``_shm.THRESHOLD`` bytes are copied into
    its shared-memory segments (``shared``, ``pooled``) instead of travelling inline; the
    segments stay busy until the receiver releases them (or the caller does, if the payload is
    never sent). A buffer the pool cannot take travels inline."""
    buffers: list[pickle.PickleBuffer] = []
    data = cloudpickle.dumps(value, protocol=5, buffer_callback=buffers.append)
    if not buffers:
        return common_pb2.Payload(pickle=data)
    inline: list[bytes] = []
    shared: list[common_pb2.SharedBuffer] = []
    for i, b in enumerate(buffers):
        raw = b.raw()
        if pool is not None and raw.nbytes >= _shm.THRESHOLD:
            try:
                name = pool.put(raw)
            except OSError:
                pass
            else:
                shared.append(common_pb2.SharedBuffer(index=i, name=name, size=raw.nbytes, pooled=True))
                continue
        # protobuf takes bytes only (not memoryview): one copy per inline buffer.
        inline.append(raw.tobytes())
    return common_pb2.Payload(pickle=data, buffers=inline, shared=shared)


def shared_names(payload: common_pb2.Payload) -> list[str]:
    return [s.name for s in payload.shared]


def payload_size(payload: common_pb2.Payload) -> int:
    """Bytes the payload carries: its encoded size (a few bytes of framing over the data; reading
    ``payload.buffers`` instead would copy every buffer) plus its shared-memory buffers."""
    return payload.ByteSize() + sum(s.size for s in payload.shared)


def describe_size(n: int) -> str:
    return f"{n / 2**20:.1f} MiB" if n >= 2**20 else f"{n} bytes"


def _never(name: str) -> None:
    return None


def loads(payload: common_pb2.Payload, on_release: Callable[[str], None] = _never) -> Any:
    """Unpickle a payload. Out-of-band buffers come back writable: inline ones by one copy each,
    shared-memory ones as maps (no copy). ``on_release(name)`` runs, on whichever thread lets go
    of the value, when a pooled segment is no longer used; single-use files are unlinked
    whether or not this succeeds."""
    if payload.shared:
        return pickle.loads(payload.pickle, buffers=_take_buffers(payload, on_release))
    if payload.buffers:
        return pickle.loads(payload.pickle, buffers=[bytearray(b) for b in payload.buffers])
    return pickle.loads(payload.pickle)


def loads_streamed(data: bytes, buffers: list[bytearray]) -> Any:
    """Unpickle a streamed payload (``Payload.streamed``) on its received, writable buffers."""
    return pickle.loads(data, buffers=buffers)


def _take_buffers(payload: common_pb2.Payload, on_release: Callable[[str], None]) -> list[Any]:
    total = len(payload.buffers) + len(payload.shared)
    out: list[Any] = [None] * total
    try:
        for s in payload.shared:
            if s.index >= total or out[s.index] is not None:
                raise ValueError(f"bad shared-memory buffer index {s.index}")
            out[s.index] = _shm.map_pooled(s.name, s.size, on_release) if s.pooled else _shm.take(s.name, s.size)
    except BaseException:
        _shm.unlink(s.name for s in payload.shared if not s.pooled)
        raise
    inline = iter(payload.buffers)
    for i in range(total):
        if out[i] is None:
            out[i] = bytearray(next(inline))
    return out


def dump_args(
    what: str, args: tuple[Any, ...], kwargs: dict[str, Any], pool: _shm.Pool | None = None
) -> common_pb2.Payload:
    """Pickle call arguments, or raise ``SerializationError`` naming the argument that failed.
    ``pool`` as in ``dumps``."""
    if not args and not kwargs:
        return EMPTY
    try:
        return dumps((args, kwargs), pool)
    except Exception as e:  # noqa: BLE001 - find the culprit, then re-raise with its name
        _raise_culprit(what, args, kwargs, e)
        raise  # unreachable


def dump_args_parts(what: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[bytes, list[memoryview]]:
    """``pickle_parts`` of call arguments; raises ``SerializationError`` as ``dump_args``."""
    try:
        return pickle_parts((args, kwargs))
    except Exception as e:  # noqa: BLE001
        _raise_culprit(what, args, kwargs, e)
        raise  # unreachable


def _raise_culprit(what: str, args: tuple[Any, ...], kwargs: dict[str, Any], e: Exception) -> None:
    for i, arg in enumerate(args):
        _check_one(what, f"argument {i}", arg, e)
    for name, arg in kwargs.items():
        _check_one(what, f"argument {name!r}", arg, e)
    raise SerializationError(f"arguments of {what} cannot be pickled: {e}") from e


def load_args(
    payload: common_pb2.Payload, on_release: Callable[[str], None] = _never
) -> tuple[tuple[Any, ...], dict[str, Any]]:
    if not payload.pickle:
        return NO_ARGS
    args, kwargs = loads(payload, on_release)
    return args, kwargs


def _check_one(what: str, name: str, value: Any, original: Exception) -> None:
    try:
        cloudpickle.dumps(value, protocol=5, buffer_callback=lambda b: None)
    except Exception as e:  # noqa: BLE001
        raise SerializationError(
            f"{name} of {what} ({type(value).__module__}.{type(value).__qualname__}) "
            f"cannot be pickled: {e}"
        ) from original


# ---- code shipping -------------------------------------------------------------------------

_local_verdicts: dict[str, bool] = {}


@functools.cache
def _installed_roots() -> tuple[str, ...]:
    """Folders whose modules every actor host of this environment can import: the standard
    library, site-packages, and folders that .pth files add (legacy editable installs)."""
    roots = {sysconfig.get_path(k) for k in ("stdlib", "platstdlib", "purelib", "platlib")}
    sites = set(site.getsitepackages()) | {site.getusersitepackages()}
    roots |= sites
    for folder in sites:
        for pth in Path(folder).glob("*.pth") if os.path.isdir(folder) else ():
            try:
                lines = pth.read_text().splitlines()
            except OSError:
                continue
            for line in lines:
                line = line.strip()
                if line and not line.startswith(("#", "import ", "import\t")):
                    roots.add(os.path.join(folder, line) if not os.path.isabs(line) else line)
    return tuple(os.path.realpath(r) + os.sep for r in roots if r)


@functools.cache
def _distributed_names() -> frozenset[str]:
    """Top-level modules that installed distributions provide (editable installs included)."""
    import importlib.metadata

    return frozenset(importlib.metadata.packages_distributions())


def _is_local(top: str) -> bool:
    """True when the top-level module ``top`` is the user's own code that a worker may lack:
    not stdlib, not part of an installed distribution, not under site-packages."""
    if top in sys.stdlib_module_names or top in sys.builtin_module_names or top == "actorrt":
        return False
    if top in _distributed_names():
        return False
    module = sys.modules.get(top)
    spec = getattr(module, "__spec__", None)
    if module is None or spec is None:
        return False
    origin = spec.origin if spec.has_location else None
    if origin is None and spec.submodule_search_locations:
        origin = next(iter(spec.submodule_search_locations), None)
    if not origin:
        return False
    return not os.path.realpath(origin).startswith(_installed_roots())


def ship_local_modules() -> None:
    """Register every imported local module for pickling by value. Cheap when nothing is new."""
    fresh = [name for name in list(sys.modules) if "." not in name and name not in _local_verdicts]
    if not fresh:
        return
    for name in fresh:
        local = _is_local(name)
        _local_verdicts[name] = local
        if local and name != "__main__":
            cloudpickle.register_pickle_by_value(sys.modules[name])
