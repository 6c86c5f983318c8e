"""One typed dataclass per entry point, parsed from the command line.

Each field is documented by a string literal right below it (an attribute docstring) or by
``field(metadata={"help": ...})``; :func:`parse_config` refuses undocumented fields, so ``--help``
always explains every option.

    @dataclass
    class Config:
        lr: float = 3e-4
        \"\"\"Adam learning rate.\"\"\"

    config = parse_config(Config)          # python example.py --lr 1e-3
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import dataclasses
import inspect
import itertools
import os
import sys
import textwrap
import types
import typing
from collections.abc import Callable, Iterator, Sequence
from typing import Any, TypeVar

__all__ = ["field_docs", "parse_config", "user_errors"]

T = TypeVar("T")


def field_docs(cls: type) -> dict[str, str]:
    """Map field name -> documentation (``metadata['help']`` or the attribute docstring)."""
    docs: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        if not dataclasses.is_dataclass(klass):
            continue
        try:
            tree = ast.parse(textwrap.dedent(inspect.getsource(klass)))
        except (OSError, TypeError):
            continue
        body = tree.body[0].body if tree.body and isinstance(tree.body[0], ast.ClassDef) else []
        for stmt, nxt in itertools.pairwise(body):
            if (
                isinstance(stmt, ast.AnnAssign)
                and isinstance(stmt.target, ast.Name)
                and isinstance(nxt, ast.Expr)
                and isinstance(nxt.value, ast.Constant)
                and isinstance(nxt.value.value, str)
            ):
                docs[stmt.target.id] = " ".join(nxt.value.value.split())
    for f in dataclasses.fields(cls):
        if "help" in f.metadata:
            docs[f.name] = f.metadata["help"]
    return docs


def _scalar_type(tp: Any) -> tuple[Any, bool]:
    """``(base type, optional)`` for ``X`` or ``X | None``."""
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if len(args) == 1:
            return args[0], True
    return tp, False


def _parser_for(base: Any, optional: bool) -> Callable[[str], Any]:
    def parse(text: str) -> Any:
        if optional and text.lower() in ("none", "null", ""):
            return None
        return base(text)

    parse.__name__ = getattr(base, "__name__", str(base))
    return parse


class _HelpFormatter(argparse.RawDescriptionHelpFormatter, argparse.ArgumentDefaultsHelpFormatter):
    """The description as written (its example commands one per line), and every default."""


def _count(base: Any) -> Callable[[str], Any]:
    """An int option's parser: a count, a size or a port is never negative."""

    def parse(text: str) -> Any:
        value = base(text)
        if value < 0:
            raise argparse.ArgumentTypeError(f"must be >= 0, got {value}")
        return value

    return parse


@contextlib.contextmanager
def user_errors(prog: str | None = None) -> Iterator[None]:
    """Around a training script's work: an error ends it with one line, ``PROG: error: ...``, and
    exit status 2 (a bad ``--restore`` file, an unknown env id, an unreachable ``--address``),
    not a traceback; ``RL_TRACEBACK=1`` lets the traceback through. Ctrl-C ends it with 130."""
    name = prog or os.path.basename(sys.argv[0] or "rl")
    try:
        yield
    except KeyboardInterrupt:
        print(f"{name}: stopped", file=sys.stderr, flush=True)
        raise SystemExit(130) from None
    except Exception as e:
        if os.environ.get("RL_TRACEBACK"):
            raise
        message = str(e).strip().splitlines()[-1] if str(e).strip() else ""
        print(f"{name}: error: {type(e).__name__}: {message} (RL_TRACEBACK=1 shows where)", file=sys.stderr, flush=True)
        raise SystemExit(2) from None


def parse_config(cls: type[T], argv: Sequence[str] | None = None, description: str | None = None) -> T:
    """Build an ``argparse`` parser from the dataclass ``cls`` and return the parsed instance.

    ``--field-name VALUE`` for int/float/str (``none`` for optional fields; an int is never
    negative), ``--flag`` / ``--no-flag`` for bools, one of the choices for a ``Literal`` of
    strings. Raises ``TypeError`` for an undocumented or unsupported field.
    """
    if not dataclasses.is_dataclass(cls):
        raise TypeError(f"{cls!r} is not a dataclass")
    hints = typing.get_type_hints(cls)
    docs = field_docs(cls)
    parser = argparse.ArgumentParser(
        description=description or (inspect.getdoc(cls) or ""),
        formatter_class=_HelpFormatter,
    )
    for f in dataclasses.fields(cls):
        if not f.init:
            continue
        if f.name not in docs:
            raise TypeError(f"{cls.__name__}.{f.name} has no documentation")
        flag = "--" + f.name.replace("_", "-")
        if f.default is not dataclasses.MISSING:
            default = f.default
        elif f.default_factory is not dataclasses.MISSING:
            default = f.default_factory()
        else:
            raise TypeError(f"{cls.__name__}.{f.name} has no default")
        base, optional = _scalar_type(hints[f.name])
        if base is bool:
            parser.add_argument(
                flag, dest=f.name, action=argparse.BooleanOptionalAction, default=default, help=docs[f.name]
            )
        elif base in (int, float, str):
            parse = _parser_for(_count(int) if base is int else base, optional)
            parse.__name__ = base.__name__
            parser.add_argument(flag, dest=f.name, type=parse, default=default, help=docs[f.name])
        elif typing.get_origin(base) is typing.Literal and all(isinstance(c, str) for c in typing.get_args(base)):
            parser.add_argument(flag, dest=f.name, choices=typing.get_args(base), default=default, help=docs[f.name])
        else:
            raise TypeError(f"{cls.__name__}.{f.name}: unsupported type {hints[f.name]!r}")
    return cls(**vars(parser.parse_args(argv)))


def use_torch_threads(threads: int | None = None) -> int:
    """Use ``threads`` torch threads in this process (default ``RL_TORCH_THREADS``, else 1) and
    return the number. Called where a training run starts, never on import: tiny nets get slower
    with two threads on small machines, and collectors run many processes side by side."""
    import torch

    n = threads if threads is not None else int(os.environ.get("RL_TORCH_THREADS", "1"))
    torch.set_num_threads(n)
    return n
