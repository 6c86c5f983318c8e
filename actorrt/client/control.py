"""``Control``: this client's control plane, its session with the master and what it knows.

The session (``MasterSession``) carries the steps; ``ClientState``, with its ``Holders``, says
what they mean. ``Control`` sends the requests this client waits on (placements, lookups,
releases, the word that an actor died) and bounds every wait, answers them from the master's
notices, and hands what concerns an actor's own connection (it restarted, moved, died) to the
data plane (``Actors``: the ``Cluster``, whose connections talk to the actors' hosts). Cluster
loop only, except ``send_soon``.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
from collections.abc import Coroutine
from typing import Any, Protocol

from actorrt.client.connection import ActorConnection
from actorrt.client.output import OutputPrinter
from actorrt.client.session import MasterSession
from actorrt.client.state import ClientState
from actorrt.common.errors import ActorNameTakenError, ClusterConnectionError, PlacementError
from actorrt.common.status import ClusterStatus
from actorrt.transport import rpc as _rpc
from actorrt.v1 import actor_host_pb2
from actorrt.v1 import master_pb2 as pb

__all__ = ["Actors", "Control"]

log = logging.getLogger("actorrt.client")

RELEASE_WAIT_S = 10.0  # how long a kill or a failed construction waits for the master to free the slot
PLACEMENT_WARN_S = 10.0  # a placement still waiting this long is logged (every slot may be taken)
_VALIDATE = os.environ.get("ACTORRT_VALIDATE") == "1"


class Actors(Protocol):
    """What the control plane asks of the data plane (``Cluster``). Cluster loop."""

    def background(self, work: Coroutine[Any, Any, Any]) -> None:
        """Run ``work`` on the loop, kept referenced until it is done."""
        ...

    def drop(self, conn: ActorConnection) -> None:
        """One fewer hold on ``conn`` (a kept constructor's arguments, once its actor died)."""
        ...

    async def follow(
        self, conn: ActorConnection | None, moved: pb.ActorMoved, spec: actor_host_pb2.ConstructActor | None
    ) -> None:
        """A restarted actor has a new host: construct it there (``spec``) or attach ``conn``."""
        ...


class Control:
    """The session, the state, and the requests that wait on the master's answer."""

    def __init__(
        self,
        state: ClientState[asyncio.Future[Any], ActorConnection],
        actors: Actors,
        printer: OutputPrinter,
        *,
        timeout: float,
        log_to_driver: bool,
    ) -> None:
        self.state = state
        self.actors = actors
        self.printer = printer  # actors' output, printed off the loop
        self.timeout = timeout
        self.log_to_driver = log_to_driver
        self.loop: asyncio.AbstractEventLoop  # the cluster's: set by ``open``
        self.loop_thread = 0
        self.session: MasterSession | None = None
        self.closed = False

    def checked(self) -> None:
        """Validate the state (and its holders) after a transition, with ``ACTORRT_VALIDATE=1``."""
        if _VALIDATE:
            self.state.validate()

    async def open(
        self, address: str, *, token: str | None, tls: _rpc.TLS | None, client_id: str, actor_id: str
    ) -> None:
        """Open the session (cluster loop). Raises ClusterConnectionError, MasterUnreachableError."""
        self.loop = asyncio.get_running_loop()
        self.loop_thread = threading.get_ident()
        self.session = MasterSession(
            address,
            token=token,
            tls=tls,
            client_id=client_id,
            timeout=self.timeout,
            mute_output=not self.log_to_driver,
            on_notice=self._on_notice,
            unanswered=self._unanswered,
            actor_id=actor_id,
        )
        await self.session.open()

    def closing(self) -> tuple[list[ActorConnection], list[asyncio.Future[Any]]]:
        """The cluster connection closes: nothing more is sent. The connections to close, and
        the waiters to fail once they are (``close``)."""
        self.closed = True
        return self.state.closed()

    async def close(self, waiters: list[asyncio.Future[Any]]) -> None:
        """Fail what still waited for the master, and close the session."""
        for waiter in waiters:
            if not waiter.done():
                waiter.set_exception(ClusterConnectionError("the cluster connection was closed"))
        if self.session is not None:
            await self.session.close()

    # ---- sending ----------------------------------------------------------------------------------

    def send_all(self, events: list[pb.ClientEvent]) -> None:
        """Send session steps (loop thread); none once there is no session to send them on."""
        if self.session is not None and not self.closed:
            for event in events:
                self.session.send(event)

    def send_soon(self, event: pb.ClientEvent) -> None:
        """Queue a session step from any thread, in the order asked."""
        if self.session is None or self.closed:
            return
        if threading.get_ident() == self.loop_thread:
            self.session.send(event)
        else:
            self.loop.call_soon_threadsafe(self.session.send, event)

    # ---- the master's notices -----------------------------------------------------------------

    def _on_notice(self, notice: pb.ClientNotice) -> None:
        kind = notice.WhichOneof("notice")
        if kind == "actor_placed":
            placed = notice.actor_placed
            waiter = self.state.answered(placed.request_id, placed.actor_id)
            if waiter is not None and not waiter.done():
                waiter.set_result(placed)
            elif waiter is not None or not self.state.repeated(placed.request_id, placed.actor_id):
                self.release(placed.actor_id, "its placement was abandoned")  # nobody waits any more
        elif kind == "placement_failed":
            failed = notice.placement_failed
            waiter = self.state.answered(failed.request_id)
            if waiter is not None and not waiter.done():
                taken = failed.code == pb.PLACEMENT_FAILURE_NAME_TAKEN
                waiter.set_exception((ActorNameTakenError if taken else PlacementError)(failed.reason))
        elif kind == "actor_output":
            if self.log_to_driver:
                self.printer.submit(notice.actor_output)
        elif kind == "actor_found":
            found = notice.actor_found
            waiter = self.state.found(found.request_id, found.actor_id)
            if waiter is not None and not waiter.done():
                waiter.set_result(found)
            self.drop_unclaimed()
        elif kind == "actor_restarting":
            restarting = notice.actor_restarting
            self.state.restarting(restarting.actor_id)
            conn = self.state.holders.connection(restarting.actor_id)
            if conn is not None:
                conn.restarting(restarting.cause, restarting.restarts)
        elif kind == "actor_moved":
            moved = notice.actor_moved
            conn = self.state.holders.connection(moved.actor_id)
            there = conn is not None and conn.dead is None and not conn.waiting and conn.endpoint == moved.endpoint
            # A notice sent again after a reconnect for a move this client followed is not news.
            if self.state.follows(moved.actor_id, moved.restarts, moved.endpoint) and not there:
                spec = self.state.spec(moved.actor_id) if moved.construct else None
                if conn is not None or spec is not None:
                    self.actors.background(self.actors.follow(conn, moved, spec))
        elif kind == "actor_died":
            died = notice.actor_died
            conn, waiters, holds = self.state.died(died.actor_id, died.cause)
            if conn is not None:
                conn.mark_dead(died.cause)
                self.actors.background(conn.close(died.cause))
            for held in holds:  # its arguments will not be needed again
                self.actors.drop(held)
            for waiter in waiters:
                if not waiter.done():
                    waiter.set_result(died.cause)
        self.checked()

    def _unanswered(self) -> list[pb.ClientEvent]:
        """What a new master must hear again (``ClientState.reopened``); a connection that gave
        up on its actor counts as holding it no more."""
        return self.state.reopened(lambda conn: conn.dead is None)

    # ---- requests that wait for an answer -----------------------------------------------------

    async def request_placement(self, place: pb.PlaceActor, timeout_s: float, asked_s: float) -> pb.ActorPlaced:
        """Ask the master for a slot; waits at most ``timeout_s`` (0: forever) plus a margin.
        Raises PlacementError, ActorNameTakenError, ClusterConnectionError (closed meanwhile)."""
        class_name = place.class_name
        msg = pb.ClientEvent(place_actor=place)
        msg.place_actor.timeout_s = timeout_s
        fut: asyncio.Future[Any] = self.loop.create_future()
        request_id = self.state.request(msg, fut)
        assert self.session is not None
        self.session.send(msg)
        res = place.resources
        warning = self.loop.call_later(
            PLACEMENT_WARN_S,
            log.warning,
            "%s has waited %gs for a free slot (it asks for cpus=%g gpus=%g; it fails after %s): every "
            "slot may be taken, see `actorrt status`",
            class_name,
            PLACEMENT_WARN_S,
            res.num_cpus,
            res.num_gpus,
            f"{asked_s:g}s" if asked_s > 0 else "no limit",
        )
        try:
            # The master enforces the timeout; the margin covers a master that went away.
            async with asyncio.timeout(timeout_s + 10.0 if timeout_s > 0 else None):
                placed: pb.ActorPlaced = await fut
            return placed
        except (asyncio.CancelledError, TimeoutError) as e:
            if fut.done() and not fut.cancelled() and fut.exception() is None:  # answered as we gave up
                self.release(fut.result().actor_id, "its placement was abandoned")
            if isinstance(e, TimeoutError):
                raise PlacementError(f"no placement for {class_name} within {asked_s:g}s (no answer)") from e
            raise
        finally:
            warning.cancel()
            if self.state.withdraw(request_id) and self.session is not None and not self.closed:
                self.session.send(pb.ClientEvent(withdraw_placement=pb.WithdrawPlacement(request_id=request_id)))
            self.checked()

    async def look_up(self, step: pb.LookupActor) -> pb.ActorFound | None:
        """The master's answer to a lookup by name or id; None when it gave none within the
        timeout. It counts this client a holder of what it found (``drop_unclaimed``)."""
        msg = pb.ClientEvent(lookup_actor=step)
        fut: asyncio.Future[Any] = self.loop.create_future()
        request_id = self.state.look_up(msg, fut)
        assert self.session is not None
        self.session.send(msg)
        try:
            async with asyncio.timeout(self.timeout if self.timeout > 0 else None):
                found: pb.ActorFound = await fut
            return found
        except TimeoutError:
            return None
        finally:
            self.state.looked_up(request_id)
            # After the caller made its handle from the answer (it does, before it yields).
            self.loop.call_soon(self.drop_unclaimed)

    def drop_unclaimed(self) -> None:
        """Let go of the actors the master counts this client a holder of only for lookups whose
        askers made no handle from the answer (cancelled or timed out before it came)."""
        self.send_all(self.state.take_unclaimed())

    async def death_cause(self, actor_id: str, wait_s: float) -> str | None:
        """Why the master says ``actor_id`` died, waiting up to ``wait_s`` for the notice."""
        cause = self.state.cause(actor_id)
        if cause is not None:
            return cause
        waiter: asyncio.Future[Any] = self.loop.create_future()
        self.state.await_death(actor_id, waiter)
        try:
            async with asyncio.timeout(wait_s):
                said: str = await waiter
            return said
        except TimeoutError:
            return None
        finally:
            self.state.forget_waiter(actor_id, waiter)

    def release(self, actor_id: str, reason: str) -> bool:
        """Ask the master to stop ``actor_id``; False when there is no session to ask. A
        restartable one is never placed again for this client after a master restart."""
        self.state.released(actor_id)
        if self.session is None or self.closed:
            return False
        self.session.send(pb.ClientEvent(release_actor=pb.ReleaseActor(actor_id=actor_id, reason=reason)))
        return True

    async def release_and_wait(self, actor_id: str, reason: str, wait_s: float = RELEASE_WAIT_S) -> None:
        """Release ``actor_id`` and wait (bounded) until the master has freed its slot: whoever
        learns of the kill or of the failed construction may count the slots at once."""
        if self.release(actor_id, reason):
            await self.death_cause(actor_id, wait_s)

    async def status(self) -> ClusterStatus:
        """Nodes, slots, actors and clients, as the master has them."""
        assert self.session is not None
        return ClusterStatus.from_proto(await self.session.status())
