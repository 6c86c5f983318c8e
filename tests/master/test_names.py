"""Names: unique among live actors, reserved while their request waits; alone and in the table."""

from __future__ import annotations

import pytest

from actorrt.common.errors import ActorNameTakenError
from actorrt.master.names import Names
from actorrt.master.records import Actor, Request
from actorrt.master.state import TableInvariantError
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


# ---- Names alone --------------------------------------------------------------------------------


def test_a_name_is_reserved_taken_and_free_again() -> None:
    names = Names()
    names.reserve("ps", ("c1", 1))
    assert names.taken("ps", ("c1", 1)) == ""  # its own request asking again
    assert names.taken("ps", ("c2", 1)) == "c1/1"
    names.validate({}, {("c1", 1): Request("c1", 1, name="ps")})
    names.unreserve("ps", ("c2", 1))  # not that request's: kept
    assert "ps" in names
    names.bind("ps", "a1")  # placed
    assert names["ps"] == "a1" and names.taken("ps", ("c1", 1)) == "a1"
    actors = {"a1": Actor("a1", "w", 0, "e", "c1", "A", 1, (), name="ps")}
    names.validate(actors, {})
    names.unreserve("ps", ("c1", 1))  # placed already: no longer its reservation
    names.release("ps", "a2")  # not its actor
    assert names["ps"] == "a1"
    names.release("ps", "a1")
    assert "ps" not in names and names.taken("ps", ("c2", 1)) == ""
    names.validate({}, {})


def test_a_name_an_actor_had_before_this_table_knew_it_is_kept_only_if_free() -> None:
    names = Names()
    assert names.adopt("ps", "a1") == "ps" and names["ps"] == "a1"
    assert names.adopt("ps", "a2") == ""  # a1 has it: a2 goes nameless
    names.reserve("q", ("c1", 1))
    assert names.adopt("q", "a3") == ""  # reserved by a waiting request: theirs
    actors = {
        "a1": Actor("a1", "w", 0, "e", "c1", "A", 1, (), name="ps"),
        "a2": Actor("a2", "w", 1, "e", "c1", "A", 1, ()),
    }
    names.validate(actors, {("c1", 1): Request("c1", 1, name="q")})


def test_validate_names_a_name_that_points_elsewhere() -> None:
    names = Names()
    names.bind("ps", "a1")
    with pytest.raises(TableInvariantError, match="neither a live actor nor a queued request"):
        names.validate({}, {})
    actors = {
        "a1": Actor("a1", "w", 0, "e", "c1", "A", 1, (), name="ps"),
        "a2": Actor("a2", "w", 1, "e", "c1", "A", 1, (), name="ps"),
    }
    with pytest.raises(TableInvariantError, match="its name 'ps' points elsewhere"):
        names.validate(actors, {})
