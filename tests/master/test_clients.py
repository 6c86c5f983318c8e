"""Clients: connected, lost and in their grace period, gone; alone and in the table."""

from __future__ import annotations

import pytest

from actorrt.master.records import Request
from tests.master.tables import table_with_worker

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
