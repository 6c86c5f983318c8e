"""cloudpickle with pickle protocol 5: whole values (a constructor's spec, an exception), naming
the argument that cannot be pickled, and code shipping. How calls and replies travel (shared
memory, chunks, size limits) is ``_codec``'s.

Classes and functions from the user's script and from local, non-installed modules travel by
value (``cloudpickle.register_pickle_by_value``), so nothing needs installing on workers beyond
actorrt. All functions here are synchronous and thread-safe.
"""

from __future__ import annotations

import functools
import importlib.metadata
import os
import pickle
import site
import sys
import sysconfig
from pathlib import Path
from typing import Any, NoReturn

import cloudpickle

from actorrt.common.errors import SerializationError
from actorrt.transport import codec as _codec
from actorrt.v1 import common_pb2

__all__ = ["EMPTY", "NO_ARGS", "dumps", "name_culprit", "ship_local_modules"]

EMPTY = common_pb2.Payload()
NO_ARGS: tuple[tuple[()], dict[str, Any]] = ((), {})


def dumps(value: Any, limit: int = 0) -> common_pb2.Payload:
    """Pickle ``value`` whole into one payload, out-of-band buffers inline (a constructor's
    spec, an exception). Calls and replies go through ``_codec.encode``. Raises what pickling
    raises, and ``PayloadTooLargeError`` when the pickle and its buffers add up to more than
    ``limit`` bytes (0: no limit), before any copy."""
    buffers: list[pickle.PickleBuffer] = []
    data = _codec.dumps(value, buffers.append)
    raws = [b.raw() for b in buffers]
    size = len(data) + sum(r.nbytes for r in raws)
    if limit and size > limit:
        raise _codec.PayloadTooLargeError(size, limit, in_band=True)
    # protobuf takes bytes only (not memoryview): one copy per buffer.
    return common_pb2.Payload(pickle=data, buffers=[r.tobytes() for r in raws])


def name_culprit(what: str, args: tuple[Any, ...], kwargs: dict[str, Any], e: Exception) -> NoReturn:
    """Raise ``SerializationError`` naming the argument of ``what`` that could not be pickled
    (``e`` is what pickling them all raised)."""
    for i, arg in enumerate(args):
        _check_one(what, f"argument {i}", arg, e)
    for name, arg in kwargs.items():
        _check_one(what, f"argument {name!r}", arg, e)
    raise SerializationError(f"arguments of {what} cannot be pickled: {e}") from e


def _check_one(what: str, name: str, value: Any, original: Exception) -> None:
    try:
        cloudpickle.dumps(value, protocol=5, buffer_callback=lambda b: None)
    except Exception as e:  # noqa: BLE001 - whatever pickle raises, the culprit is named
        raise SerializationError(
            f"{name} of {what} ({type(value).__module__}.{type(value).__qualname__}) cannot be pickled: {e}"
        ) from original


# ---- code shipping -------------------------------------------------------------------------

_local_verdicts: dict[str, bool] = {}
_modules_seen = 0  # len(sys.modules) when ship_local_modules last looked


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
    return frozenset(importlib.metadata.packages_distributions())


def _is_local(top: str) -> bool:
    """True when the top-level module ``top`` is the user's own code that a worker may lack:
    not stdlib, not part of an installed distribution, not under site-packages."""
    if top in sys.stdlib_module_names or top in sys.builtin_module_names or top == "actorrt":
        return False
    module = sys.modules.get(top)
    spec = getattr(module, "__spec__", None)
    if module is None or spec is None:
        return False
    if getattr(module, "__name__", top) != top:
        return False  # an alias (sys.modules["parl"] is actorrt.compat.parl): judged under its own name
    origin = spec.origin if spec.has_location else None
    if origin is None and spec.submodule_search_locations:
        origin = next(iter(spec.submodule_search_locations), None)
    if not origin or os.path.realpath(origin).startswith(_installed_roots()):
        return False
    # Outside the installed folders: the user's code, or an editable install. Only now ask the
    # distributions' metadata (reading it all takes ~50 ms with a large environment).
    return top == "__main__" or top not in _distributed_names()


def ship_local_modules() -> None:
    """Register every imported local module for pickling by value. Cheap when nothing is new
    (every call's arguments ask: a module imported since the last creation must travel too)."""
    global _modules_seen
    if len(sys.modules) == _modules_seen:
        return
    _modules_seen = len(sys.modules)
    fresh = [name for name in list(sys.modules) if "." not in name and name not in _local_verdicts]
    if not fresh:
        return
    for name in fresh:
        local = _is_local(name)
        _local_verdicts[name] = local
        if local and name != "__main__":
            cloudpickle.register_pickle_by_value(sys.modules[name])
