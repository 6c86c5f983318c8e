"""``BulkLinks`` alone: a stream's bulk connections offered, opened, broken and reopened, which
link a payload takes and what a reply waits for, without sockets, gRPC or a loop."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from actorrt.client.bulk_links import BulkLinks
from actorrt.transport.bulk import Arrival, StreamLinks


@dataclass(eq=False)
class FakeLink:
    epoch: int


@pytest.fixture
def links() -> Iterator[BulkLinks[FakeLink]]:
    state: BulkLinks[FakeLink] = BulkLinks(limit=100)
    yield state
    state.validate()  # every test ends in a consistent state


def test_an_offer_opens_in_the_background_and_replies_that_named_it_wait_for_it(links: BulkLinks[FakeLink]) -> None:
    assert links.route() is None  # nothing open yet: payloads stream in chunks
    epoch = links.offered(4321, enabled=True)
    assert epoch == 1 and links.port == 4321 and links.opening(1)
    got: list[Arrival] = []
    assert links.wait_open(1, seq=7, consumer=got.append)  # the host saw it open before we did
    assert not links.wait_open(2, seq=8, consumer=got.append)  # never offered: the caller fails it
    link = FakeLink(1)
    waiting = links.opened(1, link)
    assert [seq for seq, _ in waiting] == [7] and got == []  # handed to the link, not failed here
    assert links.link(1) is link and links.latest is link and links.route() is link
    assert not links.opening(1) and links.is_current(link)


def test_with_the_channel_off_an_offer_is_only_remembered(links: BulkLinks[FakeLink]) -> None:
    assert links.offered(4321, enabled=False) is None
    assert links.port == 4321 and links.offers == 1 and not links.opening(1) and links.route() is None


def test_an_offer_that_cannot_be_opened_fails_what_waited_for_it(links: BulkLinks[FakeLink]) -> None:
    links.offered(4321, enabled=True)
    got: list[Arrival] = []
    links.wait_open(1, 3, got.append)
    links.wait_open(1, 4, got.append)
    consumers, delay = links.failed(1, stream_up=True)
    assert len(consumers) == 2 and not links.opening(1) and links.route() is None
    assert delay == 0.5  # another is asked for, as after a break
    assert links.failed(1, stream_up=True) == ([], 1.0)  # twice is harmless (and backs off)


def test_an_offer_that_cannot_be_opened_is_asked_for_again_with_the_reopen_backoff(
    links: BulkLinks[FakeLink],
) -> None:
    """A connection the host's listener refused (its handshakes all taken by strangers) or a
    reset: before, the stream never asked again and its large payloads went in chunks for good."""
    links.offered(4321, enabled=True)
    assert links.failed(1, stream_up=False) == ([], None)  # the stream is down: nothing to ask
    links.offered(4321, enabled=True)
    links.offered(4321, enabled=True)
    assert links.failed(2, stream_up=True) == ([], None)  # a later offer came meanwhile
    waits = [links.failed(3, stream_up=True)[1] for _ in range(StreamLinks.MAX_OFFERS + 1)]
    assert waits[:6] == [0.5, 1.0, 2.0, 4.0, 8.0, 16.0] and waits[6] == 30.0
    assert waits[-1] is None and links.reopens == StreamLinks.MAX_OFFERS  # shared with reopens after breaks
    assert links.offered(4321, enabled=True) == 4
    link = FakeLink(4)
    links.opened(4, link)
    assert links.reopen_in(link, stream_up=True) is None  # none left for a break either


def test_payloads_take_the_latest_link_while_under_the_unanswered_bound(links: BulkLinks[FakeLink]) -> None:
    links.offered(1, enabled=True)
    link = FakeLink(1)
    links.opened(1, link)
    links.sent(1, 60)
    assert links.route() is link  # 60 < 100: one more may go, and take it past
    links.sent(2, 60)
    assert links.unanswered == 120 and links.route() is None  # past the bound: chunks on the stream
    links.answered([1, 99])  # an answer of a call that never went on a link counts nothing
    assert links.unanswered == 60 and links.waiting == {2: 60} and links.route() is link
    links.forget_sent()  # the stream broke: every call sent failed
    assert links.unanswered == 0 and links.waiting == {}


def test_a_broken_latest_link_asks_for_another_with_a_doubling_wait(links: BulkLinks[FakeLink]) -> None:
    links.offered(1, enabled=True)
    first = FakeLink(1)
    links.opened(1, first)
    assert links.reopen_in(first, stream_up=False) is None  # the stream is down: nothing to ask
    assert links.reopen_in(first, stream_up=True) == 0.5
    links.offered(1, enabled=True)
    second = FakeLink(2)
    links.opened(2, second)
    assert links.reopen_in(first, stream_up=True) is None  # an older link: the latest is fine
    assert links.link(1) is first  # kept: frames already on it are still found there
    assert links.reopen_in(second, stream_up=True) == 1.0
    waits = [links.reopen_in(second, stream_up=True) for _ in range(StreamLinks.MAX_OFFERS)]
    assert waits[:4] == [2.0, 4.0, 8.0, 16.0] and waits[4] == 30.0  # capped
    assert waits[-2:] == [None, None] and links.reopens == StreamLinks.MAX_OFFERS  # no more asked


def test_a_stream_that_ends_closes_its_links_and_fails_what_waits(links: BulkLinks[FakeLink]) -> None:
    links.offered(1, enabled=True)
    first = FakeLink(1)
    links.opened(1, first)
    links.offered(1, enabled=True)
    links.wait_open(2, 5, lambda got: None)
    links.sent(9, 10)
    closing, failing = links.ended()
    assert closing == [first] and len(failing) == 1
    assert links.latest is None and links.route() is None and not links.opening(2)
    assert not links.is_current(first)  # a payload sent on it fails: the stream it went to is gone
    assert links.unanswered == 10  # its call fails with the stream (forget_sent), not here
    links.forget_sent()
    assert links.offered(1, enabled=True) == 1  # a new stream's host numbers its offers anew


def test_validate_catches_contradictions() -> None:
    links: BulkLinks[FakeLink] = BulkLinks()
    links.offered(1, enabled=True)
    links.links[1] = FakeLink(2)
    with pytest.raises(AssertionError, match="filed as"):
        links.validate()
    counted: BulkLinks[FakeLink] = BulkLinks()
    counted.sent(1, 10)
    counted.unanswered = 5
    with pytest.raises(AssertionError, match="unanswered bytes"):
        counted.validate()
