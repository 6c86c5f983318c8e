"""The records the cluster table's parts share: an actor, a placement request, and what the
table's transitions return about them (``Placement``, ``Ended``, ``Released``).

Plain data, no behaviour beyond reading it: which part changes which field is said where the
field is. Used on the master's loop only.
"""

from __future__ import annotations

from collections.abc import Mapping, Set
from dataclasses import dataclass

__all__ = ["Actor", "Ended", "NodeLoad", "Placement", "Released", "Request", "RequestKey"]

RequestKey = tuple[str, int]  # (client_id, request_id): a request, also resent on a new stream


@dataclass
class Actor:
    """A live actor, or one waiting to be placed again (``restarting``). Who holds it is kept by
    ``References``; its slot, by ``Workers``; its name, by ``Names``."""

    actor_id: str
    worker_id: str
    slot: int
    endpoint: str
    client_id: str
    class_name: str
    num_cpus: int
    gpu_ids: tuple[int, ...]
    max_memory_mb: int = 0
    rss_bytes: int = 0
    num_gpus: int = 0  # len(gpu_ids), also while restarting (when it has none)
    stopping: str = ""  # the reason, once a stop was asked for
    name: str = ""
    detached: bool = False
    max_restarts: int = 0  # -1: forever
    restarts: int = 0
    placed_at: float = 0.0  # the table's clock when its current instance was placed
    request_id: int = 0  # its creator's request that placed it (0: rebuilt from its worker's word)
    quick_exits: int = 0  # instances in a row that lived less than RESTART_STABLE_S
    # Its creator's request resent after a reconnect (its ActorPlaced was lost) that found it
    # restarting: answered with ActorPlaced when it is placed again, failed if it dies instead.
    answers: int = 0
    # Waiting for a new slot after its process died: no worker, slot -1, no endpoint.
    restarting: bool = False
    methods: tuple[str, ...] = ()
    attributes: tuple[str, ...] = ()
    # As its worker's last heartbeat said (``NodeLoad``): CPU in percent of one core, calls/s.
    cpu_percent: float = 0.0
    calls_per_s: float = 0.0

    @classmethod
    def asked_for(cls, req: Request, actor_id: str, placed_at: float) -> Actor:
        """A new actor as ``req`` asks for it, not on a slot yet."""
        return cls(
            actor_id=actor_id,
            worker_id="",
            slot=-1,
            endpoint="",
            client_id=req.client_id,
            class_name=req.class_name,
            num_cpus=req.num_cpus,
            gpu_ids=(),
            max_memory_mb=req.max_memory_mb,
            num_gpus=req.num_gpus,
            name=req.name,
            detached=req.detached,
            max_restarts=req.max_restarts,
            methods=req.methods,
            attributes=req.attributes,
            placed_at=placed_at,
            request_id=req.request_id,
        )

    def may_restart(self) -> bool:
        return self.max_restarts < 0 or self.restarts < self.max_restarts


@dataclass(frozen=True)
class NodeLoad:
    """What a heartbeat says of its node's load besides the load average: the node's CPU busy
    in percent of all its cores, its memory in use, and (CPU % of one core, calls/s) of each of
    its actors that had any (the others had none), all measured by the worker daemon."""

    cpu_percent: float
    memory_used_bytes: int
    actors: Mapping[str, tuple[float, float]]


@dataclass(frozen=True)
class Request:
    client_id: str
    request_id: int
    num_cpus: int = 1
    num_gpus: int = 0
    max_memory_mb: int = 0
    class_name: str = ""
    timeout_s: float = 0.0  # how long it may wait in the queue; 0: forever
    name: str = ""
    detached: bool = False
    max_restarts: int = 0
    spread: bool = False  # the node with the most free cpus; else pack (the fewest that fit)
    node: str = ""  # a worker_id: place there only
    methods: tuple[str, ...] = ()
    attributes: tuple[str, ...] = ()
    restart_of: str = ""  # the actor this request places again after its process died


@dataclass(frozen=True)
class Placement:
    request: Request
    actor_id: str
    worker_id: str
    node: str
    slot: int
    endpoint: str
    gpu_ids: tuple[int, ...]
    again: bool = False  # the answer to a request placed before (resent after a reconnect): no new start
    # A restart's placement that also answers its creator's resent request (``Actor.answers``).
    answers: int = 0


@dataclass(frozen=True)
class Ended:
    """An actor's process ended (or its node was lost): ``restarting`` if it is placed again.
    ``holders``: the clients holding a handle to it (live while it is listed; as they were when
    it left the table otherwise)."""

    actor: Actor
    restarting: bool
    cause: str
    holders: Set[str]
    delay_s: float = 0.0  # a restart's backoff


@dataclass(frozen=True)
class Released:
    """An actor released (its last handle dropped, or killed): one still placed must be stopped
    (``actor.stopping`` says why); one that was restarting left the table and is reported dead
    to its creator and ``holders`` (as they were when it left)."""

    actor: Actor
    holders: Set[str]
