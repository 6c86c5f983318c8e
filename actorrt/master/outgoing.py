"""What the master sends on its sessions: the answers of the table and of recovery, as messages.

Placements become ``StartActor`` commands for workers and ``ActorPlaced`` / ``ActorMoved``
notices for clients; ends become ``ActorRestarting`` / ``ActorDied``; releases become
``StopActor``. Each goes on the queue of its session's stream (the servicer's ``to_worker`` and
``to_client`` maps, which it opens and closes): a message for a session that is gone is
dropped, and its successor is told what it must know when it opens. Metrics and the log lines
of each outcome are kept here too. Runs on the master's loop; raises nothing of its own.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable, Set

from actorrt.common.logs import ids
from actorrt.master.metrics import MasterMetrics
from actorrt.master.output import ClientOutbox
from actorrt.master.records import Actor, Ended, Placement, Request
from actorrt.master.recovery import LOST_WHILE_MASTER_DOWN, Died, Effect, Readopted, Tell
from actorrt.master.restarts import RESTART_STABLE_S
from actorrt.master.table import ClusterTable
from actorrt.v1 import common_pb2
from actorrt.v1 import master_pb2 as pb

__all__ = ["Outgoing"]

log = logging.getLogger("actorrt.master")


def _told(actor: Actor, holders: Iterable[str]) -> set[str]:
    """The clients to tell what happens to ``actor``: its creator and every holder."""
    return {actor.client_id, *holders} - {""}


def _limit(actor: Actor) -> str:
    return "unlimited" if actor.max_restarts < 0 else str(actor.max_restarts)


class Outgoing:
    """Messages to the sessions of ``to_worker`` and ``to_client`` (by worker and client id)."""

    def __init__(
        self,
        table: ClusterTable,
        metrics: MasterMetrics,
        to_worker: dict[str, asyncio.Queue[pb.WorkerCommand | None]],
        to_client: dict[str, ClientOutbox],
    ) -> None:
        self.table = table
        self.metrics = metrics
        self.to_worker = to_worker
        self.to_client = to_client
        # Set once the cluster is being stopped on purpose: nothing is started or announced any
        # more (the workers are told to stop, the clients that their actors died).
        self.stopped = False

    def send_worker(self, worker_id: str, msg: pb.WorkerCommand) -> None:
        queue = self.to_worker.get(worker_id)
        if queue is not None:
            queue.put_nowait(msg)

    def send_client(self, client_id: str, msg: pb.ClientNotice) -> None:
        """Queue a control notice for the client's session: never dropped (output goes through
        ``forward_output``, which may drop it for a client that does not keep up)."""
        outbox = self.to_client.get(client_id)
        if outbox is not None:
            outbox.put_nowait(msg)

    # ---- placements -------------------------------------------------------------------------

    def announce(self, placements: list[Placement]) -> None:
        """Start each placed actor on its worker; tell its creator where it is (a restart's
        creator constructs it again there, its other holders attach). Nothing once ``stopped``."""
        if self.stopped:
            return
        for p in placements:
            self.metrics.placement_done(p.request)
            actor = self.table.actors[p.actor_id]
            if not p.again:  # a request answered again was started when it was first placed
                self.send_worker(
                    p.worker_id,
                    pb.WorkerCommand(
                        start_actor=pb.StartActor(
                            actor_id=p.actor_id,
                            slot=p.slot,
                            client_id=p.request.client_id,
                            resources=common_pb2.Resources(
                                num_cpus=actor.num_cpus,
                                num_gpus=len(p.gpu_ids),
                                max_memory_mb=actor.max_memory_mb,
                            ),
                            gpu_ids=p.gpu_ids,
                            class_name=actor.class_name,
                            name=actor.name,
                            detached=actor.detached,
                            max_restarts=actor.max_restarts,
                            restarts=actor.restarts,
                            shape=pb.ActorShape(methods=actor.methods, attributes=actor.attributes),
                        )
                    ),
                )
            if not p.request.restart_of:
                self._placed(p.request.client_id, p.request.request_id, p)
                continue
            for client_id in _told(actor, self.table.refs.holders_of(actor.actor_id)):
                if client_id == actor.client_id and p.answers:  # it never had it: its request is answered
                    self.metrics.placement_done(Request(client_id, p.answers))
                    self._placed(client_id, p.answers, p)
                else:
                    self.moved(client_id, actor)

    def _placed(self, client_id: str, request_id: int, p: Placement) -> None:
        self.send_client(
            client_id,
            pb.ClientNotice(
                actor_placed=pb.ActorPlaced(
                    request_id=request_id, actor_id=p.actor_id, endpoint=p.endpoint, node=p.node, gpu_ids=p.gpu_ids
                )
            ),
        )

    def moved(self, client_id: str, actor: Actor, construct: bool | None = None) -> None:
        """Tell ``client_id`` where ``actor`` runs since its restart: its creator constructs it
        there (unless ``construct`` says otherwise), everyone else attaches."""
        worker = self.table.workers.get(actor.worker_id)
        self.send_client(
            client_id,
            pb.ClientNotice(
                actor_moved=pb.ActorMoved(
                    actor_id=actor.actor_id,
                    endpoint=actor.endpoint,
                    node=worker.node if worker is not None else "",
                    gpu_ids=actor.gpu_ids,
                    construct=client_id == actor.client_id if construct is None else construct,
                    restarts=actor.restarts,
                )
            ),
        )

    def fail_placement(self, client_id: str, request_id: int, reason: str, code: int = 0) -> None:
        self.send_client(
            client_id,
            pb.ClientNotice(
                placement_failed=pb.PlacementFailed(
                    request_id=request_id,
                    reason=reason,
                    code=code,  # type: ignore[arg-type]
                )
            ),
        )

    # ---- ends -------------------------------------------------------------------------------

    def restarting(self, ended: Ended) -> None:
        """Tell its creator and holders that ``ended.actor`` restarts."""
        actor = ended.actor
        log.info(
            "actor %s (%s) died: %s; restarting it (restart %d of %s)%s",
            actor.actor_id,
            actor.class_name,
            ended.cause,
            actor.restarts,
            _limit(actor),
            f" in {ended.delay_s:g}s: its last {actor.quick_exits} instances lived under {RESTART_STABLE_S:g}s each"
            if ended.delay_s
            else "",
            extra=ids(actor_id=actor.actor_id, client_id=actor.client_id),
        )
        self.metrics.actor_restarted(ended.cause)
        notice = pb.ClientNotice(
            actor_restarting=pb.ActorRestarting(actor_id=actor.actor_id, cause=ended.cause, restarts=actor.restarts)
        )
        for client_id in _told(actor, ended.holders):
            self.send_client(client_id, notice)

    def died(self, actor: Actor, cause: str, holders: Set[str], exit_code: int = 0) -> None:
        """Tell its creator and ``holders`` that ``actor`` died (the table has recorded it), and
        fail its creator's resent request that waited for its restart."""
        if actor.answers:
            self.metrics.placement_dropped(actor.client_id, actor.answers)
            self.fail_placement(actor.client_id, actor.answers, f"the actor placed for it died: {cause}")
            actor.answers = 0
        log.info(
            "actor %s (%s) died: %s",
            actor.actor_id,
            actor.class_name,
            cause,
            extra=ids(actor_id=actor.actor_id, worker_id=actor.worker_id, client_id=actor.client_id),
        )
        self.metrics.actor_died(cause)
        notice = pb.ClientNotice(actor_died=pb.ActorDied(actor_id=actor.actor_id, cause=cause, exit_code=exit_code))
        for client_id in _told(actor, holders):
            self.send_client(client_id, notice)

    def stop(self, actor: Actor) -> None:
        self.send_worker(
            actor.worker_id, pb.WorkerCommand(stop_actor=pb.StopActor(actor_id=actor.actor_id, reason=actor.stopping))
        )

    # ---- recovery ---------------------------------------------------------------------------

    def recovered(self, effects: list[Effect]) -> None:
        """Carry out what ``Recovery`` decided, in order."""
        for fx in effects:
            if isinstance(fx, Died):
                notice = pb.ActorDied(actor_id=fx.actor_id, cause=fx.cause)
                self.send_client(fx.client_id, pb.ClientNotice(actor_died=notice))
            elif isinstance(fx, Readopted):
                log.info(
                    "actor %s (%s), lost while the master was down, is placed again from its creator's "
                    "word (restart %d of %s)",
                    fx.actor.actor_id,
                    fx.actor.class_name,
                    fx.actor.restarts,
                    _limit(fx.actor),
                    extra=ids(actor_id=fx.actor.actor_id, client_id=fx.actor.client_id),
                )
                self.metrics.actor_restarted(LOST_WHILE_MASTER_DOWN)
            elif isinstance(fx, Tell):
                self._tell_readopted(fx)
            else:
                self.announce(fx.placements)

    def _tell_readopted(self, tell: Tell) -> None:
        actor = tell.actor
        restarting = pb.ClientNotice(
            actor_restarting=pb.ActorRestarting(
                actor_id=actor.actor_id, cause=LOST_WHILE_MASTER_DOWN, restarts=actor.restarts
            )
        )
        for client_id in tell.clients:
            self.send_client(client_id, restarting)
            if tell.placed:
                self.moved(client_id, actor, construct=False)
