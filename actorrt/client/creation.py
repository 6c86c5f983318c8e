"""Creating an actor: placing it and constructing it on its host (``Cluster.create_actor``).

What it sends and decides, without I/O: the placement asked of the master (``placement``), the
class and its arguments pickled once (``dump_spec``), the step that constructs a placed actor
on its host (``construct_step``), and whether a failed construction may be placed again
(``never_constructed``: its host was gone before its constructor ran, so placing it again runs
the constructor at most once). ``Creator`` does the I/O: it asks the control plane for a slot
and opens the connection whose first batch constructs the actor, bounding every wait.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Iterator
from typing import Any

import grpc

from actorrt.client import pickling as _pickling
from actorrt.client.connection import ActorConnection, Owner
from actorrt.client.control import Control
from actorrt.client.options import ActorOptions
from actorrt.common.errors import SLOT_NOT_READY, ActorDiedError, SerializationError
from actorrt.transport import rpc as _rpc
from actorrt.transport.serialization import dumps, name_culprit, ship_local_modules
from actorrt.v1 import actor_host_pb2, common_pb2
from actorrt.v1 import master_pb2 as pb

__all__ = [
    "ABANDON_WAIT_S",
    "PLACE_ATTEMPTS",
    "Creator",
    "construct_step",
    "dump_spec",
    "never_constructed",
    "placement",
]

log = logging.getLogger("actorrt.client")

PLACE_ATTEMPTS = 5  # placements of one actor whose host was gone before its constructor ran
DEATH_GRACE_S = 2.0  # how long a construction reported dead may still say how it ended
ABANDON_WAIT_S = 5.0  # how long a closing cluster connection waits for its creations to clean up


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


class Creator:
    """Places actors and constructs them on their hosts, for one cluster connection (``owner``,
    whose connections the new ones are). Cluster loop, except ``pickle_spec``.

    A placement whose host was gone before the constructor ran (its warm host had just died:
    connection refused, or the worker said the slot was not ready) is released and placed
    again, up to ``PLACE_ATTEMPTS`` times within the placement timeout. Only a constructor that
    ran and raised, or a host that went away while constructing, fails it.
    """

    def __init__(
        self, owner: Owner, control: Control, *, timeout: float, placement_timeout: float, max_payload_bytes: int
    ) -> None:
        self.owner = owner
        self.control = control
        self.timeout = timeout  # for a constructor to answer
        self.placement_timeout = placement_timeout  # the default wait for a slot (0: forever)
        self.max_payload_bytes = max_payload_bytes
        self.files: list[actor_host_pb2.ShippedFile] = []  # ``connect(files=...)``, collected at the start
        # The creations under way (the tasks running them), until each is done: a closing
        # connection ends them (``abandon_all``), so that none waits for an answer that cannot come.
        self._under_way: set[asyncio.Task[Any]] = set()

    @contextlib.contextmanager
    def under_way(self) -> Iterator[None]:
        """Count the current task as a creation under way while the block runs. Cluster loop."""
        task = asyncio.current_task()
        if task is None:  # driven by hand, not by a loop: nothing could cancel it anyway
            yield
            return
        self._under_way.add(task)
        try:
            yield
        finally:
            self._under_way.discard(task)

    async def abandon_all(self) -> None:
        """The cluster connection closes: cancel every creation under way and wait (at most
        ``ABANDON_WAIT_S``) until each has cleaned up what it made (its placement withdrawn or
        its actor's connection closed, its shared-memory probe removed). Each then raises what
        its caller makes of the cancellation (``Cluster.create_actor``: ClusterConnectionError).
        Cluster loop; raises nothing."""
        tasks = [task for task in self._under_way if task is not asyncio.current_task()]
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=ABANDON_WAIT_S)

    def pickle_spec(
        self,
        cls: type,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        copies: list[tuple[str, str]],
        holds: list[ActorConnection] | None,
    ) -> common_pb2.Payload:
        """``creation.dump_spec``, recording each handle copy made (``copies``) and the
        connections of the handles pickled (``holds``, for a restartable actor). Copies made by
        a pickling that failed are taken back here. Any thread; raises SerializationError."""
        ship_local_modules()
        pickling = _pickling.handles_pickled.set(holds)
        recording = _pickling.copies_made.set(copies)
        try:
            return dump_spec(cls, args, kwargs)
        except BaseException:
            self.owner.lost_copies(copies)
            raise
        finally:
            _pickling.copies_made.reset(recording)
            _pickling.handles_pickled.reset(pickling)

    async def place_and_construct(
        self,
        place: pb.PlaceActor,
        spec: common_pb2.Payload,
        opts: ActorOptions,
        kinds: dict[str, bool],
        copies: list[tuple[str, str]],
    ) -> tuple[ActorConnection, actor_host_pb2.ConstructActor]:
        """Ask for a slot and construct the actor there: its connection and the step that
        constructed it. If it fails, the handle ``copies`` in its arguments are taken back when
        no host got them, else void unless claimed by the host that did."""
        class_name = place.class_name
        timeout = opts.placement_timeout if opts.placement_timeout is not None else self.placement_timeout
        loop = self.owner.loop
        deadline = loop.time() + timeout if timeout > 0 else None
        receiver = ""  # the actor whose host may have the arguments
        try:
            for attempt in range(1, PLACE_ATTEMPTS + 1):
                left = max(0.001, deadline - loop.time()) if deadline is not None else 0.0
                placed = await self.control.request_placement(place, left, timeout)
                conn = ActorConnection(
                    self.owner, placed.actor_id, placed.endpoint, kinds, class_name, opts.max_restarts
                )
                construct = construct_step(placed, class_name, spec, opts, self.files, self.max_payload_bytes)
                try:
                    receiver = placed.actor_id
                    await self._construct(conn, construct)
                    return conn, construct
                except ActorDiedError as e:
                    retry = never_constructed(e, self.control.state.cause(placed.actor_id))
                    if retry:
                        receiver = ""  # no host got the arguments
                    out_of_time = deadline is not None and loop.time() >= deadline
                    if not retry or attempt == PLACE_ATTEMPTS or out_of_time:
                        ended = (
                            "its constructor failed" if not retry else "its host was gone before its constructor ran"
                        )
                        await self.control.release_and_wait(placed.actor_id, ended)
                        raise
                    log.info(
                        "placing %s again (attempt %d of %d): %s",
                        class_name,
                        attempt + 1,
                        PLACE_ATTEMPTS,
                        e.cause,
                    )
                    if place.name:  # the name is free once the master has heard that this one ended
                        await self.control.release_and_wait(
                            placed.actor_id, "its host was gone before its constructor ran"
                        )
                    else:
                        self.control.release(placed.actor_id, "its host was gone before its constructor ran")
                    await asyncio.sleep(0.05 * attempt)  # the worker's SlotLost reaches the master meanwhile
                except asyncio.CancelledError:
                    self.control.release(placed.actor_id, "its placement was abandoned: its construction was cancelled")
                    raise
                except BaseException:
                    await self.control.release_and_wait(placed.actor_id, "its constructor failed")
                    raise
            raise AssertionError("unreachable")  # the last attempt returns or raises
        except BaseException:
            self.owner.lost_copies(copies, receiver)
            raise

    async def _construct(self, conn: ActorConnection, construct: actor_host_pb2.ConstructActor) -> None:
        """``conn.open``, bounded as a whole (the connect and the first write too). Raises
        ActorDiedError for every way the host is gone: its cause is the connection's own error
        where there is one (it tells a host never reached from one that died constructing), else
        the master's word that the actor died."""
        what = f"could not construct {conn.class_name}"
        bound = self.timeout + 5.0 if self.timeout > 0 else None
        died: asyncio.Future[Any] = self.owner.loop.create_future()
        known = self.control.state.cause(conn.actor_id)
        if known is not None:
            died.set_result(known)
        else:
            self.control.state.await_death(conn.actor_id, died)
        opening = asyncio.ensure_future(conn.open(construct, self.timeout))
        try:
            await asyncio.wait({opening, died}, timeout=bound, return_when=asyncio.FIRST_COMPLETED)
            if died.done() and not opening.done():  # let the connection say how it ended
                await asyncio.wait({opening}, timeout=DEATH_GRACE_S)
        except asyncio.CancelledError:  # our caller cancelled us
            opening.cancel()
            await asyncio.gather(opening, return_exceptions=True)
            await conn.close("its construction was cancelled")
            raise
        finally:
            self.control.state.forget_waiter(conn.actor_id, died)
        if opening.done():
            opening.result()  # its error: RemoteError, ActorDiedError (the connection's own)
            if not died.done():
                return
            detail = died.result()  # constructed, but reported dead meanwhile
        else:
            opening.cancel()
            await asyncio.gather(opening, return_exceptions=True)
            detail = died.result() if died.done() else f"no answer within {bound:g}s"
        await conn.close(f"{what}: {detail}")
        raise ActorDiedError(conn.actor_id, f"{what}: {detail}")
