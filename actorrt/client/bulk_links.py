"""``BulkLinks``: the client's side of one Calls stream's bulk connections, as a plain object.

The host offers a bulk connection on the stream (``ReplyBatch.bulk_port`` and a one-time key,
numbered from 1 in the order it makes them: the connection's *epoch*, which ``Payload.bulk``
names); the client opens it beside the stream, in the background. One connection goes::

    offered(port) --> OPENING n --opened(n, link)--> OPEN n: the latest; a payload takes it while
      ^                |  (replies that name n       |  under ``limit`` bytes of arguments wait
      |                |   wait in its backlog)      |  unanswered on it (``route``, ``sent``)
      |                | failed(n): its backlog      | broke(link), the stream up: ask for
      |                v  fails; the latest offer,   v  another after 0.5 s, doubling (``reopen_in``)
      |                   the stream up: ask again
      |                   after the same wait
      '-- bulk_reopen -- none open: payloads stream in chunks on the Calls stream meanwhile

A connection that could not be opened (the host's listener full of strangers' handshakes, a
firewall, a reset) is asked for again as a broken one is: both count toward the reopens one
stream may ask (``StreamLinks.MAX_OFFERS``), with the same doubling wait.

    ended(): the stream ended (or moved): every link closes, every backlog fails, epochs count
    from 1 again (a new stream's host numbers its offers anew).

A broken connection stays in ``links`` until the stream ends: a reply whose frame went on it is
still found there (it fails with the connection's error). Transitions return what the caller
must do (the link a payload takes, the backlog to hand to a link, the links to close, the delay
before asking for another) and never touch a socket, the loop or a future; the caller
(``ActorConnection``) does. ``validate()`` checks the invariants.

Threads: ``route``, ``sent`` and ``answered`` run on callers' threads and the loop (the byte
count is under a lock); everything else on the cluster's loop only.
"""

from __future__ import annotations

import threading
from typing import Generic, Protocol, TypeVar

from actorrt.transport.bulk import Consumer, StreamLinks

__all__ = ["BULK_UNANSWERED_MAX", "BulkLinks"]

# Bytes of arguments a connection keeps on its bulk connection unanswered (checked before each
# send: one call, or one per thread sending at that moment, may take it past). The host reads that
# connection as fast as it comes (so that neither side's sends wait on the other's loop) and
# keeps what its actor has not run yet; past this, arguments stream in chunks on the Calls
# stream instead, whose flow control keeps them here until the host reads them: a client that
# pipelines large calls to a slow actor fills its own memory, not the actor's.
BULK_UNANSWERED_MAX = 1 << 30
REOPEN_FIRST_S = 0.5  # the wait before asking for another connection after the first break
REOPEN_MAX_S = 30.0


class Numbered(Protocol):
    """What the links' state needs of a link: its epoch (``transport.bulk.Link``)."""

    @property
    def epoch(self) -> int: ...


L = TypeVar("L", bound=Numbered)


class BulkLinks(Generic[L]):
    """One stream's offers, open links, backlogs and unanswered bytes (see the module doc)."""

    def __init__(self, limit: int | None = None) -> None:
        self.limit = BULK_UNANSWERED_MAX if limit is None else limit
        self.port = 0  # the host's bulk listener, once it offered one
        self.latest: L | None = None  # the latest open connection (open, or broken since)
        self.links: dict[int, L] = {}  # epoch -> every connection this stream opened
        self.offers = 0  # the host's offers on this stream so far: the latest epoch
        self.reopens = 0  # other connections asked for after breaks (``bulk_reopen``)
        # epoch -> (seq, consumer) of the replies that named a connection still opening
        self.backlog: dict[int, list[tuple[int, Consumer]]] = {}
        # seq -> bytes of the calls whose buffers went on a connection, until answered, and their
        # total (``limit``): written by callers' threads, under the lock. The dict is never
        # rebound, so a reader may keep it (``ActorConnection._bulk_waiting``).
        self.waiting: dict[int, int] = {}
        self.unanswered = 0
        self._lock = threading.Lock()

    # ---- opening (loop thread) ------------------------------------------------------------------

    def offered(self, port: int, enabled: bool) -> int | None:
        """The host offers another connection on ``port``: its epoch, to open in the background
        (replies naming it wait until it is open), or None when the channel is turned off here
        (``ACTORRT_BULK=0``: large payloads stream in chunks)."""
        self.port = port
        self.offers += 1
        if not enabled:
            return None
        self.backlog[self.offers] = []
        return self.offers

    def opening(self, epoch: int) -> bool:
        """Whether connection ``epoch`` is still to open: False once the stream ended meanwhile."""
        return epoch in self.backlog

    def opened(self, epoch: int, link: L) -> list[tuple[int, Consumer]]:
        """Connection ``epoch`` is open: payloads take it from now on. Returns the replies that
        waited for it, for ``link.expect``. Raises KeyError unless it was ``opening``."""
        waiting = self.backlog.pop(epoch)
        self.links[epoch] = self.latest = link
        return waiting

    def failed(self, epoch: int, stream_up: bool) -> tuple[list[Consumer], float | None]:
        """Connection ``epoch`` could not be opened: the consumers that waited for it (to fail),
        and seconds to wait before asking the host for another, or None (a later offer came,
        the stream is down, or ``StreamLinks.MAX_OFFERS`` asked already)."""
        consumers = [consumer for _, consumer in self.backlog.pop(epoch, [])]
        return consumers, self._reopen_delay() if stream_up and epoch == self.offers else None

    def reopen_in(self, link: L, stream_up: bool) -> float | None:
        """``link`` broke: seconds to wait before asking the host for another, or None (an older
        one, the stream is down, or ``StreamLinks.MAX_OFFERS`` asked already)."""
        return self._reopen_delay() if link is self.latest and stream_up else None

    def _reopen_delay(self) -> float | None:
        """One more reopen asked: the wait before asking (0.5 s, doubling to 30 s), or None
        once ``StreamLinks.MAX_OFFERS`` were."""
        if self.reopens >= StreamLinks.MAX_OFFERS:
            return None
        delay = min(REOPEN_MAX_S, REOPEN_FIRST_S * (1 << self.reopens))
        self.reopens += 1
        return delay

    def ended(self) -> tuple[list[L], list[Consumer]]:
        """The stream ended: the links to close and the consumers still waiting for one to open
        (to fail). Epochs count from 1 again; the unanswered bytes stay (``forget_sent``)."""
        links, backlog = list(self.links.values()), self.backlog
        self.links, self.backlog, self.latest = {}, {}, None
        self.offers = self.reopens = 0
        return links, [consumer for waiting in backlog.values() for _, consumer in waiting]

    # ---- payloads -------------------------------------------------------------------------------

    def route(self) -> L | None:
        """The link a payload's buffers take (any thread): the latest, while fewer than
        ``limit`` bytes wait unanswered on it; None: they stream in chunks on the Calls stream."""
        link = self.latest
        return link if link is not None and self.unanswered < self.limit else None

    def sent(self, seq: int, nbytes: int) -> None:
        """Call ``seq``'s ``nbytes`` went on a link (any thread): counted until answered."""
        with self._lock:
            self.waiting[seq] = nbytes
            self.unanswered += nbytes

    def answered(self, seqs: list[int]) -> None:
        """These calls were answered, or failed (any thread): their bytes no longer count."""
        with self._lock:
            for seq in seqs:
                self.unanswered -= self.waiting.pop(seq, 0)

    def forget_sent(self) -> None:
        """Every call sent failed (the stream broke): nothing waits unanswered any more."""
        with self._lock:
            self.waiting.clear()
            self.unanswered = 0

    def link(self, epoch: int) -> L | None:
        """Connection ``epoch`` of this stream, once it opened (it may have broken since)."""
        return self.links.get(epoch)

    def is_current(self, link: L) -> bool:
        """Whether ``link`` is still this stream's (a stream that ended or moved has others)."""
        return self.links.get(link.epoch) is link

    def wait_open(self, epoch: int, seq: int, consumer: Consumer) -> bool:
        """Reply ``seq`` names connection ``epoch``, which is still opening (the host saw it open
        first): ``consumer`` gets its frame once it is. False: no such connection is opening."""
        waiting = self.backlog.get(epoch)
        if waiting is None:
            return False
        waiting.append((seq, consumer))
        return True

    # ---- invariants ---------------------------------------------------------------------------

    def validate(self) -> None:
        """Raise AssertionError when the state contradicts itself."""
        with self._lock:
            assert self.unanswered == sum(self.waiting.values()), "unanswered bytes differ from their calls"
        for epoch, link in self.links.items():
            assert link.epoch == epoch, f"link {link.epoch} filed as {epoch}"
            assert 1 <= epoch <= self.offers, f"link {epoch} of {self.offers} offers"
        assert self.latest is None or self.links.get(self.latest.epoch) is self.latest, "the latest link is not filed"
        for epoch in self.backlog:
            assert epoch not in self.links, f"connection {epoch} both open and opening"
            assert 1 <= epoch <= self.offers, f"a backlog for connection {epoch} of {self.offers} offers"
        assert self.reopens <= StreamLinks.MAX_OFFERS, f"{self.reopens} reopens asked"
