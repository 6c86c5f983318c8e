"""The placement queue: requests waiting for a slot, oldest first, with their deadlines; and
which request placed which live actor.

A request goes::

    (new) --add--> WAITING --remove: placed, withdrawn, its client gone--> (gone)
                      '--expire: its timeout_s ran out--> (gone; the caller fails it)

    placed by a client's request: ANSWERED (``placed_by``) --its actor gone--> (forgotten)

A request resent after a reconnect (its ActorPlaced lost with the old stream) is found by its
key: answered again with the live actor it placed, never placed twice. A restart's request
(``restart_of``, a negative request id: never a client's) is indexed by its actor.

Invariants (``validate``): each request is filed under its own key and waits for a client that
is here (connected, unless it is a restart); each waiting request with a timeout has a deadline;
the restart index names exactly the waiting restarts, one for each restarting actor; an
answered request's actor is live and was placed by that request. Deadlines of requests no longer waiting
stay in the heap until they come up (skipped then): no scan when a request leaves. Plain state
on the master's loop, no I/O; time from the injected ``clock``.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Mapping

from actorrt.master.clients import Client
from actorrt.master.records import Actor, Request, RequestKey
from actorrt.master.state import Records, check

__all__ = ["PlacementQueue"]


class PlacementQueue(Records[RequestKey, Request]):
    """The waiting requests by key (oldest first), read like a dict."""

    def __init__(self, clock: Callable[[], float]) -> None:
        super().__init__({})
        self.clock = clock
        # (deadline, client_id, request_id), a min-heap; entries of requests gone are skipped.
        self._deadlines: list[tuple[float, str, int]] = []
        self._restarts: dict[str, RequestKey] = {}  # actor id -> the request placing it again
        # (client_id, request_id) -> the live actor that request placed.
        self._placed_by: dict[RequestKey, str] = {}

    # ---- waiting ----------------------------------------------------------------------------

    def add(self, req: Request) -> None:
        """Queue ``req`` last; its deadline (``timeout_s``) starts now."""
        key = (req.client_id, req.request_id)
        self._records[key] = req
        if req.restart_of:
            self._restarts[req.restart_of] = key
        if req.timeout_s > 0:
            heapq.heappush(self._deadlines, (self.clock() + req.timeout_s, req.client_id, req.request_id))

    def remove(self, key: RequestKey) -> Request | None:
        """Take the request with ``key`` out of the queue (placed, withdrawn, or its client gone);
        None if it was not waiting."""
        req = self._records.pop(key, None)
        if req is not None and req.restart_of:
            self._restarts.pop(req.restart_of, None)
        return req

    def restart_key(self, actor_id: str) -> RequestKey | None:
        """The waiting request that places ``actor_id`` again, if any."""
        return self._restarts.get(actor_id)

    def of_client(self, client_id: str) -> list[RequestKey]:
        """The waiting requests ``client_id`` sent itself (not its actors' restarts)."""
        return [k for k in self._records if k[0] == client_id and k[1] > 0]

    # ---- deadlines --------------------------------------------------------------------------

    def next_deadline(self) -> float | None:
        """When the earliest waiting request's placement timeout ends (the clock's time), if any."""
        while self._deadlines:
            deadline, client_id, request_id = self._deadlines[0]
            req = self._records.get((client_id, request_id))
            if req is not None and req.timeout_s > 0:
                return deadline
            heapq.heappop(self._deadlines)
        return None

    def expire(self) -> list[Request]:
        """Take out the requests whose placement timeout has ended; returns them (to be failed)."""
        now = self.clock()
        expired = []
        while (deadline := self.next_deadline()) is not None and deadline <= now:
            _, client_id, request_id = heapq.heappop(self._deadlines)
            req = self.remove((client_id, request_id))
            assert req is not None  # next_deadline skips what is no longer queued
            expired.append(req)
        return expired

    # ---- answered ---------------------------------------------------------------------------

    def placed(self, req: Request, actor_id: str) -> None:
        """A client's ``req`` placed ``actor_id``: the same request resent is answered with it."""
        if req.request_id > 0:
            self._placed_by[(req.client_id, req.request_id)] = actor_id

    def placed_by(self, key: RequestKey) -> str | None:
        """The live actor the request with ``key`` placed, if any."""
        return self._placed_by.get(key)

    def forget_placed(self, key: RequestKey, actor_id: str) -> None:
        """``actor_id`` left the table, or its client did: its request answers no more."""
        if self._placed_by.get(key) == actor_id:
            del self._placed_by[key]

    # ---- invariants -------------------------------------------------------------------------

    def validate(self, actors: Mapping[str, Actor], clients: Mapping[str, Client]) -> None:
        """Raises ``TableInvariantError`` naming the first broken invariant; ``actors``: the
        table's live actors, ``clients``: its clients."""
        for (cid, rid), req in self._records.items():
            check((req.client_id, req.request_id) == (cid, rid), f"request {cid}/{rid} is filed under another key")
            client = clients.get(cid)
            check(
                client is not None and (client.connected or rid < 0),
                f"request {cid}/{rid} waits for a client that is not here",
            )
            if req.restart_of:
                check(
                    self._restarts.get(req.restart_of) == (cid, rid),
                    f"request {cid}/{rid} places {req.restart_of} again but is not indexed as its restart",
                )
        for aid, a in actors.items():
            check(
                not a.restarting or aid in self._restarts, f"actor {aid} is restarting but no request places it again"
            )
        for actor_id, key in self._restarts.items():
            restart = self._records.get(key)
            check(
                restart is not None and restart.restart_of == actor_id,
                f"the restart of {actor_id} is indexed as request {key}, which does not place it",
            )
        timed = {(cid, rid) for _, cid, rid in self._deadlines}
        check(
            all(k in timed for k, r in self._records.items() if r.timeout_s > 0),
            "a queued request with a timeout has no deadline",
        )
        for (cid, rid), aid in self._placed_by.items():
            actor = actors.get(aid)
            check(
                actor is not None and (actor.client_id, actor.request_id) == (cid, rid),
                f"request {cid}/{rid} is recorded as having placed {aid}, which is not that request's live actor",
            )
