"""The master's servicer: the cluster's only fixed address. Control plane only; never carries user data.

``MasterServicer`` is a thin adapter: it turns each protobuf event of a session into calls on
``ClusterTable`` (and on ``Recovery`` for what comes back after a break), and has ``Outgoing``
turn their answers into messages on the right session streams. Its timers (placement deadlines,
restart backoffs, the settling of confirmations) only call into those objects. Everything runs on
one event loop.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import AsyncIterator, Collection, Sequence
from collections.abc import Set as AbstractSet
from typing import Any, TypeVar

import grpc

from actorrt.common import resources as _resources
from actorrt.common.errors import ActorNameTakenError, PlacementError
from actorrt.common.logs import RepeatedFailures, ids
from actorrt.common.text import name_problem, printable
from actorrt.master.heartbeats import HEARTBEATS_PER_S, Heartbeats
from actorrt.master.metrics import MasterMetrics
from actorrt.master.outgoing import Outgoing
from actorrt.master.output import ClientOutbox, MasterLogs
from actorrt.master.records import Actor, Ended, NodeLoad, Request
from actorrt.master.recovery import Exit, Kept, Recovery
from actorrt.master.references import client_id_problem, token_problem
from actorrt.master.state import TableInvariantError
from actorrt.master.status import cluster_status
from actorrt.master.table import ClusterTable
from actorrt.master.unreached import Unreached
from actorrt.master.workers import Worker
from actorrt.transport import rpc as _rpc
from actorrt.v1 import master_pb2 as pb
from actorrt.v1 import master_pb2_grpc as pb_grpc

__all__ = ["MasterServicer"]

log = logging.getLogger("actorrt.master")
E = TypeVar("E", pb.WorkerEvent, pb.ClientEvent)
FAILED_EVENT = "could not handle %s %s's %s event; its session goes on"

# Set to 1: the master checks ``ClusterTable.validate()`` after every transition, and a broken
# invariant ends the process (exit status 70). The test suite sets it for all its masters.
VALIDATE_ENV = "ACTORRT_VALIDATE"
INVARIANT_EXIT_STATUS = 70
# The workers lost (not back yet) a master remembers, for a deliberate stop to note.
LOST_KEPT = 1000


class _RefusedEventError(ValueError):
    """A client's event this master does not take: its session ends with ``INVALID_ARGUMENT``
    saying why (the message)."""


def _live_actor(a: pb.LiveActor) -> Actor:
    """An actor a registering worker hosts, as it reports it."""
    return Actor(
        actor_id=a.actor_id,
        worker_id="",
        slot=a.slot,
        endpoint=a.endpoint,
        client_id=a.client_id,
        class_name=a.class_name,
        num_cpus=max(1, a.resources.num_cpus),
        gpu_ids=tuple(a.gpu_ids),
        max_memory_mb=a.resources.max_memory_mb,
        name=a.name,
        detached=a.detached,
        max_restarts=a.max_restarts,
        restarts=a.restarts,
        methods=tuple(a.shape.methods),
        attributes=tuple(a.shape.attributes),
    )


def _request(client_id: str, msg: pb.PlaceActor) -> Request:
    """``client_id``'s ``PlaceActor`` as the table takes it."""
    return Request(
        client_id=client_id,
        request_id=msg.request_id,
        num_cpus=msg.resources.num_cpus,
        num_gpus=msg.resources.num_gpus,
        max_memory_mb=msg.resources.max_memory_mb,
        class_name=msg.class_name,
        timeout_s=max(0.0, msg.timeout_s),
        name=msg.name,
        detached=msg.detached,
        max_restarts=msg.max_restarts,
        spread=msg.scheduling == pb.SCHEDULING_SPREAD,
        node=msg.node,
        methods=tuple(msg.shape.methods),
        attributes=tuple(msg.shape.attributes),
    )


def _kept(client_id: str, kept: pb.KeptActor) -> Kept:
    """An actor ``client_id`` would construct again, as it describes it in its confirm."""
    place = kept.placement
    actor = Actor(
        actor_id=kept.actor_id,
        worker_id="",
        slot=-1,
        endpoint="",
        client_id=client_id,
        class_name=place.class_name,
        num_cpus=max(1, place.resources.num_cpus),
        gpu_ids=(),
        num_gpus=place.resources.num_gpus,
        max_memory_mb=place.resources.max_memory_mb,
        name=place.name,
        detached=place.detached,
        max_restarts=max(-1, place.max_restarts),
        restarts=max(0, kept.restarts),
        methods=tuple(place.shape.methods),
        attributes=tuple(place.shape.attributes),
    )
    return Kept(actor, kept.held)


class MasterServicer(MasterLogs, pb_grpc.MasterServicer):
    def __init__(
        self,
        table: ClusterTable,
        *,
        address: str = "",
        heartbeat_interval_s: float = 1.0,
        worker_timeout_s: float = 10.0,
        client_grace_s: float = 10.0,
        metrics: MasterMetrics | None = None,
        heartbeats_per_s: float = HEARTBEATS_PER_S,
    ) -> None:
        self.table = table
        self.metrics = metrics or MasterMetrics(table)
        self.address = address
        self.worker_timeout_s = worker_timeout_s
        self.client_grace_s = client_grace_s
        self.heartbeats = Heartbeats(heartbeat_interval_s, worker_timeout_s, heartbeats_per_s)
        self.started = time.monotonic()
        self._to_worker: dict[str, asyncio.Queue[pb.WorkerCommand | None]] = {}
        self._to_client: dict[str, ClientOutbox] = {}
        self.out = Outgoing(table, self.metrics, self._to_worker, self._to_client)
        # A restarted master settles confirmations once its workers had a worker timeout and a
        # reconnect period to register again (from ``recovery.started_at``, set as it serves).
        self.recovery = Recovery(table, settle_after_s=worker_timeout_s + _rpc.RECONNECT_BACKOFF_MAX_S)
        self._deadline_timer: asyncio.TimerHandle | None = None
        self._deadline_at = float("inf")  # the table's clock
        self._settle_timer: asyncio.TimerHandle | None = None
        self._settle_at = 0.0  # the table's clock, when the timer is armed
        self.closed = False
        # Set by ``stop_cluster``: why the cluster is being stopped on purpose ("": it is not).
        self.stopping = ""
        # Workers an earlier deliberate stop did not reach, by id (``Master`` loads them): told
        # ClusterStopped when they register.
        self.unreached: dict[str, Unreached] = {}
        # Workers this master lost (their session broke, or they fell silent) that have not
        # registered again, the newest LOST_KEPT: a stop cannot tell them, and notes them.
        self._lost: dict[str, Worker] = {}
        self.validating = os.environ.get(VALIDATE_ENV) == "1"
        self._event_failures = RepeatedFailures(log)  # by (side, kind): the session reads on
        self._refusals = _rpc.RateLimitedLog(_rpc.REFUSALS_LOGGED_PER_MIN, 60.0)  # events refused
        self._init_logs()

    def check(self) -> None:
        """With ``ACTORRT_VALIDATE=1``: check the table's (and recovery's) invariants; a
        violation is fatal."""
        if not self.validating:
            return
        try:
            self.table.validate()
            self.recovery.validate()
        except TableInvariantError as e:
            log.critical("cluster table invariant broken: %s", e, exc_info=True)
            logging.shutdown()
            os._exit(INVARIANT_EXIT_STATUS)

    def close(self) -> None:
        """The server stops: arm no timer from now on, cancel those armed, end every session."""
        self.closed = True
        for timer in (self._deadline_timer, self._settle_timer):
            if timer is not None:
                timer.cancel()
        for queue in self._to_worker.values():
            queue.put_nowait(None)
        for outbox in self._to_client.values():
            outbox.put_nowait(None)

    async def stop_cluster(self, reason: str, wait_s: float) -> list[Worker]:
        """The master is stopped on purpose, and the cluster with it (master loop). Every client
        is told each actor it holds died ("the cluster was stopped: ``reason``"), every worker
        ``ClusterStopped``; nothing is placed from now on. Waits up to ``wait_s`` for the
        workers to acknowledge by ending their sessions; returns those that did not hear it: still
        listed then (cut off at this moment, or between two sessions), or lost earlier and not
        back (cut off for longer than the worker timeout: they may run on). Raises nothing."""
        self.stopping = reason
        self.out.stopped = True
        cause = f"the cluster was stopped: {reason}"
        self._fail_waiting(cause)
        for actor in list(self.table.actors.values()):
            self.out.died(actor, cause, self.table.refs.holders_of(actor.actor_id))
        told = set(self._to_worker)
        for queue in self._to_worker.values():
            queue.put_nowait(pb.WorkerCommand(cluster_stopped=pb.ClusterStopped(reason=reason)))
        log.info("stopping the cluster (%s): told %d workers", reason, len(told))
        deadline = self.table.clock() + wait_s
        while told.intersection(self.table.workers) and self.table.clock() < deadline:
            await asyncio.sleep(0.02)  # each leaves the table as its session ends
        missed = list(self.table.workers.values())
        for worker in missed:
            log.warning(
                "worker %s (%s, pid %d) did not acknowledge the stop within %gs: it may run on, cut off; "
                "the next master started from this home tells it the cluster was stopped",
                worker.worker_id,
                worker.node,
                worker.pid,
                wait_s,
                extra=ids(worker_id=worker.worker_id),
            )
        return missed + [w for w in self._lost.values() if w.worker_id not in self.table.workers]

    def _fail_waiting(self, reason: str) -> None:
        """Fail every placement still queued (the cluster stops: none will be placed)."""
        for client_id, request_id in [key for key in self.table.queue if key[1] > 0]:  # not restarts
            if self.table.withdraw(client_id, request_id):
                self.metrics.placement_dropped(client_id, request_id)
                self.out.fail_placement(client_id, request_id, reason)

    def _told_stopped(self, reg: pb.RegisterWorker) -> str:
        """Why a registering worker is to be told its cluster was stopped (``ClusterStopped``):
        this master is stopping it, or an earlier one from this home stopped it while the worker
        was cut off. "" to take the worker in."""
        if self.stopping:
            return self.stopping
        unreached = self.unreached.get(reg.worker_id) if reg.worker_id else None
        if unreached is not None and unreached.is_worker(reg.worker_id, reg.node, reg.pid):
            return unreached.told()
        return ""

    def _retune_heartbeats(self) -> None:
        """Tell every worker the new interval once the cluster's size moved it (``Heartbeats``): a
        WorkerRegistered in a running session only updates the interval (older daemons ignore it)."""
        interval = self.heartbeats.retune(len(self.table.workers))
        if interval is None:
            return
        log.info("%d workers: heartbeat interval now %.2fs", len(self.table.workers), interval)
        for worker_id, queue in self._to_worker.items():
            queue.put_nowait(
                pb.WorkerCommand(
                    worker_registered=pb.WorkerRegistered(worker_id=worker_id, heartbeat_interval_s=interval)
                )
            )

    # ---- the table's answers ------------------------------------------------------------------

    def _ended(self, ended: Ended, exit_code: int = 0, node: str = "") -> None:
        """An actor's process ended: what it created dies with it; report its restart, or its death."""
        if self.stopping:  # every holder was told the cluster stopped; nothing restarts
            return
        actor = ended.actor
        for client_id in self.table.clients.of_actor(actor.actor_id):
            self._client_gone(client_id)
        if not ended.restarting:
            self._report_death(actor, ended.cause, ended.holders, exit_code, node)
            return
        self.out.restarting(ended)
        if ended.delay_s:
            self._arm_deadline()

    def _report_death(
        self, actor: Actor, cause: str, holders: AbstractSet[str], exit_code: int = 0, node: str = ""
    ) -> None:
        self.table.record_death(actor, cause, node)
        self.out.died(actor, cause, holders, exit_code)

    def _released(self) -> None:
        """Stop what the table released (refcount zero); report those that were restarting."""
        for released in self.table.take_released():
            if released.actor.restarting:  # it had no process: it is gone now
                self._report_death(released.actor, released.actor.stopping, released.holders)
            else:
                self.out.stop(released.actor)

    def _client_gone(self, client_id: str) -> None:
        self.set_muted(client_id, False)
        for actor in self.table.remove_client(client_id):
            self.out.stop(actor)
        self._released()

    # ---- WorkerSession ----------------------------------------------------------------------

    async def WorkerSession(
        self,
        request_iterator: AsyncIterator[pb.WorkerEvent],
        context: grpc.aio.ServicerContext[pb.WorkerEvent, pb.WorkerCommand],
    ) -> None:
        reg = await _registration(request_iterator, context)
        stopped = self._told_stopped(reg)
        if stopped:  # its actors are not taken in: the cluster they ran in was ended on purpose
            log.warning(
                "worker %s from %s (pid %d) registers after its cluster was stopped: telling it so (%s)",
                reg.worker_id or "(new)",
                reg.node,
                reg.pid,
                stopped,
                extra=ids(worker_id=reg.worker_id),
            )
            await context.write(pb.WorkerCommand(cluster_stopped=pb.ClusterStopped(reason=stopped)))
            return
        self._lost.pop(reg.worker_id, None)
        live = [_live_actor(a) for a in reg.live_actors]
        old_queue = self._to_worker.pop(reg.worker_id, None) if reg.worker_id else None
        if old_queue is not None:
            old_queue.put_nowait(None)
        if reg.worker_id in self.table.workers:  # a reconnect: what it no longer reports is gone
            exits = [Exit(e.actor_id, e.slot, e.cause, e.exit_code) for e in reg.exited]
            for ended, exit_code in self.recovery.worker_returning(reg.worker_id, live, exits):
                self._ended(ended, exit_code)
        worker = self.table.workers.join(
            node=reg.node,
            node_ip=reg.node_ip,
            cpus=reg.cpus,
            gpus=reg.gpus,
            memory_bytes=reg.memory_bytes,
            pid=reg.pid,
            worker_id=reg.worker_id,
        )
        stale = self.recovery.worker_registered(worker, live)
        worker_id = worker.worker_id
        queue: asyncio.Queue[pb.WorkerCommand | None] = asyncio.Queue()
        self._to_worker[worker_id] = queue
        log.info(
            "worker %s joined from %s (%s): %d cpus, %d gpus", worker_id, reg.node, reg.node_ip, reg.cpus, reg.gpus
        )
        await context.write(
            pb.WorkerCommand(
                worker_registered=pb.WorkerRegistered(worker_id=worker_id, heartbeat_interval_s=self.heartbeats.told_s)
            )
        )
        for actor in stale:  # hosted across a partition, reported twice, or told to stop before
            self.out.stop(actor)
        self._retune_heartbeats()
        self.check()
        reader = asyncio.create_task(self._read_worker(worker_id, request_iterator, queue))
        try:
            while (cmd := await queue.get()) is not None:
                await context.write(cmd)
        finally:
            reader.cancel()
            if self._to_worker.get(worker_id) is queue:
                self._worker_gone(worker_id, "its worker daemon disconnected")

    async def _read_worker(
        self, worker_id: str, events: AsyncIterator[pb.WorkerEvent], queue: asyncio.Queue[pb.WorkerCommand | None]
    ) -> None:
        try:
            async for ev in events:
                kind = ev.WhichOneof("event")
                if kind == "heartbeat":
                    beat = ev.heartbeat
                    usage = NodeLoad(
                        beat.cpu_percent,
                        beat.memory_used_bytes,
                        {a: (load.cpu_percent, load.calls_per_s) for a, load in beat.actor_load.items()},
                    )
                    self.table.seen(worker_id, beat.load, beat.actor_rss_bytes, usage)
                    continue  # nothing else changed: no placement, no check
                self.table.seen(worker_id)
                try:
                    self._worker_event(worker_id, kind, ev)
                except Exception:  # noqa: BLE001 - a bug handling one event must not end the session unseen
                    self._event_failures.failed(("worker", kind), FAILED_EVENT, "worker", worker_id, kind)
                self.check()
        except (asyncio.CancelledError, grpc.RpcError):
            pass
        finally:
            queue.put_nowait(None)

    def _worker_event(self, worker_id: str, kind: str | None, ev: pb.WorkerEvent) -> None:
        if kind == "slot_ready":
            self.out.announce(self.table.slot_ready(worker_id, ev.slot_ready.slot, ev.slot_ready.endpoint))
        elif kind == "slot_lost":
            if self.table.workers.lost(worker_id, ev.slot_lost.slot):
                log.info(
                    "worker %s: the warm host of slot %d exited (%s); not placing there until it is back",
                    worker_id,
                    ev.slot_lost.slot,
                    ev.slot_lost.cause,
                    extra=ids(worker_id=worker_id, slot=ev.slot_lost.slot),
                )
        elif kind == "actor_exited":
            exited = ev.actor_exited
            ended, placements = self.table.actor_exited(exited.actor_id, exited.cause, worker_id, exited.slot)
            if ended is not None:
                self._ended(ended, exited.exit_code)
            self.out.announce(placements)
            self._released()  # handle copies it never claimed may have held others
        elif kind == "actor_output":
            self.forward_output(ev.actor_output)
        elif kind == "actor_log":
            self.log_read_answered(ev.actor_log)
        else:
            log.warning("worker %s sent an unexpected %s; ignored", worker_id, kind)

    def _worker_gone(self, worker_id: str, cause: str) -> None:
        self._to_worker.pop(worker_id, None)
        if self.stopping:  # it heard the stop; its actors' holders were told already
            self.table.remove_worker(worker_id, f"the cluster was stopped: {self.stopping}")
            log.info("worker %s stopped with the cluster", worker_id)
            self.check()
            return
        worker = self.table.workers.get(worker_id)
        node = worker.node if worker is not None else ""
        if worker is not None:  # it may run on, cut off, and come back
            self._lost[worker_id] = worker
            while len(self._lost) > LOST_KEPT:
                del self._lost[next(iter(self._lost))]
        dead = self.table.remove_worker(worker_id, f"node lost: {cause}")
        level = logging.WARNING if dead else logging.INFO
        log.log(level, "worker %s left: %s (%d actors lost)", worker_id, cause, len(dead))
        for ended in dead:
            self._ended(ended, node=node)
        self._released()  # handle copies they never claimed may have held others
        self.out.announce(self.table.place_waiting())
        self._retune_heartbeats()
        self.check()

    # ---- ClientSession ----------------------------------------------------------------------

    async def ClientSession(
        self,
        request_iterator: AsyncIterator[pb.ClientEvent],
        context: grpc.aio.ServicerContext[pb.ClientEvent, pb.ClientNotice],
    ) -> None:
        opening = await _opening(request_iterator, context)
        client_id = opening.client_id
        old = self._to_client.pop(client_id, None)
        if old is not None:
            old.put_nowait(None)
        queue = ClientOutbox(client_id)  # written to after SessionOpened
        self._to_client[client_id] = queue
        self.table.clients.open(client_id, opening.hostname, opening.pid, opening.actor_id)
        self.set_muted(client_id, opening.mute_actor_output)
        # Where its restarted actors went: an ActorMoved may have been lost with the old stream
        # (the client ignores one it has followed already).
        for actor in self.table.moved_actors_of(client_id):
            self.out.moved(client_id, actor)
        self.out.announce(self.table.place_waiting())  # restarts waited for their creator to be back
        self.check()
        closed_cleanly = asyncio.Event()
        refused: list[str] = []
        reader = None
        try:  # a client gone before SessionOpened reached it is lost like any other
            await context.write(
                pb.ClientNotice(session_opened=pb.SessionOpened(client_id=client_id, version=_rpc.PROTOCOL_VERSION))
            )
            reader = asyncio.create_task(self._read_client(client_id, request_iterator, queue, closed_cleanly, refused))
            while (notice := await queue.get()) is not None:
                await context.write(notice)
            if refused:  # the client is lost, as after a broken stream, and told why
                await context.abort(grpc.StatusCode.INVALID_ARGUMENT, refused[0])
        finally:
            if reader is not None:
                reader.cancel()
            if self._to_client.get(client_id) is queue:
                del self._to_client[client_id]
                if closed_cleanly.is_set():
                    self._client_gone(client_id)
                else:
                    log.warning(
                        "client %s lost; its actors stop in %.0fs unless it returns", client_id, self.client_grace_s
                    )
                    self.table.client_lost(client_id)
                self.check()

    async def _read_client(
        self,
        client_id: str,
        events: AsyncIterator[pb.ClientEvent],
        queue: ClientOutbox,
        closed_cleanly: asyncio.Event,
        refused: list[str],
    ) -> None:
        """Handle ``client_id``'s events in turn until its session ends; an event it refuses
        (``_RefusedEventError``) ends it too, its reason in ``refused``."""
        try:
            async for ev in events:
                kind = ev.WhichOneof("event")
                if kind == "close_session":
                    closed_cleanly.set()
                    break
                try:
                    self._client_event(client_id, kind, ev)
                except _RefusedEventError as e:
                    self._refusals.warning("client %s refused: %s", printable(client_id), e)
                    refused.append(str(e))
                    break
                except Exception:  # noqa: BLE001 - a bug handling one event must not end the session unseen
                    self._event_failures.failed(("client", kind), FAILED_EVENT, "client", client_id, kind)
                self.check()
        except (asyncio.CancelledError, grpc.RpcError):
            pass
        finally:
            queue.put_nowait(None)

    def _client_event(self, client_id: str, kind: str | None, ev: pb.ClientEvent) -> None:
        """Carry out one of ``client_id``'s events. Raises ``_RefusedEventError`` for one it must not send."""
        if kind == "place_actor":
            self._place(client_id, ev.place_actor)
        elif kind == "add_ref":
            if ev.add_ref.token and (problem := token_problem("AddRef.token", ev.add_ref.token, client_id)):
                raise _RefusedEventError(problem)  # a copy it sent is named by its own token
            self.table.add_ref(client_id, ev.add_ref.actor_id, ev.add_ref.token)
        elif kind == "drop_ref":
            drop = ev.drop_ref
            # a claim names the sender's token; a void, the sender's own
            if drop.token and (
                problem := token_problem("DropRef.token", drop.token, client_id if drop.receiver else "")
            ):
                raise _RefusedEventError(problem)
            if drop.receiver:
                self.table.void_copy(client_id, drop.actor_id, drop.token, drop.receiver)
            else:
                self.table.drop_ref(client_id, drop.actor_id, drop.token)
            self._released()
        elif kind == "lookup_actor":
            self._lookup(client_id, ev.lookup_actor)
        elif kind == "confirm_actors":
            confirm = ev.confirm_actors
            ids = list(dict.fromkeys([*confirm.actor_ids, *confirm.given_up]))
            self._confirm(client_id, ids, confirm.kept, set(confirm.given_up))
        elif kind == "withdraw_placement":
            request_id = ev.withdraw_placement.request_id
            if self.table.withdraw(client_id, request_id):
                self.metrics.placement_dropped(client_id, request_id)
            elif answering := self.table.answered_by(client_id, request_id):  # nobody would construct it
                self._release(client_id, answering, "its placement was abandoned while it restarted")
        elif kind == "release_actor":
            released = ev.release_actor
            if not self._release(client_id, released.actor_id, released.reason or "released by its client"):
                self.out.send_client(
                    client_id,
                    pb.ClientNotice(actor_died=pb.ActorDied(actor_id=released.actor_id, cause="no such actor")),
                )
        else:
            log.warning("client %s sent an unexpected %s; ignored", client_id, kind)

    def _release(self, client_id: str, actor_id: str, reason: str) -> bool:
        """``client_id`` stops ``actor_id`` (a kill); False if it has no such actor."""
        actor = self.table.release_actor(client_id, actor_id, reason)
        if actor is not None and not actor.restarting:
            self.out.stop(actor)
        self._released()
        return actor is not None

    def _lookup(self, client_id: str, msg: pb.LookupActor) -> None:
        found = pb.ActorFound(request_id=msg.request_id)
        if problem := name_problem(msg.name, "LookupActor.name"):  # a client's check, skipped
            found.reason = problem
            self.out.send_client(client_id, pb.ClientNotice(actor_found=found))
            return
        actor = self.table.lookup(client_id, msg.name, msg.actor_id)
        if actor is None and msg.name and msg.name in self.table.names:  # reserved by a queued placement
            found.reason = f"no live actor is named {msg.name!r} yet: a placement waiting for a slot reserved the name"
        elif actor is None:
            found.reason = f"no live actor is named {msg.name!r}" if msg.name else f"actor {msg.actor_id} is gone"
        else:
            found.actor_id, found.endpoint, found.class_name = actor.actor_id, actor.endpoint, actor.class_name
            found.max_restarts = actor.max_restarts
            found.shape.methods.extend(actor.methods)
            found.shape.attributes.extend(actor.attributes)
        self.out.send_client(client_id, pb.ClientNotice(actor_found=found))

    def _place(self, client_id: str, msg: pb.PlaceActor) -> None:
        if self.stopping:
            self.out.fail_placement(client_id, msg.request_id, f"the cluster is being stopped: {self.stopping}")
            return
        if msg.request_id == 0 or msg.max_restarts < -1:
            self.out.fail_placement(
                client_id, msg.request_id, "PlaceActor needs a request_id > 0 and max_restarts >= -1"
            )
            return
        if problem := name_problem(msg.name, "PlaceActor.name"):  # a client's check, skipped
            self.out.fail_placement(client_id, msg.request_id, problem)
            return
        req = _request(client_id, msg)
        self.metrics.placement_requested(client_id, msg.request_id)
        try:
            placement = self.table.request(req)
        except PlacementError as e:
            self.metrics.placement_dropped(client_id, msg.request_id)
            code = pb.PLACEMENT_FAILURE_NAME_TAKEN if isinstance(e, ActorNameTakenError) else 0
            self.out.fail_placement(client_id, msg.request_id, str(e), code)
            return
        if placement is not None:
            self.out.announce([placement])
        elif req.timeout_s > 0:
            self._arm_deadline()

    def _confirm(
        self,
        client_id: str,
        actor_ids: list[str],
        kept: Sequence[pb.KeptActor] = (),
        given_up: Collection[str] = (),
    ) -> None:
        """A client back from a lost session confirms the actors it holds or would construct
        again (``Recovery.confirmed``); what waits is settled by the settle timer."""
        if self.closed:
            return
        self.out.recovered(self.recovery.confirmed(client_id, actor_ids, [_kept(client_id, k) for k in kept], given_up))
        self._arm_settle()

    # ---- timers and housekeeping ------------------------------------------------------------

    def _arm_settle(self) -> None:
        """One timer at ``Recovery.settle_at``, while confirmations wait to be settled."""
        at = None if self.closed else self.recovery.settle_at
        if self._settle_timer is not None:
            if at == self._settle_at:
                return
            self._settle_timer.cancel()
            self._settle_timer = None
        if at is not None:
            self._settle_at = at
            delay = max(0.0, at - self.table.clock())
            self._settle_timer = asyncio.get_running_loop().call_later(delay, self._settle_due)

    def _settle_due(self) -> None:
        self._settle_timer = None
        if not self.closed:
            self.out.recovered(self.recovery.settle())
            self.check()

    def expire_placements(self) -> None:
        """Fail the queued requests whose placement timeout (a deadline in the table) ended."""
        expired = self.table.expire_requests()
        if expired:
            used, total = self.table.workers.usage()
        for req in expired:
            self.metrics.placement_dropped(req.client_id, req.request_id)
            self.out.fail_placement(
                req.client_id,
                req.request_id,
                f"no free slot for {req.class_name or 'actor'} within {req.timeout_s:g}s "
                f"({used}/{total} cpus in use, {len(self.table.queue)} other requests waiting)",
            )
        self._arm_deadline()

    def _arm_deadline(self) -> None:
        """One timer, at the table's next wake-up: the earliest placement deadline or the end of
        a restart's backoff (the sweep is the backstop)."""
        deadline = self.table.next_wakeup()
        if self.closed or deadline is None or deadline >= self._deadline_at:
            return
        if self._deadline_timer is not None:
            self._deadline_timer.cancel()
        self._deadline_at = deadline
        delay = max(0.0, deadline - self.table.clock())
        self._deadline_timer = asyncio.get_running_loop().call_later(delay, self._deadline_reached)

    def _deadline_reached(self) -> None:
        self._deadline_timer, self._deadline_at = None, float("inf")
        self.out.announce(self.table.place_waiting())  # restarts whose backoff ended
        self.expire_placements()
        self.check()

    def sweep(self, period_s: float = 0.0, stalled_s: float = 0.0) -> None:
        """Drop silent workers and clients past their grace period. Called every ``period_s``
        seconds: a worker silent for more than the timeout less one period is dropped now, so a
        lost node is always detected within ``worker_timeout_s`` of its last heartbeat.

        ``stalled_s``: how much later than due this sweep runs. Past a period, the master itself
        was not running (a stopped or starved process; an embedded master's loop blocked by the
        user's code, which blocks its worker's heartbeats too): the heartbeats of that time may
        still wait unread, so the stall is not counted as the workers' silence."""
        if stalled_s > period_s:
            # A warning where it would have cost workers; an embedded master's loop blocked
            # for a few seconds by the script (building a model) is routine.
            log.log(
                logging.WARNING if stalled_s >= self.worker_timeout_s else logging.INFO,
                "the master did not run for %.1fs (its process was stopped or its event loop "
                "blocked); that time does not count against its workers' heartbeats",
                stalled_s,
            )
            self.table.excuse(stalled_s)
        for worker_id in self.table.workers.stale(self.worker_timeout_s - period_s):
            queue = self._to_worker.get(worker_id)
            if queue is not None:
                queue.put_nowait(None)
            self._worker_gone(worker_id, f"no heartbeat for {self.worker_timeout_s:g}s")
        for client_id in self.table.clients.expired(self.client_grace_s):
            log.warning("client %s did not return within %.0fs: stopping its actors", client_id, self.client_grace_s)
            self._client_gone(client_id)
        self.out.announce(self.table.place_waiting())  # a backstop for restarts whose backoff ended
        self.expire_placements()
        self.check()

    # ---- GetClusterStatus -------------------------------------------------------------------

    async def GetClusterStatus(
        self,
        request: pb.GetClusterStatusRequest,
        context: grpc.aio.ServicerContext[pb.GetClusterStatusRequest, pb.GetClusterStatusResponse],
    ) -> pb.GetClusterStatusResponse:
        return cluster_status(self.table, address=self.address, uptime_s=time.monotonic() - self.started)


async def _first(events: AsyncIterator[E]) -> E | None:
    try:
        return await anext(events)
    except StopAsyncIteration:
        return None


async def _same_protocol(context: grpc.aio.ServicerContext[Any, Any], version: int) -> None:
    """Abort the session (raises) unless its peer speaks this master's protocol ``version``."""
    if version != _rpc.PROTOCOL_VERSION:
        await context.abort(grpc.StatusCode.FAILED_PRECONDITION, _rpc.version_mismatch(version))


async def _registration(
    events: AsyncIterator[pb.WorkerEvent], context: grpc.aio.ServicerContext[pb.WorkerEvent, pb.WorkerCommand]
) -> pb.RegisterWorker:
    """A worker session's first event, its registration; the session is aborted (raises) unless
    it is one this master can take."""
    first = await _first(events)
    if first is None or not first.HasField("register_worker"):
        await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "WorkerSession must open with RegisterWorker")
    reg = first.register_worker
    await _same_protocol(context, reg.version)
    if not 1 <= reg.cpus <= _resources.MAX_CPUS:
        await context.abort(
            grpc.StatusCode.INVALID_ARGUMENT,
            f"RegisterWorker.cpus must be 1..{_resources.MAX_CPUS}, got {reg.cpus}",
        )
    if reg.gpus > _resources.MAX_GPUS:
        await context.abort(
            grpc.StatusCode.INVALID_ARGUMENT,
            f"RegisterWorker.gpus must be 0..{_resources.MAX_GPUS}, got {reg.gpus}",
        )
    return reg


async def _opening(
    events: AsyncIterator[pb.ClientEvent], context: grpc.aio.ServicerContext[pb.ClientEvent, pb.ClientNotice]
) -> pb.OpenSession:
    """A client session's first event, its opening; the session is aborted (raises) unless it
    is one this master can take."""
    first = await _first(events)
    if first is None or not first.HasField("open_session"):
        await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "ClientSession must open with OpenSession")
    opening = first.open_session
    await _same_protocol(context, opening.version)
    if problem := client_id_problem(opening.client_id):  # its copies' tokens start with it
        await context.abort(grpc.StatusCode.INVALID_ARGUMENT, problem)
    return opening
