"""``python -m actorrt.compat.parl SCRIPT.py [ARGS...]``: a PARL script, unchanged, on actorrt.

The script runs as ``python SCRIPT.py ARGS...`` would run it: its folder first on ``sys.path``
(in place of the runner's), ``sys.argv`` ``[SCRIPT.py, ARGS...]``, a ``__main__`` module of its
own with ``__file__`` (absolute), its exit status (``sys.exit(n)``: ``n``; an exception: its
traceback, from the script's first frame, and status 1). Before it starts, ``_hooks`` makes
``import parl`` (and ``parl.X``) this package, ``import gym`` gymnasium where gym is not
installed, and numpy's removed aliases what they were (docs/parl.md).
"""

from __future__ import annotations

import io
import os
import sys
import types
from collections.abc import Callable, Sequence
from types import TracebackType

from actorrt.compat.parl import _hooks

__all__ = ["main", "run_script"]

USAGE = """usage: python -m actorrt.compat.parl SCRIPT.py [ARGS...]

Runs a PARL script as `python SCRIPT.py ARGS...` would, with `import parl` (and parl.utils,
parl.env, ...) resolving to actorrt.compat.parl, and `import gym` to gymnasium where gym is not
installed. Remote objects go to the cluster the script's parl.connect(...) names (actorrt start).
See docs/parl.md."""


def main(argv: Sequence[str] | None = None) -> int:
    """The runner's command line; returns the exit status (the script's own ``sys.exit`` is
    raised through, as Python would end with it)."""
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help"):
        print(USAGE, file=sys.stdout if args else sys.stderr)
        return 0 if args else 2
    script = args[0]
    if not os.path.isfile(script):
        why = "No such file or directory" if not os.path.exists(script) else "not a file"
        print(f"python -m actorrt.compat.parl: can't open file {os.path.abspath(script)!r}: {why}", file=sys.stderr)
        return 2
    return run_script(script, args[1:])


def run_script(script: str, args: Sequence[str]) -> int:
    """Run ``script`` as ``__main__`` with ``args``; 0 when it ends. What it raises goes through,
    and Python prints it as it would for the script (``sys.excepthook`` from the script's first
    frame on) and exits with status 1 (``SystemExit``: its status; Ctrl-C: as Python does)."""
    path = os.path.abspath(script)
    with io.open_code(path) as f:
        source = f.read()
    code = compile(source, path, "exec", dont_inherit=True)
    _hooks.install()
    sys.argv[:] = [script, *args]
    folder = os.path.dirname(os.path.realpath(path))
    if sys.path:
        sys.path[0] = folder  # python -m put the working folder there; python SCRIPT.py puts the script's
    else:
        sys.path.insert(0, folder)
    module = types.ModuleType("__main__")
    module.__file__ = path
    module.__loader__ = None
    sys.modules["__main__"] = module
    sys.excepthook = _FromScript(path, sys.excepthook)
    exec(code, module.__dict__)
    return 0


class _FromScript:
    """``sys.excepthook`` while the script runs: the traceback from the script's first frame on
    (the runner's own frames are left out, as ``python SCRIPT.py`` has none)."""

    def __init__(self, path: str, hook: Callable[[type[BaseException], BaseException, TracebackType | None], object]):
        self.path = path
        self.hook = hook

    def __call__(self, kind: type[BaseException], error: BaseException, tb: TracebackType | None) -> None:
        start = tb
        while start is not None and start.tb_frame.f_code.co_filename != self.path:
            start = start.tb_next
        if start is not None:  # Python prints the exception's own traceback: trimmed there
            error.__traceback__ = tb = start
        self.hook(kind, error, tb)
