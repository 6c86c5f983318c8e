"""PlacementQueue: requests waiting for a slot, their deadlines, and requests answered, alone and
in the table."""

from __future__ import annotations

import pytest

from actorrt.master.clients import Clients
from actorrt.master.placement_queue import PlacementQueue
from actorrt.master.records import Actor, Request
from actorrt.master.state import TableInvariantError
from actorrt.master.table import ClusterTable
from tests.master.tables import Clock, table_with_worker, two_nodes

pytestmark = pytest.mark.usefixtures("validate_every_table")


def test_queue_is_fifo_and_drains_when_a_slot_frees() -> None:
    t, wid, _ = table_with_worker(cpus=1)
    first = t.request(Request("c1", 1))
    assert first is not None
    assert t.request(Request("c1", 2)) is None and t.request(Request("c1", 3)) is None
    actor, placed = t.actor_exited(first.actor_id)
    assert actor is not None and placed == []  # the slot's host is not warm again yet
    placed = t.slot_ready(wid, first.slot, "127.0.0.1:9100")
    assert [p.request.request_id for p in placed] == [2]
    assert [r.request_id for r in t.queue.values()] == [3]


def test_requests_wait_while_no_worker_has_joined() -> None:
    t = ClusterTable()
    t.clients.open("c1", "h", 1)
    assert t.request(Request("c1", 1)) is None and len(t.queue) == 1
    t.remove_client("c1")  # a client that leaves takes its waiting requests along
    assert not t.queue


def test_placement_deadlines_live_in_the_table() -> None:
    t, _, clock = table_with_worker(cpus=1)
    assert t.request(Request("c1", 1)) is not None
    t.clients.open("c2", "host", 2)
    assert t.request(Request("c2", 2, timeout_s=5)) is None
    assert t.request(Request("c1", 3, timeout_s=2)) is None
    assert t.request(Request("c1", 4)) is None  # waits forever
    assert t.queue.next_deadline() == clock.now + 2
    clock.now += 2
    assert [r.request_id for r in t.expire_requests()] == [3]
    assert t.queue.next_deadline() == clock.now + 3
    t.remove_client("c2")  # a request gone another way: its deadline is skipped
    assert t.queue.next_deadline() is None
    clock.now += 10
    assert t.expire_requests() == [] and [r.request_id for r in t.queue.values()] == [4]
    assert t.placements_failed == 1
    t.validate()


def test_a_placed_request_never_expires() -> None:
    t, wid, clock = table_with_worker(cpus=1)
    first = t.request(Request("c1", 1))
    assert first is not None and t.request(Request("c1", 2, timeout_s=1)) is None
    t.actor_exited(first.actor_id)
    assert len(t.slot_ready(wid, first.slot, "e:2")) == 1
    clock.now += 5
    assert t.expire_requests() == [] and t.queue.next_deadline() is None


def test_a_withdrawn_request_leaves_the_queue_and_frees_its_name() -> None:
    t, _ = two_nodes(cpus=1)
    t.request(Request("c1", 1))
    t.request(Request("c1", 2))
    assert t.request(Request("c1", 3, name="late")) is None
    assert t.withdraw("c1", 3) and not t.queue and "late" not in t.names
    assert not t.withdraw("c1", 3)  # already gone
    t.validate()


def test_a_request_resent_after_a_reconnect_is_answered_with_the_actor_it_placed() -> None:
    """The ActorPlaced of a placement made just before the client's stream broke is lost; the
    client sends the same request again on its new stream. It used to place a second actor (the
    first, never constructed, held its slot for the client's lifetime; a named one failed with
    ActorNameTakenError against itself)."""
    t, wid, _ = table_with_worker(cpus=3)
    first = t.request(Request("c1", 1, name="learner"))
    assert first is not None and not first.again
    again = t.request(Request("c1", 1, name="learner"))
    assert again is not None and again.again
    assert (again.actor_id, again.slot, again.endpoint) == (first.actor_id, first.slot, first.endpoint)
    assert len(t.actors) == 1 and t.workers[wid].cpus_free == 2
    t.clients.open("c2", "host", 1)
    other = t.request(Request("c2", 1))  # another client's request 1 is another request
    assert other is not None and not other.again and other.actor_id != first.actor_id
    t.validate()
    t.release_actor("c1", first.actor_id, "killed")
    t.actor_exited(first.actor_id)
    third = t.request(Request("c1", 1))  # its actor gone: the request places a new one
    assert third is not None and not third.again and third.actor_id != first.actor_id
    t.validate()


# ---- PlacementQueue alone -----------------------------------------------------------------------


def _clients(clock: Clock, *client_ids: str) -> Clients:
    clients = Clients(clock)
    for client_id in client_ids:
        clients.open(client_id, "h", 1)
    return clients


def test_requests_wait_oldest_first_and_a_restart_is_found_by_its_actor() -> None:
    clock = Clock()
    queue = PlacementQueue(clock)
    restart = Request("c1", -1, restart_of="a1")
    for req in (Request("c1", 1), restart, Request("c2", 1), Request("c1", 2)):
        queue.add(req)
    assert list(queue) == [("c1", 1), ("c1", -1), ("c2", 1), ("c1", 2)]
    assert queue.restart_key("a1") == ("c1", -1) and queue.restart_key("a2") is None
    assert queue.of_client("c1") == [("c1", 1), ("c1", 2)]  # its own requests, not its actors' restarts
    actors = {"a1": Actor("a1", "", -1, "", "c1", "A", 1, (), restarting=True)}
    queue.validate(actors, _clients(clock, "c1", "c2"))
    assert queue.remove(("c1", -1)) is restart and queue.restart_key("a1") is None
    assert queue.remove(("c1", -1)) is None
    with pytest.raises(TableInvariantError, match="no request places it again"):
        queue.validate(actors, _clients(clock, "c1", "c2"))
    queue.validate({}, _clients(clock, "c1", "c2"))
    with pytest.raises(TableInvariantError, match="waits for a client that is not here"):
        queue.validate({}, _clients(clock, "c1"))


def test_deadlines_end_in_time_order_and_skip_the_requests_gone() -> None:
    clock = Clock()
    queue = PlacementQueue(clock)
    queue.add(Request("c1", 1, timeout_s=5))
    queue.add(Request("c1", 2, timeout_s=2))
    queue.add(Request("c1", 3))  # waits forever
    queue.add(Request("c1", 4, timeout_s=3))
    assert queue.next_deadline() == clock.now + 2
    queue.remove(("c1", 2))  # placed, or withdrawn: its deadline is skipped
    assert queue.next_deadline() == clock.now + 3
    clock.now += 4
    assert [r.request_id for r in queue.expire()] == [4]
    clock.now += 1
    assert [r.request_id for r in queue.expire()] == [1] and queue.next_deadline() is None
    assert list(queue) == [("c1", 3)] and queue.expire() == []
    queue.validate({}, _clients(clock, "c1"))


def test_a_request_answers_with_the_actor_it_placed_until_that_actor_is_forgotten() -> None:
    clock = Clock()
    queue = PlacementQueue(clock)
    queue.placed(Request("c1", 7), "a1")
    queue.placed(Request("c1", -3, restart_of="a2"), "a2")  # a restart is no client's request
    assert queue.placed_by(("c1", 7)) == "a1" and queue.placed_by(("c1", -3)) is None
    actors = {"a1": Actor("a1", "w", 0, "e", "c1", "A", 1, (), request_id=7)}
    queue.validate(actors, _clients(clock, "c1"))
    with pytest.raises(TableInvariantError, match="recorded as having placed a1"):
        queue.validate({}, _clients(clock, "c1"))
    queue.forget_placed(("c1", 7), "another")  # not the actor it placed: kept
    assert queue.placed_by(("c1", 7)) == "a1"
    queue.forget_placed(("c1", 7), "a1")
    assert queue.placed_by(("c1", 7)) is None
    queue.validate({}, _clients(clock, "c1"))
