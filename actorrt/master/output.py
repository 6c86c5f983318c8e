"""The master's part in actor output and logs: forwarding output to owners, ``GetActorLog``.

A mixin of ``MasterServicer`` (it uses the servicer's table and session queues), kept apart so
the servicer stays about sessions and placement. Everything runs on the master's loop.

- ``ActorOutput`` events from a worker go to the actor's owning client, unless that client
  opened its session with ``mute_actor_output`` (``connect(log_to_driver=False)``). What waits
  for a client's session is a ``ClientOutbox``: a client that does not read (a blocked loop, a
  terminal that does not take its lines) holds at most ``CLIENT_OUTPUT_BUFFER_BYTES`` of output
  in the master; the rest is dropped and counted, and control notices are never dropped.
- ``GetActorLog`` finds the worker that hosts (or hosted: the cluster table remembers the last
  ``DEAD_ACTORS_KEPT`` dead actors) the actor and asks it over its ``WorkerSession`` for the tail
  of the actor's log file: the log stays on its node and the master only relays the answer.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections import deque
from typing import TYPE_CHECKING, Any

import grpc

from actorrt.common.actor_output import DEFAULT_TAIL_BYTES, NOTICE_PREFIX
from actorrt.transport import rpc as _rpc
from actorrt.v1 import master_pb2 as pb

if TYPE_CHECKING:
    from actorrt.master.table import ClusterTable

__all__ = ["ClientOutbox", "LogReadError", "MasterLogs"]

log = logging.getLogger("actorrt.master")

LOG_READ_TIMEOUT_S = 10.0
MAX_TAIL_BYTES = _rpc.MAX_LOG_TAIL_BYTES  # the answer must fit one message the master takes
# Actor output queued for one client whose session does not keep up: past it, output is dropped
# until the queue is down to half of it, then one notice per actor counts what was lost.
CLIENT_OUTPUT_BUFFER_BYTES = 4 * 2**20


class ClientOutbox:
    """The notices that wait for one client's session, in order; ``None`` ends the session.

    Control notices (placements, deaths) always queue. Actor output queues while less than
    ``max_output_bytes`` of it waits; past that the master drops output (the worker's log file
    keeps every line) until the client has read the queue down to half, then queues, at the
    place of the gap, one line per actor that counts its dropped lines. So a client that stops
    reading costs the master a bounded amount of memory, and gets everything else in order
    when it reads again.
    """

    def __init__(self, client_id: str, max_output_bytes: int = CLIENT_OUTPUT_BUFFER_BYTES) -> None:
        self.client_id = client_id
        self.max_output_bytes = max_output_bytes
        self.output_bytes = 0
        self.episodes = 0  # times it fell behind: the first is logged as a warning, the rest quietly
        self._items: deque[tuple[pb.ClientNotice | None, int]] = deque()  # (notice, its output bytes)
        self._nonempty = asyncio.Event()
        self._dropping = False
        self._dropped: dict[str, tuple[str, int, int]] = {}  # actor_id -> (class_name, pid, lines)

    def put_nowait(self, notice: pb.ClientNotice | None) -> None:
        """Queue a control notice, or ``None`` (end of session). Never dropped."""
        self._append(notice, 0)

    def put_output(self, msg: pb.ActorOutput) -> None:
        """Queue actor output, or drop and count it if the client is too far behind."""
        size = msg.ByteSize()
        if not self._dropping and self.output_bytes > 0 and self.output_bytes + size > self.max_output_bytes:
            self._dropping = True
            self.episodes += 1
            log.log(
                logging.WARNING if self.episodes == 1 else logging.DEBUG,
                "client %s does not keep up with its session: dropping its actors' output past %d MiB (counted)",
                self.client_id,
                self.max_output_bytes // 2**20,
            )
        if self._dropping:
            class_name, pid, lines = self._dropped.get(msg.actor_id, (msg.class_name, msg.pid, 0))
            self._dropped[msg.actor_id] = (class_name, pid, lines + len(msg.lines))
            return
        self._append(pb.ClientNotice(actor_output=msg), size)

    async def get(self) -> pb.ClientNotice | None:
        """The next notice to write on the session, waiting for one."""
        while not self._items:
            self._nonempty.clear()
            await self._nonempty.wait()
        notice, size = self._items.popleft()
        self.output_bytes -= size
        if self._dropping and self.output_bytes <= self.max_output_bytes // 2:
            self._resume()
        return notice

    def _append(self, notice: pb.ClientNotice | None, output_bytes: int) -> None:
        self._items.append((notice, output_bytes))
        self.output_bytes += output_bytes
        self._nonempty.set()

    def _resume(self) -> None:
        """Stop dropping: queue one counted notice per actor whose lines were dropped."""
        self._dropping = False
        dropped, self._dropped = self._dropped, {}
        total = sum(lines for _, _, lines in dropped.values())
        log.log(
            logging.WARNING if self.episodes == 1 else logging.DEBUG,
            "client %s reads again: %d lines of its actors' output were dropped",
            self.client_id,
            total,
        )
        for actor_id, (class_name, pid, lines) in dropped.items():
            text = (
                f"{NOTICE_PREFIX} {lines} lines of output dropped: the client did not keep up; "
                f"'actorrt logs {actor_id}' has them]"
            )
            notice = pb.ActorOutput(
                actor_id=actor_id, class_name=class_name, pid=pid, lines=[pb.OutputLine(text=text, stderr=True)]
            )
            self._append(pb.ClientNotice(actor_output=notice), notice.ByteSize())


class LogReadError(Exception):
    """Why an actor's log could not be read (``MasterLogs.read_actor_log``): ``code`` is the
    gRPC status ``GetActorLog`` answers with, ``message`` says why to a person."""

    def __init__(self, code: grpc.StatusCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class MasterLogs:
    table: ClusterTable
    _to_worker: dict[str, Any]
    _to_client: dict[str, ClientOutbox]

    def _init_logs(self) -> None:
        self._muted: set[str] = set()
        self._log_reads: dict[int, asyncio.Future[pb.ActorLog]] = {}
        self._log_read_ids = itertools.count(1)

    # ---- hooks called by the servicer ----------------------------------------------------------

    def set_muted(self, client_id: str, muted: bool) -> None:
        if muted:
            self._muted.add(client_id)
        else:
            self._muted.discard(client_id)

    def forward_output(self, msg: pb.ActorOutput) -> None:
        actor = self.table.actors.get(msg.actor_id)
        if actor is None or actor.client_id in self._muted:
            return
        outbox = self._to_client.get(actor.client_id)
        if outbox is not None:
            outbox.put_output(msg)

    def log_read_answered(self, msg: pb.ActorLog) -> None:
        fut = self._log_reads.pop(msg.request_id, None)
        if fut is not None and not fut.done():
            fut.set_result(msg)

    # ---- GetActorLog ------------------------------------------------------------------------

    def _find_actor(self, wanted: str, exact: bool = False) -> tuple[str, str, str, bool, str]:
        """(actor_id, class_name, worker_id, alive, cause) for an id or (unless ``exact``) a
        unique id prefix; LookupError when none matches, ValueError when several do."""
        if exact and wanted not in self.table.actors and wanted not in self.table.dead:
            raise LookupError(f"no actor {wanted!r}: not alive, and not among the {len(self.table.dead)} recent dead")
        live = [a for a in self.table.actors if a.startswith(wanted)]
        dead = [a for a in self.table.dead if a.startswith(wanted) and a not in self.table.actors]
        if wanted in self.table.actors or wanted in self.table.dead:
            live, dead = ([wanted], []) if wanted in self.table.actors else ([], [wanted])
        matches = live + dead
        if not matches:
            raise LookupError(f"no actor {wanted!r}: not alive, and not among the {len(self.table.dead)} recent dead")
        if len(matches) > 1:
            raise ValueError(f"actor id prefix {wanted!r} matches {len(matches)} actors; give more of it")
        if live:
            a = self.table.actors[live[0]]
            return a.actor_id, a.class_name, a.worker_id, True, ""
        d = self.table.dead[dead[0]]
        return d.actor_id, d.class_name, d.worker_id, False, d.cause

    async def read_actor_log(
        self, wanted: str, max_bytes: int, *, exact: bool = False, timeout_s: float = LOG_READ_TIMEOUT_S
    ) -> pb.GetActorLogResponse:
        """The tail (at most ``max_bytes``, 0: the default; never over ``MAX_TAIL_BYTES``) of the
        log of the live or recently dead actor ``wanted`` (an id, or unless ``exact`` a unique
        prefix), asked of the worker daemon that hosts or hosted it: what ``actorrt logs`` and
        the dashboard's ``/api/actors/ID/log`` answer. Master loop; raises ``LogReadError``."""
        try:
            actor_id, class_name, worker_id, alive, cause = self._find_actor(wanted, exact)
        except LookupError as e:
            raise LogReadError(grpc.StatusCode.NOT_FOUND, str(e)) from None
        except ValueError as e:
            raise LogReadError(grpc.StatusCode.INVALID_ARGUMENT, str(e)) from None
        worker = self.table.workers.get(worker_id)
        queue = self._to_worker.get(worker_id)
        if worker is None or queue is None:
            raise LogReadError(
                grpc.StatusCode.UNAVAILABLE,
                f"actor {actor_id} ran on worker {worker_id or '?'}, which is no longer in the cluster; "
                f"its log stays on that node under ACTORRT_HOME/logs/actors/",
            )
        request_id = next(self._log_read_ids)
        fut: asyncio.Future[pb.ActorLog] = asyncio.get_running_loop().create_future()
        self._log_reads[request_id] = fut
        max_bytes = min(max_bytes or DEFAULT_TAIL_BYTES, MAX_TAIL_BYTES)
        queue.put_nowait(
            pb.WorkerCommand(
                read_actor_log=pb.ReadActorLog(request_id=request_id, actor_id=actor_id, max_bytes=max_bytes)
            )
        )
        try:
            async with asyncio.timeout(timeout_s):
                answer = await fut
        except TimeoutError:
            raise LogReadError(
                grpc.StatusCode.DEADLINE_EXCEEDED, f"worker {worker_id} did not send the log within {timeout_s:g}s"
            ) from None
        finally:
            self._log_reads.pop(request_id, None)
        return pb.GetActorLogResponse(
            actor_id=actor_id,
            class_name=class_name,
            node=worker.node,
            worker_id=worker_id,
            alive=alive,
            data=answer.data,  # empty when the actor printed nothing (no file)
            truncated=answer.truncated,
            cause=cause,
        )

    async def GetActorLog(
        self,
        request: pb.GetActorLogRequest,
        context: grpc.aio.ServicerContext[pb.GetActorLogRequest, pb.GetActorLogResponse],
    ) -> pb.GetActorLogResponse:
        if not request.actor_id:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "GetActorLog needs an actor_id")
        try:
            return await self.read_actor_log(request.actor_id, request.max_bytes)
        except LogReadError as e:
            await context.abort(e.code, e.message)
