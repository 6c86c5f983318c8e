"""The clients: the processes that create and hold actors, each over one session.

A client goes::

    (new) --open--> CONNECTED --lost: its session broke--> LOST --open: it came back--> CONNECTED
                                                     LOST --grace period over: expired()--> (removed)
    (new) --absent: a worker registers with an actor of a client not back yet--> LOST
    CONNECTED --remove: it closed its session--> (removed)

A lost client has its grace period (``lost_at`` + the master's ``client_grace_s``) to come back
before its actors are stopped. A client that is an actor's own process (``actor_id``) is removed
when that actor ends: the actors it created die with it.

Invariants (``validate``): connected exactly when ``lost_at`` is not set; a client lists as its
own exactly the live actors it created; an actor whose client is gone is being stopped (or is
detached, with no creator). Plain state on the master's loop, no I/O; time from the
injected ``clock``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from actorrt.master.records import Actor
from actorrt.master.state import Records, check

__all__ = ["Client", "Clients"]


@dataclass
class Client:
    client_id: str
    hostname: str
    pid: int
    connected: bool = True
    lost_at: float | None = None
    actors: set[str] = field(default_factory=set)  # those it created
    # The actor whose own process this client is: the actors it created die with that actor.
    actor_id: str = ""


class Clients(Records[str, Client]):
    """The clients by id, read like a dict."""

    def __init__(self, clock: Callable[[], float]) -> None:
        super().__init__({})
        self.clock = clock

    def open(self, client_id: str, hostname: str, pid: int, actor_id: str = "") -> Client:
        """``client_id`` opened a session (its first, or again after a lost one)."""
        client = self._records.get(client_id)
        if client is None:
            client = Client(client_id, hostname, pid)
            self._records[client_id] = client
        client.connected, client.lost_at = True, None
        client.hostname, client.pid = hostname or client.hostname, pid or client.pid
        client.actor_id = actor_id or client.actor_id
        return client

    def absent(self, client_id: str) -> Client:
        """The client that created an actor a worker still hosts: listed (lost since now, its
        grace period running) if it has not come back to this master yet."""
        client = self._records.get(client_id)
        if client is None:
            client = Client(client_id, "", 0, connected=False, lost_at=self.clock())
            self._records[client_id] = client
        return client

    def connected(self, client_id: str) -> bool:
        client = self._records.get(client_id)
        return client is not None and client.connected

    def lost(self, client_id: str) -> None:
        """Its session broke: its grace period starts (if it was connected)."""
        client = self._records.get(client_id)
        if client is not None and client.connected:
            client.connected, client.lost_at = False, self.clock()

    def expired(self, grace_s: float) -> list[str]:
        """The lost clients whose grace period of ``grace_s`` is over."""
        deadline = self.clock() - grace_s
        return [
            c.client_id
            for c in self._records.values()
            if not c.connected and c.lost_at is not None and c.lost_at <= deadline
        ]

    def excuse(self, seconds: float) -> None:
        """The master did not run for ``seconds``: that time does not count against grace periods."""
        now = self.clock()
        for client in self._records.values():
            if client.lost_at is not None:
                client.lost_at = min(now, client.lost_at + seconds)

    def of_actor(self, actor_id: str) -> list[str]:
        """The clients that are ``actor_id``'s own process."""
        return [c.client_id for c in self._records.values() if c.actor_id == actor_id]

    def remove(self, client_id: str) -> Client | None:
        """Forget ``client_id``; returns it (with the actors it created), or None."""
        return self._records.pop(client_id, None)

    def validate(self, actors: Mapping[str, Actor]) -> None:
        """Raises ``TableInvariantError`` naming the first broken invariant; ``actors``: the
        table's live actors."""
        for cid, c in self._records.items():
            check(c.client_id == cid, f"client {cid} is filed under another id ({c.client_id})")
            check(c.connected == (c.lost_at is None), f"client {cid}: connected={c.connected}, lost_at={c.lost_at}")
            check(
                all(a in actors and actors[a].client_id == cid for a in c.actors),
                f"client {cid} lists actors that are not its own live actors",
            )
        for aid, a in actors.items():
            client = self._records.get(a.client_id)
            check(
                client is not None or bool(a.stopping) or (a.detached and not a.client_id),
                f"actor {aid}: its client {a.client_id} is gone and nobody is stopping it",
            )
            check(client is None or aid in client.actors, f"actor {aid}: its client {a.client_id} does not list it")
