"""actorrt: an asyncio actor runtime over gRPC.

@actorrt.remote_class
class Counter: ...

async with actorrt.connect() as cluster:      # no address: an embedded local cluster
    c = await Counter.remote(5)
    print(await c.add(1))
"""

from __future__ import annotations

# First, before anything below imports grpc: importing it turns gRPC's fork support off (also where
# grpc was imported before actorrt, while that can still work): processes forked from a
# connected one must never crash (transport/grpc_fork.py says why and how).
from actorrt.transport import grpc_fork as _grpc_fork

# isort: split
import logging
from collections.abc import Coroutine
from typing import Any, TypeVar

from actorrt.client.cluster import Cluster, connect, current_cluster, get_actor, kill
from actorrt.client.future import CallFuture, Completions, as_completed, get, wait
from actorrt.client.handle import ActorHandle
from actorrt.client.options import ActorOptions
from actorrt.client.remote import RemoteClass, remote_class
from actorrt.client.remote_attrs import call_method, get_attr, list_attrs
from actorrt.common import loop as _loop
from actorrt.common.errors import (
    ActorDiedError,
    ActorNameTakenError,
    ActorNotFoundError,
    ActorRTError,
    AuthenticationError,
    ClusterConnectionError,
    MasterUnreachableError,
    PlacementError,
    ProtocolVersionError,
    RemoteError,
    SerializationError,
)
from actorrt.common.status import ClusterStatus

__version__ = "0.1.0"

__all__ = [
    "ActorDiedError",
    "ActorHandle",
    "ActorNameTakenError",
    "ActorNotFoundError",
    "ActorOptions",
    "ActorRTError",
    "AuthenticationError",
    "CallFuture",
    "Cluster",
    "ClusterConnectionError",
    "ClusterStatus",
    "Completions",
    "MasterUnreachableError",
    "PlacementError",
    "ProtocolVersionError",
    "RemoteClass",
    "RemoteError",
    "SerializationError",
    "as_completed",
    "call_method",
    "connect",
    "current_cluster",
    "get",
    "get_actor",
    "get_attr",
    "kill",
    "list_attrs",
    "remote_class",
    "run",
    "wait",
]

T = TypeVar("T")

logging.getLogger("actorrt").addHandler(logging.NullHandler())
del _grpc_fork  # only its import matters (above)


def run(main: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run(main)``, on uvloop when it is installed."""
    return _loop.run(main)
