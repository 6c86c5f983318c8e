"""PARL's user API on actorrt: ``import actorrt.compat.parl as parl``, and the rest of a PARL
script stays as it is.

    import actorrt.compat.parl as parl

    @parl.remote_class
    class Actor:
        def __init__(self, x):
            self.x = x
        def add(self, y):
            return self.x + y

    parl.connect("localhost:8010")       # a master started with: actorrt start --port 8010
    actor = Actor(1)                      # created on the cluster
    print(actor.add(2), actor.x)          # 3 1

What PARL programs use, with PARL's semantics: ``remote_class`` (``wait``, ``max_memory``,
``n_gpu``), ``connect(master_address, distributed_files=[])``, ``disconnect()``,
``get_global_client()``, ``FutureObject`` and PARL's errors in ``exceptions``; ``utils`` and
``env`` (imported when first used: they need torch and gymnasium). ``python -m
actorrt.compat.parl SCRIPT.py`` runs a PARL script unchanged (``_runner``). The mapping to
actorrt, and what differs, is in docs/parl.md.

PARL's torch API (``Model``, ``Algorithm``, ``Agent``, ``algorithms``) is here too, imported the
first time a script asks for it (it needs torch and ``rl``; the rest of this package does not).
"""

from __future__ import annotations

import importlib
from typing import Any

from actorrt.compat.parl import exceptions
from actorrt.compat.parl._client import GlobalClient, connect, disconnect, get_global_client
from actorrt.compat.parl._future import FutureObject
from actorrt.compat.parl._proxy import RemoteProxy, remote_class

__all__ = [
    "FutureObject",
    "GlobalClient",
    "RemoteProxy",
    "connect",
    "disconnect",
    "exceptions",
    "get_global_client",
    "remote_class",
]

_SUBMODULES = ("utils", "env", "algorithms")  # imported when first used (torch, gymnasium): never by actorrt itself
_TORCH_API = {  # PARL's torch backend: name -> its module (imported when first used: torch, rl)
    "Model": "actorrt.compat.parl.core.torch.model",
    "Algorithm": "actorrt.compat.parl.core.torch.algorithm",
    "Agent": "actorrt.compat.parl.core.torch.agent",
}


def __getattr__(name: str) -> Any:
    if name in _SUBMODULES:
        return importlib.import_module(f"{__name__}.{name}")
    if name in _TORCH_API:
        return getattr(importlib.import_module(_TORCH_API[name]), name)
    if name.startswith("__"):
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from actorrt.compat.parl._hooks import unknown_name

    raise AttributeError(unknown_name(f"parl.{name}"))
