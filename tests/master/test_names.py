"""Names: unique among live actors, reserved while their request waits; alone and in the table."""

from __future__ import annotations

import pytest

from actorrt.common.errors import ActorNameTakenError
from actorrt.master.records import Request
from tests.master.tables import two_nodes

pytestmark = pytest.mark.usefixtures("validate_every_table")


def test_names_are_unique_and_reserved_while_queued() -> None:
    t, _ = two_nodes(cpus=1)
    first = t.request(Request("c1", 1, name="replay"))
    assert first is not None
    with pytest.raises(ActorNameTakenError, match="'replay' is taken"):
        t.request(Request("c1", 2, name="replay"))
    t.request(Request("c1", 3))
    assert t.request(Request("c1", 4, name="params")) is None  # queued: the name is reserved
    with pytest.raises(ActorNameTakenError, match="waiting for a slot"):
        t.request(Request("c1", 5, name="params"))
    t.validate()
    assert t.lookup("c1", "replay") is t.actors[first.actor_id]
    assert t.lookup("c1", "params") is None  # not placed yet
    t.actor_exited(first.actor_id)
    assert "replay" not in t.names and t.lookup("c1", "replay") is None
    t.validate()
