"""A mypy plugin: what ``@actorrt.remote_class`` adds to a class, typed.

mypy ignores what a class decorator returns (python/mypy#3135), so without it ``Counter.remote(5)``
is an ``attr-defined`` error. With ``plugins = ["actorrt.mypy_plugin"]`` in the mypy configuration,
each decorated class ``C`` gets ``C.remote(*args, **kwargs) -> CallFuture[ActorHandle[C]]`` and
``C.options(**overrides) -> _Factory[C]``, as ``RemoteClass[C]`` describes them. Loaded by mypy
only; the runtime never imports it.
"""

from __future__ import annotations

from collections.abc import Callable

from mypy.nodes import ARG_STAR, ARG_STAR2, Argument, Var
from mypy.plugin import ClassDefContext, Plugin
from mypy.plugins.common import add_method_to_class
from mypy.types import AnyType, TypeOfAny
from mypy.typevars import fill_typevars

__all__ = ["plugin"]

_DECORATOR = "actorrt.client.remote.remote_class"  # also what ``actorrt.remote_class`` resolves to


def _add_remote_and_options(ctx: ClassDefContext) -> bool:
    instance = fill_typevars(ctx.cls.info)
    handle = ctx.api.named_type_or_none("actorrt.client.handle.ActorHandle", [instance])
    future = ctx.api.named_type_or_none("actorrt.client.future.CallFuture", [handle]) if handle is not None else None
    factory = ctx.api.named_type_or_none("actorrt.client.remote._Factory", [instance])
    if future is None or factory is None:
        return False  # actorrt's own modules are not analysed yet: called again later
    anything = AnyType(TypeOfAny.explicit)
    args = Argument(Var("args", anything), anything, None, ARG_STAR)
    kwargs = Argument(Var("kwargs", anything), anything, None, ARG_STAR2)
    overrides = Argument(Var("overrides", anything), anything, None, ARG_STAR2)
    add_method_to_class(ctx.api, ctx.cls, "remote", [args, kwargs], future, is_classmethod=True)
    add_method_to_class(ctx.api, ctx.cls, "options", [overrides], factory, is_classmethod=True)
    return True


class _RemoteClassPlugin(Plugin):
    def get_class_decorator_hook_2(self, fullname: str) -> Callable[[ClassDefContext], bool] | None:
        return _add_remote_and_options if fullname == _DECORATOR else None


def plugin(version: str) -> type[Plugin]:
    """mypy's entry point."""
    return _RemoteClassPlugin
