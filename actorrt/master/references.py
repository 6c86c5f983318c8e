"""Who holds each listed actor: the clients with a handle to it, and handle copies on their way.

A client holds an actor from its creation (the creator), an ``AddRef`` or a lookup, until its
``DropRef``. A handle copy sent to another process travels under a token (``"<sender>.<n>"``,
counted with a sign: the sender's ``AddRef`` counts +1 and the receiver's claim -1, in either
order). A copy goes::

    (none) --sent_copy +1--> COUNTED (>0) --claimed -1--> SETTLED
    (none) --claimed -1: before its sender's word--> COUNTED (<0) --sent_copy +1--> SETTLED
    COUNTED (<0) --claimed again (its bytes loaded again)--> ignored
    COUNTED (>0) --void: its sender left, or its receiver's process is gone--> SETTLED
    COUNTED (<0) --its sender left--> SETTLED
    COUNTED (>0) --void_later: the call carrying it failed, its receiver's process lives--> WAITING ON
        THE RECEIVER --process_ended(receiver)--> SETTLED (voided, unless claimed first)
    SETTLED --claimed: its bytes loaded again, here or in another process; a void copy's late claim--> ignored

A copy is claimed once, however often its bytes are loaded: the settled ones are remembered
(the newest ``SETTLED_KEPT`` per actor), and a claim of one changes nothing.

An actor is held while a client holds it, a copy of it is counted, or it is not refcounted
(``counted=False``: rebuilt from a worker's or its creator's word by a restarted master, who
holds it is not known for sure). The table releases one held no more (``held``).

Tokens have one form, the client's own: its client id (``CLIENT_ID_FORM``: at most 64 letters,
digits and ``._:@-``, checked when its session opens) and a counter (``<client id>.<n>``, n of at
most 20 digits). The servicer refuses a session that sends another form (``token_problem``): a
copy named by an unbounded token would be kept, counted or voided, in the master's memory.

Invariants (``validate``): an actor held no more was released (it is detached, or stopping);
the holders of every listed actor are clients, and each client's holdings mirror them; a copy counted zero times is not kept; a copy is never both counted and
settled; at most ``SETTLED_KEPT`` settled copies per actor; copies sent, copies waiting on a
receiver and uncounted actors name listed actors. Plain state on the master's loop, no I/O.
"""

from __future__ import annotations

import re
from collections import OrderedDict
from collections.abc import Mapping, Set

from actorrt.common.text import printable
from actorrt.master.records import Actor
from actorrt.master.state import check

__all__ = ["CLIENT_ID_FORM", "SETTLED_KEPT", "References", "client_id_problem", "token_problem"]

# Per actor: settled handle copies (claimed or voided) whose later claim is still recognised and
# ignored: a void copy's late claim, or the bytes of a pickled handle loaded again. The oldest
# are forgotten first (a claim of one of those counts again).
SETTLED_KEPT = 1_000

# A client id as the master takes it (the client makes 16 hex digits), and a copy's token.
CLIENT_ID_FORM = "1 to 64 letters, digits or ._:@-"
_CLIENT_ID = re.compile(r"[A-Za-z0-9._:@-]{1,64}")
_TOKEN = re.compile(r"([A-Za-z0-9._:@-]{1,64})\.[0-9]{1,20}")

_NO_TOKENS: Mapping[str, int] = {}


def client_id_problem(client_id: str) -> str | None:
    """What is wrong with ``client_id`` as a session's id, or None. Pure."""
    if _CLIENT_ID.fullmatch(client_id):
        return None
    return f"OpenSession.client_id must be {CLIENT_ID_FORM}; got {_shown(client_id)}"


def token_problem(field: str, token: str, sender: str = "") -> str | None:
    """What is wrong with the handle copy ``token`` that ``field`` carries, or None: it must be
    ``<client id>.<n>``, and the ``sender``'s own when given (an ``AddRef``, or the ``DropRef``
    that voids a copy its sender sent); a claim names another client's copy. Pure."""
    match = _TOKEN.fullmatch(token)
    if match is not None and (not sender or match.group(1) == sender):
        return None
    whose = f"this client's own, {sender}.<n>" if sender else "<client id>.<n>"
    return f"{field} must be a handle copy's token, {whose} (n: at most 20 digits); got {_shown(token)}"


def _shown(text: str) -> str:
    """``text`` (a peer's) in a refusal: its start, escaped, and its length."""
    return f"'{printable(text, 40)}' ({len(text)} characters)"


_NO_IDS: Set[str] = frozenset()


class References:
    """The handles to each listed actor: holders, copies on their way, settled copies."""

    def __init__(self) -> None:
        self._holders: dict[str, set[str]] = {}  # every listed actor -> clients holding a handle
        self._holding: dict[str, set[str]] = {}  # client -> the actors it holds
        self._tokens: dict[str, dict[str, int]] = {}  # actor -> copies on their way (token -> count)
        self._settled: dict[str, OrderedDict[str, None]] = {}  # actor -> copies claimed or voided (newest last)
        self._voids: dict[str, list[tuple[str, str]]] = {}  # receiver -> (actor id, token) to void
        self._sent: dict[str, set[str]] = {}  # client -> the actors it sent copies of
        self._senders: dict[str, set[str]] = {}  # actor -> the clients that sent copies of it
        self._uncounted: set[str] = set()

    # ---- reading ----------------------------------------------------------------------------

    def holders_of(self, actor_id: str) -> Set[str]:
        """The clients holding a handle to ``actor_id`` (live: it changes as they do)."""
        return self._holders.get(actor_id, _NO_IDS)

    def holding(self, client_id: str) -> Set[str]:
        """The actors ``client_id`` holds a handle to."""
        return self._holding.get(client_id, _NO_IDS)

    def holds(self, client_id: str, actor_id: str) -> bool:
        return client_id in self._holders.get(actor_id, _NO_IDS)

    def tokens_of(self, actor_id: str) -> Mapping[str, int]:
        """The copies of ``actor_id``'s handle on their way: token -> count."""
        return self._tokens.get(actor_id, _NO_TOKENS)

    def settled_of(self, actor_id: str) -> Set[str]:
        """The settled (claimed or voided) copies of ``actor_id``'s handle whose claim is still ignored."""
        return self._settled.get(actor_id, {}).keys()

    def sent_by(self, client_id: str) -> Set[str]:
        """The actors ``client_id`` sent copies of a handle to."""
        return self._sent.get(client_id, _NO_IDS)

    def counted(self, actor_id: str) -> bool:
        """Whether ``actor_id`` is released once nobody holds it."""
        return actor_id not in self._uncounted

    def held(self, actor_id: str) -> bool:
        """Whether a client holds ``actor_id``, a copy of it is counted, or it is not counted."""
        return bool(self._holders[actor_id] or self._tokens.get(actor_id) or actor_id in self._uncounted)

    def count(self, actor_id: str) -> int:
        """Holders and copies on their way (``actorrt status``'s holders)."""
        return len(self._holders[actor_id]) + len(self._tokens.get(actor_id, _NO_TOKENS))

    # ---- actors -----------------------------------------------------------------------------

    def listed(self, actor_id: str, *, counted: bool = True) -> None:
        """``actor_id`` joined the table, held by nobody yet (``hold`` its creator)."""
        self._holders[actor_id] = set()
        if not counted:
            self._uncounted.add(actor_id)

    def forget(self, actor_id: str) -> Set[str]:
        """``actor_id`` left the table (its copies waiting on it as a receiver were settled by
        ``process_ended``). Returns its holders, as they were."""
        holders = self._holders.pop(actor_id)
        for client_id in holders:
            holding = self._holding.get(client_id)
            if holding is not None:
                holding.discard(actor_id)
        self._tokens.pop(actor_id, None)
        self._settled.pop(actor_id, None)
        for sender in self._senders.pop(actor_id, _NO_IDS):  # a long-lived client must not remember every actor
            sent = self._sent.get(sender)
            if sent is not None:
                sent.discard(actor_id)
        self._uncounted.discard(actor_id)
        return holders

    def process_ended(self, receiver: str) -> list[str]:
        """``receiver``'s process is gone (it restarts, or ends): the copies in calls to it that
        failed and that it never claimed are void. Returns the actors they held (each may be
        held no more)."""
        voids = self._voids.pop(receiver, None)
        if not voids:
            return []
        return [target for target, token in voids if target in self._holders and self.void(target, token)]

    # ---- handles ----------------------------------------------------------------------------

    def hold(self, client_id: str, actor_id: str) -> None:
        """``client_id`` holds a handle to the listed ``actor_id``."""
        self._holders[actor_id].add(client_id)
        holding = self._holding.get(client_id)
        if holding is None:
            holding = self._holding[client_id] = set()
        holding.add(actor_id)

    def let_go(self, client_id: str, actor_id: str) -> None:
        """``client_id`` dropped its last handle to the listed ``actor_id``."""
        self._holders[actor_id].discard(client_id)
        holding = self._holding.get(client_id)
        if holding is not None:
            holding.discard(actor_id)

    def sent_copy(self, client_id: str, actor_id: str, token: str) -> None:
        """``client_id`` sent a copy of its handle to ``actor_id`` under ``token`` (settled, if
        its receiver's claim came first)."""
        if not self._count(actor_id, token, +1):
            self._settle(actor_id, token)
        sent = self._sent.get(client_id)
        if sent is None:
            sent = self._sent[client_id] = set()
        sent.add(actor_id)
        senders = self._senders.get(actor_id)
        if senders is None:
            senders = self._senders[actor_id] = set()
        senders.add(client_id)

    def claimed(self, actor_id: str, token: str) -> None:
        """The copy ``token`` of a handle to ``actor_id`` arrived. Only its first claim counts: a
        claim of a settled copy (claimed, or voided) is ignored, and so is a second one before
        its sender's word (its bytes were loaded again, here or in another process)."""
        settled = self._settled.get(actor_id)
        if (settled is not None and token in settled) or self._tokens.get(actor_id, _NO_TOKENS).get(token, 0) < 0:
            return
        if not self._count(actor_id, token, -1):
            self._settle(actor_id, token)

    def in_flight(self, actor_id: str, token: str) -> bool:
        """Whether the copy ``token`` is counted and not claimed yet."""
        return self._tokens.get(actor_id, _NO_TOKENS).get(token, 0) > 0

    def void_later(self, receiver: str, actor_id: str, token: str) -> None:
        """The call that carried copy ``token`` to the live ``receiver`` failed: the copy is void
        when that process ends, unless claimed by then."""
        voids = self._voids.get(receiver)
        if voids is None:
            voids = self._voids[receiver] = []
        voids.append((actor_id, token))

    def void(self, actor_id: str, token: str) -> bool:
        """The copy ``token``, if not claimed, holds ``actor_id`` no longer; its claim, if it
        comes after all, is ignored. Returns whether it was voided."""
        tokens = self._tokens.get(actor_id)
        if tokens is None or tokens.get(token, 0) <= 0:
            return False
        del tokens[token]
        self._settle(actor_id, token)
        return True

    def client_gone(self, client_id: str) -> list[str]:
        """``client_id`` left: it holds nothing, and its copies on their way are never claimed
        (void; a claim that comes after all is ignored). Returns the actors it held or sent
        copies of (each may be held no more)."""
        holding = self._holding.pop(client_id, set())
        sent = self._sent.pop(client_id, set())
        for actor_id in holding:
            holders = self._holders.get(actor_id)
            if holders is not None:
                holders.discard(client_id)
        prefix = client_id + "."
        touched = []
        for actor_id in holding | sent:
            if actor_id not in self._holders:
                continue
            tokens = self._tokens.get(actor_id, {})
            for token in [t for t in tokens if t.startswith(prefix)]:
                if tokens[token] > 0:  # on its way still: a claim that comes is ignored
                    self.void(actor_id, token)
                else:  # claimed, and its sender's word never comes: settled
                    del tokens[token]
                    self._settle(actor_id, token)
            self._senders.get(actor_id, set()).discard(client_id)
            touched.append(actor_id)
        return touched

    def _count(self, actor_id: str, token: str, step: int) -> int:
        """Add ``step`` to the copy's count; the new count (0: its sender's word and its claim
        are both in, and it is no longer kept)."""
        tokens = self._tokens.get(actor_id)
        if tokens is None:
            tokens = self._tokens[actor_id] = {}
        count = tokens.get(token, 0) + step
        if count:
            tokens[token] = count
        else:
            tokens.pop(token, None)
        return count

    def _settle(self, actor_id: str, token: str) -> None:
        """The copy ``token`` is settled: a claim of it, from now on, is ignored."""
        settled = self._settled.get(actor_id)
        if settled is None:
            settled = self._settled[actor_id] = OrderedDict()
        settled[token] = None
        while len(settled) > SETTLED_KEPT:
            settled.popitem(last=False)

    # ---- invariants -------------------------------------------------------------------------

    def validate(self, actors: Mapping[str, Actor], clients: Set[str]) -> None:
        """Raises ``TableInvariantError`` naming the first broken invariant; ``actors``: the
        table's live actors, ``clients``: its client ids."""
        check(self._holders.keys() == actors.keys(), "the actors whose holders are kept are not the listed actors")
        for aid, a in actors.items():
            check(
                a.detached or bool(a.stopping) or self.held(aid),
                f"actor {aid}: nobody holds it, but it was not released",
            )
        for aid, holders in self._holders.items():
            check(
                all(h in clients and aid in self._holding.get(h, _NO_IDS) for h in holders),
                f"actor {aid}: holders {sorted(holders)} are not all clients holding it",
            )
        for cid, held in self._holding.items():
            check(cid in clients, f"client {cid} is gone but still holds {sorted(held)}")
            check(
                all(cid in self._holders.get(a, _NO_IDS) for a in held),
                f"client {cid} holds actors that do not list it as a holder",
            )
        for aid, tokens in self._tokens.items():
            check(aid in actors, f"copies of {aid} are counted, but it is not listed")
            check(all(tokens.values()), f"actor {aid}: a handle copy counted zero times is kept")
            check(
                not self._settled.get(aid, {}).keys() & tokens.keys(),
                f"actor {aid}: a handle copy both counted and settled",
            )
        check(
            all(aid in actors and len(v) <= SETTLED_KEPT for aid, v in self._settled.items()),
            f"settled copies are kept for an actor not listed, or more than {SETTLED_KEPT} for one",
        )
        check(self._voids.keys() <= actors.keys(), "copies wait on a receiver that is not listed")
        for cid, sent in self._sent.items():
            check(
                all(a in actors and cid in self._senders.get(a, _NO_IDS) for a in sent),
                f"client {cid} lists copies sent of actors that are gone",
            )
        for aid, senders in self._senders.items():
            check(
                all(aid in self._sent.get(s, _NO_IDS) for s in senders),
                f"actor {aid}: senders {sorted(senders)} do not list it as sent",
            )
        check(self._uncounted <= actors.keys(), "an actor no longer listed is kept as not refcounted")
