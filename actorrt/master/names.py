"""Actor names: unique among live actors, and reserved by the queued requests that ask for one.

A name goes::

    (free) --reserve: a named request queued--> RESERVED --bind: it is placed--> TAKEN
                 RESERVED --unreserve: withdrawn, expired, its client gone--> (free)
    (free) --adopt: an actor rebuilt from its worker's or its creator's word--> TAKEN
    TAKEN --release: its actor left the table--> (free)

A name maps to its actor's id, or, while reserved, to ``"client_id/request_id"`` of the request
(actor ids never contain a "/"). A name already taken is never adopted: the actor that has it
keeps it, the other goes nameless.

Invariants (``validate``): a name maps to a live actor of that name, or to a queued request for
it; a live actor's name maps to it. Plain state on the master's loop, no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping

from actorrt.master.records import Actor, Request, RequestKey
from actorrt.master.state import Records, check

__all__ = ["Names"]


def _reserved(key: RequestKey) -> str:
    """How a name reserved by the queued request ``key`` is marked."""
    return f"{key[0]}/{key[1]}"


class Names(Records[str, str]):
    """Name -> the actor id that has it, or the mark of the request that reserved it."""

    def __init__(self) -> None:
        super().__init__({})

    def taken(self, name: str, key: RequestKey) -> str:
        """Who has ``name`` other than the request ``key`` itself (an actor id, or another
        request's mark), or ""."""
        holder = self._records.get(name)
        return holder if holder is not None and holder != _reserved(key) else ""

    def reserve(self, name: str, key: RequestKey) -> None:
        """The queued request ``key`` asks for ``name`` (free, or reserved by it already)."""
        self._records[name] = _reserved(key)

    def unreserve(self, name: str, key: RequestKey) -> None:
        """The request ``key`` left the queue unplaced: its name is free again."""
        if self._records.get(name) == _reserved(key):
            del self._records[name]

    def bind(self, name: str, actor_id: str) -> None:
        """The request that reserved ``name`` (or could take it at once) placed ``actor_id``."""
        self._records[name] = actor_id

    def adopt(self, name: str, actor_id: str) -> str:
        """``actor_id`` had ``name`` before this table knew it: it keeps it if nobody has it now.
        Returns the name it keeps ("" if another has it)."""
        if name in self._records:
            return ""
        self._records[name] = actor_id
        return name

    def release(self, name: str, actor_id: str) -> None:
        """``actor_id`` left the table: its name is free."""
        if self._records.get(name) == actor_id:
            del self._records[name]

    def validate(self, actors: Mapping[str, Actor], queue: Mapping[RequestKey, Request]) -> None:
        """Raises ``TableInvariantError`` naming the first broken invariant; ``actors``: the
        table's live actors, ``queue``: its waiting requests."""
        for name, holder in self._records.items():
            actor = actors.get(holder)
            owner, _, number = holder.rpartition("/")
            request = queue.get((owner, int(number))) if owner else None
            check(
                (actor is not None and actor.name == name) or (request is not None and request.name == name),
                f"the name {name!r} is held by {holder}, which is neither a live actor nor a queued request of it",
            )
        for aid, a in actors.items():
            check(not a.name or self._records.get(a.name) == aid, f"actor {aid}: its name {a.name!r} points elsewhere")
