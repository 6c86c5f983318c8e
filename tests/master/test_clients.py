"""Clients: connected, lost and in their grace period, gone; alone and in the table."""

from __future__ import annotations

import pytest

from actorrt.master.clients import Clients
from actorrt.master.records import Actor, Request
from actorrt.master.state import TableInvariantError
from tests.master.tables import Clock, table_with_worker

pytestmark = pytest.mark.usefixtures("validate_every_table")


def test_a_returning_client_keeps_its_actors() -> None:
    t, _, clock = table_with_worker()
    t.request(Request("c1", 1))
    t.client_lost("c1")
    clock.now += 1
    t.clients.open("c1", "host", 1)
    clock.now += 100
    assert t.clients.expired(3) == []


def test_actors_of_a_removed_client_are_valid_while_they_stop() -> None:
    t, _, _ = table_with_worker(cpus=1)
    p = t.request(Request("c1", 1))
    assert p is not None
    assert [a.actor_id for a in t.remove_client("c1")] == [p.actor_id]
    t.validate()  # its client is gone, but it is stopping
    t.actor_exited(p.actor_id)
    t.validate()


# ---- Clients alone ------------------------------------------------------------------------------


def test_a_client_is_connected_lost_back_and_expired_by_the_clock() -> None:
    clock = Clock()
    clients = Clients(clock)
    c = clients.open("c1", "host", 7)
    assert c.connected and clients.connected("c1") and not clients.connected("c2")
    clients.lost("c1")
    assert not c.connected and c.lost_at == clock.now
    clock.now += 2
    clients.lost("c1")  # lost already: its grace period does not start again
    assert c.lost_at == clock.now - 2 and clients.expired(2) == ["c1"] and clients.expired(3) == []
    clients.excuse(10)  # the master did not run: not counted, never past now
    assert c.lost_at == clock.now and clients.expired(1) == []
    assert clients.open("c1", "", 0) is c and c.connected and c.lost_at is None
    assert (c.hostname, c.pid) == ("host", 7)  # kept when its new session does not say
    clients.validate({})
    assert clients.remove("c1") is c and clients.remove("c1") is None and "c1" not in clients


def test_a_creator_not_back_yet_is_listed_lost_with_its_grace_period() -> None:
    clock = Clock()
    clients = Clients(clock)
    absent = clients.absent("c9")
    assert not absent.connected and absent.lost_at == clock.now and clients.absent("c9") is absent
    assert clients.open("c9", "h", 1) is absent and absent.connected


def test_the_clients_that_are_an_actors_own_process() -> None:
    clients = Clients(Clock())
    clients.open("driver", "h", 1)
    clients.open("inner", "h", 2, actor_id="a1")
    clients.open("inner", "h", 2)  # its session again, saying nothing of its actor: still a1's
    assert clients.of_actor("a1") == ["inner"] and clients.of_actor("a2") == []


def test_validate_names_a_client_and_actors_that_disagree() -> None:
    clients = Clients(Clock())
    c = clients.open("c1", "h", 1)
    actor = Actor("a1", "w", 0, "e", "c1", "A", 1, ())
    with pytest.raises(TableInvariantError, match="does not list it"):
        clients.validate({"a1": actor})
    c.actors.add("a1")
    clients.validate({"a1": actor})
    c.connected = False
    with pytest.raises(TableInvariantError, match="connected=False, lost_at=None"):
        clients.validate({"a1": actor})
    c.connected = True
    clients.remove("c1")
    with pytest.raises(TableInvariantError, match="its client c1 is gone and nobody is stopping it"):
        clients.validate({"a1": actor})
    actor.stopping = "its client is gone"
    clients.validate({"a1": actor})
