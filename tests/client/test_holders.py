"""``Holders`` alone: when this client holds an actor and what it tells the master of it
(docs/architecture.md, "References"), event by event, without gRPC, a loop or a thread."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest

from actorrt.client.holders import Effects, Hold, Holders, add_ref, drop_ref


@dataclass(eq=False)
class Conn:
    """A connection as the holders see it: its actor and its hold."""

    actor_id: str
    hold: Hold = field(default_factory=Hold)


@pytest.fixture
def holders() -> Iterator[Holders[Conn]]:
    h: Holders[Conn] = Holders("c1")
    yield h
    h.validate()  # every test ends in a consistent state


def _adopted(holders: Holders[Conn], actor_id: str, handles: int = 1) -> Conn:
    conn = Conn(actor_id)
    holders.placed(actor_id)
    holders.adopt(conn)
    for _ in range(handles):
        holders.hold(conn)
    return conn


def test_the_last_handle_gone_with_no_call_in_flight_lets_the_actor_go(holders: Holders[Conn]) -> None:
    conn = _adopted(holders, "x", handles=2)
    assert not holders.drop(conn)  # one handle is left
    assert holders.drop(conn)  # the last: the loop decides
    effects = holders.last_gone(conn, busy=False, dead=False)
    assert effects == Effects([drop_ref("x")], close=conn, unheld=True)
    assert conn.hold.released and holders.connection("x") is None
    assert not holders.drop(Conn("y", Hold(handles=1, released=True)))  # released: nothing more to say


def test_a_handle_made_before_the_loop_saw_the_last_go_keeps_the_actor(holders: Holders[Conn]) -> None:
    conn = _adopted(holders, "x")
    assert holders.drop(conn)
    holders.hold(conn)  # e.g. a copy of it arrived on another thread meanwhile
    assert holders.last_gone(conn, busy=False, dead=False) == Effects()
    assert not conn.hold.released and holders.connection("x") is conn


def test_calls_in_flight_hold_the_actor_until_they_are_answered(holders: Holders[Conn]) -> None:
    """``DropRef`` when the last handle (or bound method) is gone and no call is in flight."""
    conn = _adopted(holders, "x")
    assert holders.drop(conn)
    assert holders.last_gone(conn, busy=True, dead=False) == Effects()
    assert conn.hold.draining and not conn.hold.released  # the connection reports when idle
    assert holders.idle(conn, dead=False).events == [drop_ref("x")]
    assert not conn.hold.draining and conn.hold.released


def test_a_handle_made_while_calls_drain_keeps_the_actor(holders: Holders[Conn]) -> None:
    conn = _adopted(holders, "x")
    holders.drop(conn)
    holders.last_gone(conn, busy=True, dead=False)
    holders.hold(conn)
    assert not conn.hold.draining
    assert holders.idle(conn, dead=False) == Effects()  # its calls answered: still held
    holders.drop(conn)
    assert holders.last_gone(conn, busy=False, dead=False).events == [drop_ref("x")]


def test_a_dead_actor_or_one_held_through_another_connection_sends_no_drop(holders: Holders[Conn]) -> None:
    dead = _adopted(holders, "d")
    holders.drop(dead)
    assert holders.last_gone(dead, busy=False, dead=True) == Effects([], close=dead, unheld=True)
    # a connection that gave up on its actor is replaced by a new one when a handle arrives: the
    # master counts this client once, and the new one holds the actor now
    old = _adopted(holders, "x")
    new, first = holders.connect("x", usable=lambda conn: conn is not old, make=lambda: Conn("x"), dead=False)
    assert first and new is not old and holders.connection("x") is new and new.hold.handles == 1
    holders.drop(old)
    assert holders.last_gone(old, busy=False, dead=False) == Effects([], close=old, unheld=False)
    holders.drop(new)
    assert holders.last_gone(new, busy=False, dead=False).events == [drop_ref("x")]


def test_a_handle_that_arrives_reuses_the_connection_or_makes_one(holders: Holders[Conn]) -> None:
    conn = _adopted(holders, "x")
    again, first = holders.connect("x", usable=lambda c: True, make=lambda: Conn("never"), dead=False)
    assert again is conn and not first and conn.hold.handles == 2
    holders.drop(conn)
    holders.drop(conn)
    holders.last_gone(conn, busy=False, dead=False)  # released: a later copy needs a new one
    fresh, first = holders.connect("x", usable=lambda c: True, make=lambda: Conn("x"), dead=False)
    assert fresh is not conn and first and holders.connection("x") is fresh
    # one that arrives for an actor the master said died holds nothing there: not filed, not said
    gone, first = holders.connect("g", usable=lambda c: True, make=lambda: Conn("g"), dead=True)
    assert not first and holders.connection("g") is None and gone.hold.handles == 1


def test_a_copy_costs_a_token_claimed_by_its_receiver_or_taken_back_or_voided(holders: Holders[Conn]) -> None:
    conn = _adopted(holders, "x")
    first, event = holders.copy(conn)
    second, _ = holders.copy(conn)
    assert first == "c1.1" and second == "c1.2" and event == add_ref("x", "c1.1")
    # the receiver: holds the actor (said once per new connection), and the copy arrived
    assert Holders.claim("x", "c1.1", first=True) == [add_ref("x"), drop_ref("x", "c1.1")]
    assert Holders.claim("x", "c1.2", first=False) == [drop_ref("x", "c1.2")]
    assert Holders.claim("x", "", first=True) == [add_ref("x")]  # a lookup's answer: no copy
    # the sender: a payload that never left, and a call that failed without an answer
    assert Holders.lost([("x", "c1.1")]) == [drop_ref("x", "c1.1")]  # taken back
    assert Holders.lost([("x", "c1.2")], receiver="r") == [drop_ref("x", "c1.2", "r")]  # void


def test_a_restartable_actors_arguments_hold_their_actors_until_it_dies(holders: Holders[Conn]) -> None:
    target = _adopted(holders, "t")
    creator = _adopted(holders, "r")
    holders.keep("r", [target])
    assert not holders.drop(target)  # its own handle gone: the arguments still hold it
    assert holders.died("r") == (creator, [target])  # to drop, as a handle would be
    assert holders.drop(target)
    assert holders.last_gone(target, busy=False, dead=False).events == [drop_ref("t")]


def test_lookups_nobody_claimed_are_let_go_unless_held_built_or_dead(holders: Holders[Conn]) -> None:
    for actor_id in ("held", "building", "dead", "free"):
        holders.found(actor_id)
    _adopted(holders, "held")
    holders.placed("building")
    assert holders.unclaimed_drops(asking=True, dead=lambda a: False) == []  # an asker may claim one
    assert holders.unclaimed_drops(asking=False, dead=lambda a: a == "dead") == [drop_ref("free")]
    assert holders.unclaimed_drops(asking=False, dead=lambda a: False) == []  # each answer once
    holders.abandoned("building")  # its construction failed: released by its creator
    assert "building" not in holders.building


def test_what_a_new_master_hears_and_what_closing_ends(holders: Holders[Conn]) -> None:
    live, gave_up = _adopted(holders, "live"), _adopted(holders, "gave-up")
    assert holders.held(lambda conn: conn is not gave_up) == ["live"]
    holders.found("looked-up")
    holders.keep("live", [gave_up])
    assert holders.closed() == [live, gave_up]
    assert not holders.actors and not holders.kept and not holders.unclaimed


def test_validate_catches_contradictions() -> None:
    h: Holders[Conn] = Holders("c1")
    released = Conn("x", Hold(released=True))
    h.actors["x"] = released
    with pytest.raises(AssertionError, match="released connection"):
        h.validate()
    h2: Holders[Conn] = Holders("c1")
    h2.kept["r"] = [Conn("t")]  # kept without being counted
    with pytest.raises(AssertionError, match="fewer handles than kept"):
        h2.validate()
    h3: Holders[Conn] = Holders("c1")
    h3.actors["x"] = Conn("x", Hold(handles=1, draining=True))
    with pytest.raises(AssertionError, match="draining with handles left"):
        h3.validate()
