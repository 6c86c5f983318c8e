"""What ``python -m actorrt.compat.parl SCRIPT.py`` installs for a PARL script, in its own
process and in the actor host of every object it creates there:

- ``import parl`` and ``import parl.X``: ``actorrt.compat.parl`` and its submodules, the very
  module objects (an import hook), so that what a script sends to the cluster pickles by the
  modules' own names and its hosts need nothing to unpickle it;
- ``import gym``, where gym is not installed: gymnasium as PARL's scripts use gym (``_gym``),
  said once;
- numpy 1's ways that numpy 1.24 and 2.0 removed, as they were, said once each at its first
  use: the aliases (``np.int``, ``np.float``...) and ``None`` as a shape (``np.zeros(None)``);
- a ``parl.X`` that is not here fails naming it and pointing to docs/parl.md.

In an actor host the same hooks come with each remote class the script decorated: the runner
sets ``HOOKS_ATTR`` on it (``_proxy``), a value whose unpickling installs them before the object
is constructed (quietly: the script's process said it all).
"""

from __future__ import annotations

import functools
import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import threading
import types
from collections.abc import Callable, Sequence
from typing import Any

__all__ = ["HOOKS_ATTR", "HostHooks", "install", "install_in_host", "installed", "notice", "unknown_name"]

HOOKS_ATTR = "__xparl_runner"
"""The attribute the runner sets on each remote class (``__``: never listed as the object's)."""

DOCS = "docs/parl.md"
_PARL = "actorrt.compat.parl"
_GYM = "actorrt.compat.parl._gym"

_lock = threading.Lock()
_installed = False
_quiet = False
_parl = True  # `parl` is this package (False: PARL's own, with this remote layer: bench/parl_side_by_side.py)
_said: set[str] = set()


def installed() -> bool:
    """Whether this process runs a script through the runner (or hosts an object of one)."""
    return _installed


def notice(key: str, text: str) -> None:
    """Say ``text`` on stderr once per ``key`` (in the script's process; hosts stay quiet)."""
    with _lock:
        if _quiet or key in _said:
            return
        _said.add(key)
    sys.stderr.write(f"actorrt.compat.parl: {text}\n")
    sys.stderr.flush()


def unknown_name(name: str) -> str:
    """The error for a ``parl`` name this layer does not have."""
    return (
        f"{name} is not in actorrt.compat.parl, which stands for parl here: "
        f"{DOCS} lists what it carries and what it leaves out"
    )


# ---- import aliases ----------------------------------------------------------------------------


class _AliasLoader(importlib.abc.Loader):
    """Loads an alias as the module it names: ``sys.modules[alias]`` becomes that very module
    (importlib returns what ``sys.modules`` holds once ``exec_module`` returns)."""

    def __init__(self, target: str, said: Callable[[], None] | None = None) -> None:
        self.target = target
        self.said = said

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType | None:
        return None  # a placeholder, replaced in exec_module

    def exec_module(self, module: types.ModuleType) -> None:
        real = importlib.import_module(self.target)
        sys.modules[module.__name__] = real
        if self.said is not None:
            self.said()


class _Aliases(importlib.abc.MetaPathFinder):
    """First on ``sys.meta_path``: ``parl[.X]`` -> ``actorrt.compat.parl[.X]``; with ``gym``
    mapped, ``gym`` -> ``_gym`` and ``gym.X`` -> ``gymnasium.X``."""

    def __init__(self, parl: bool, gym: bool) -> None:
        self.parl = parl
        self.gym = gym

    def target(self, fullname: str) -> str | None:
        top, _, rest = fullname.partition(".")
        if top == "parl" and self.parl:
            return f"{_PARL}.{rest}" if rest else _PARL
        if top == "gym" and self.gym:
            return f"gymnasium.{rest}" if rest else _GYM
        return None

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: types.ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        real = self.target(fullname)
        if real is None:
            return None
        if real not in sys.modules and importlib.util.find_spec(real) is None:
            if fullname.startswith("gym."):
                raise ModuleNotFoundError(
                    f"{fullname}: gym is gymnasium here (gym is not installed), and gymnasium has no {real}",
                    name=fullname,
                )
            raise ModuleNotFoundError(unknown_name(fullname), name=fullname)
        said = _said_gym if fullname == "gym" else None
        return importlib.util.spec_from_loader(fullname, _AliasLoader(real, said))


def _said_gym() -> None:
    import gymnasium

    notice(
        "gym",
        f"gym is not installed: `import gym` gives gymnasium {gymnasium.__version__} as PARL's scripts use gym "
        f"(old API through parl.env.CompatWrapper, env.seed() through wrappers, Atari ids; {DOCS})",
    )


class _NotHere(importlib.abc.MetaPathFinder):
    """Last on ``sys.meta_path``, asked only when nothing found the module: a name under
    ``actorrt.compat.parl`` that is not there. ``from parl.utils import foo`` looks for
    ``actorrt.compat.parl.utils.foo`` (the real name); the error names it as the script does,
    and Python lets an error for another name than the one it looked for through."""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: types.ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname.startswith(f"{_PARL}."):
            name = "parl." + fullname.removeprefix(f"{_PARL}.")
            raise ModuleNotFoundError(unknown_name(name), name=name)
        return None


# ---- numpy's removed aliases -------------------------------------------------------------------

_NUMPY_REMOVED: dict[str, tuple[str, str]] = {
    # name: (what it was, the numpy release that removed it)
    "int": ("int", "1.24"),
    "float": ("float", "1.24"),
    "complex": ("complex", "1.24"),
    "object": ("object", "1.24"),
    "str": ("str", "1.24"),
    "unicode": ("str", "1.24"),
    "bool8": ("numpy.bool_", "2.0"),
    "int0": ("numpy.intp", "2.0"),
    "uint0": ("numpy.uintp", "2.0"),
    "float_": ("numpy.float64", "2.0"),
    "complex_": ("numpy.complex128", "2.0"),
    "string_": ("numpy.bytes_", "2.0"),
    "unicode_": ("numpy.str_", "2.0"),
    "NaN": ("numpy.nan", "2.0"),
    "NAN": ("numpy.nan", "2.0"),
    "Inf": ("numpy.inf", "2.0"),
    "Infinity": ("numpy.inf", "2.0"),
    "infty": ("numpy.inf", "2.0"),
    "PINF": ("numpy.inf", "2.0"),
}


def _numpy_value(numpy: Any, what: str) -> Any:
    if what.startswith("numpy."):
        return getattr(numpy, what.removeprefix("numpy."))
    return {"int": int, "float": float, "complex": complex, "object": object, "str": str}[what]


def _restore_numpy_aliases() -> None:
    """numpy's module ``__getattr__`` answers the removed aliases (numpy keeps its own for
    everything else); each says once what it gives."""
    try:
        import numpy
    except ImportError:
        return
    previous = numpy.__dict__.get("__getattr__")

    def numpy_getattr(name: str) -> Any:
        if name in _NUMPY_REMOVED and name not in numpy.__dict__:
            what, release = _NUMPY_REMOVED[name]
            notice(f"numpy.{name}", f"np.{name} was removed in numpy {release}; it is {what} here, as it was before")
            return _numpy_value(numpy, what)
        if previous is not None:
            return previous(name)
        raise AttributeError(f"module 'numpy' has no attribute {name!r}")

    numpy.__dict__["__getattr__"] = numpy_getattr  # a module's __getattr__ is looked up in its __dict__
    for name in _NONE_SHAPE:
        numpy.__dict__[name] = _none_shape(name, getattr(numpy, name))


_NONE_SHAPE = ("zeros", "ones", "empty", "full")
"""numpy < 2 took ``shape=None`` for ``()`` (a 0-d array: ``np.zeros(None)``); numpy 2 raises."""


def _none_shape(name: str, make: Callable[..., Any]) -> Callable[..., Any]:
    """numpy's ``name`` (``np.zeros``...) taking ``None`` as the shape ``()`` again, said once."""

    @functools.wraps(make)
    def with_none_shape(shape: Any, *args: Any, **kwargs: Any) -> Any:
        if shape is None:
            notice(
                f"numpy.{name}(None)",
                f"np.{name}(None): numpy 2 refuses None as a shape; () here, as numpy < 2 took it",
            )
            shape = ()
        return make(shape, *args, **kwargs)

    return with_none_shape


# ---- installing --------------------------------------------------------------------------------


def install(quiet: bool = False, parl: bool = True) -> None:
    """Install the hooks in this process, once. ``quiet``: say nothing (an actor host).
    ``parl=False``: leave ``parl`` to what the import system finds (PARL's own package)."""
    global _installed, _quiet, _parl
    with _lock:
        if _installed:
            return
        _installed = True
        _quiet = quiet
        _parl = parl
    gym = importlib.util.find_spec("gym") is None and importlib.util.find_spec("gymnasium") is not None
    sys.meta_path.insert(0, _Aliases(parl=parl, gym=gym))
    if parl:
        sys.meta_path.append(_NotHere())
    _restore_numpy_aliases()


class HostHooks:
    """The value of ``HOOKS_ATTR`` on a remote class: unpickled (with the class, in an actor
    host), it installs this process's hooks there, before the object is constructed."""

    def __init__(self) -> None:
        self.parl = _parl

    def __reduce__(self) -> tuple[Callable[[bool], HostHooks], tuple[bool]]:
        return install_in_host, (self.parl,)

    def __repr__(self) -> str:
        return "<the actorrt.compat.parl runner's hooks>"


def install_in_host(parl: bool = True) -> HostHooks:
    install(quiet=True, parl=parl)
    return HostHooks()
