"""What creating an actor sends and decides, without I/O (``Cluster.create_actor`` does it).

The placement asked of the master (``placement``), the class and its arguments pickled once
(``dump_spec``), the step that constructs a placed actor on its host (``construct_step``), and
whether a failed construction may be placed again (``never_constructed``: its host was gone
before its constructor ran, so placing it again runs the constructor at most once).
"""

from __future__ import annotations

from typing import Any

import grpc

from actorrt.client.options import ActorOptions
from actorrt.common.errors import SLOT_NOT_READY, ActorDiedError, SerializationError
from actorrt.transport import rpc as _rpc
from actorrt.transport.serialization import dumps, name_culprit
from actorrt.v1 import actor_host_pb2, common_pb2
from actorrt.v1 import master_pb2 as pb

__all__ = ["PLACE_ATTEMPTS", "construct_step", "dump_spec", "never_constructed", "placement"]

PLACE_ATTEMPTS = 5  # placements of one actor whose host was gone before its constructor ran


def placement(class_name: str, opts: ActorOptions, kinds: dict[str, bool]) -> pb.PlaceActor:
    """What to ask the master for: resources, name, lifetime, restarts, where, and the class's
    shape (its method and attribute names, for handles found by name)."""
    return pb.PlaceActor(
        resources=common_pb2.Resources(
            num_cpus=opts.num_cpus, num_gpus=opts.num_gpus, max_memory_mb=opts.max_memory_mb or 0
        ),
        class_name=class_name,
        name=opts.name or "",
        detached=opts.lifetime == "detached",
        max_restarts=opts.max_restarts,
        scheduling=pb.SCHEDULING_SPREAD if opts.scheduling == "spread" else pb.SCHEDULING_UNSPECIFIED,
        node=opts.node or "",
        shape=pb.ActorShape(
            methods=[n for n, m in kinds.items() if m], attributes=[n for n, m in kinds.items() if not m]
        ),
    )


def construct_step(
    placed: pb.ActorPlaced,
    class_name: str,
    spec: common_pb2.Payload,
    opts: ActorOptions,
    files: list[actor_host_pb2.ShippedFile],
    max_payload_bytes: int,
) -> actor_host_pb2.ConstructActor:
    """The first batch of the stream to the actor's host: construct it there."""
    return actor_host_pb2.ConstructActor(
        version=_rpc.PROTOCOL_VERSION,
        actor_id=placed.actor_id,
        class_name=class_name,
        spec=spec,
        max_concurrency=opts.max_concurrency,
        gpu_ids=placed.gpu_ids,
        files=files,
        max_payload_bytes=max_payload_bytes,
    )


def dump_spec(cls: type, args: tuple[Any, ...], kwargs: dict[str, Any]) -> common_pb2.Payload:
    """``(cls, args, kwargs)`` pickled. Raises SerializationError naming the argument, or else
    the class, that cannot be pickled."""
    try:
        return dumps((cls, args, kwargs))
    except Exception as e:
        try:  # an argument, or the class itself?
            dumps((args, kwargs))
        except Exception as args_error:  # noqa: BLE001 - the arguments, or else the class, are named
            name_culprit(f"{cls.__qualname__}.__init__", args, kwargs, args_error)
        raise SerializationError(f"class {cls.__qualname__} cannot be pickled: {e}") from e


def never_constructed(e: ActorDiedError, death: str | None) -> bool:
    """Whether a failed construction never reached a host, so placing again runs the constructor
    at most once: the connection was refused (the warm host had just died), or the worker said the
    slot was not ready (``death``, the master's word)."""
    if death is not None and death.startswith(SLOT_NOT_READY):
        return True
    cause = e.__cause__
    return (
        isinstance(cause, grpc.RpcError)
        and cause.code() == grpc.StatusCode.UNAVAILABLE
        and "failed to connect" in (cause.details() or "").lower()
    )
