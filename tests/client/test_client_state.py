"""``ClientState`` alone: placements, actors held and deaths heard, without gRPC or a loop.
What holds each actor is ``Holders``' (tests/client/test_holders.py); here, what the state
tells it and asks of it."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest

from actorrt.client.holders import Hold, Holders, add_ref, drop_ref
from actorrt.client.state import ClientState
from actorrt.v1 import actor_host_pb2
from actorrt.v1 import master_pb2 as pb


@dataclass(eq=False)
class Conn:
    """A connection as the state sees it: its actor and its hold."""

    actor_id: str
    hold: Hold = field(default_factory=Hold)


State = ClientState[str, Conn]


@pytest.fixture
def state() -> Iterator[State]:
    s: State = ClientState(Holders("client"), deaths_kept=3)
    yield s
    s.validate()  # every test ends in a consistent state


def _place(class_name: str = "A") -> pb.ClientEvent:
    return pb.ClientEvent(place_actor=pb.PlaceActor(class_name=class_name))


def test_requests_get_ids_and_answers_go_to_their_waiter(state: State) -> None:
    first, second = _place("A"), _place("B")
    a = state.request(first, "waiter-a")
    b = state.request(second, "waiter-b")
    assert (a, b) == (1, 2) and first.place_actor.request_id == 1
    assert state.unanswered() == [first, second]
    assert state.answered(b) == "waiter-b"
    assert state.answered(b) is None  # answered twice (a restarted master): nobody waits, release it
    assert state.unanswered() == [first]
    state.withdraw(a)
    assert state.answered(a) is None and state.unanswered() == []


def test_a_death_wakes_its_waiters_and_drops_the_connection(state: State) -> None:
    conn_x = Conn("x")
    state.adopt(conn_x)
    state.await_death("x", "w1")
    state.await_death("x", "w2")
    assert state.cause("x") is None
    assert state.died("x", "killed by signal 9") == (conn_x, ["w1", "w2"], [])
    assert state.cause("x") == "killed by signal 9" and state.holders.connection("x") is None
    assert state.died("never-held", "node lost") == (None, [], [])
    with pytest.raises(ValueError, match="is dead"):
        state.adopt(Conn("x"))


def test_a_kept_spec_and_what_it_holds_go_with_the_death(state: State) -> None:
    spec = actor_host_pb2.ConstructActor(actor_id="r", class_name="R")
    conn_r, target = Conn("r"), Conn("target")
    state.adopt(conn_r)
    place = pb.PlaceActor(class_name="R", max_restarts=2, name="r")
    state.keep_spec("r", spec, [target], place)
    assert target.hold.handles == 1  # its arguments hold the target until it dies
    assert state.spec("r") is spec and state.spec("other") is None
    spec.restarts = 1  # constructed again after a restart
    state.keep_spec("detached", actor_host_pb2.ConstructActor(actor_id="detached", class_name="D"), [])
    state.keep_spec("killed", actor_host_pb2.ConstructActor(actor_id="killed", class_name="K"), [])
    state.released("killed")  # a kill the old master may never have carried out
    state.released("never-kept")  # harmless
    # What a restarted master hears; held: the connection to it has not given up on it.
    kept = {k.actor_id: k for k in state.kept_actors(lambda conn: True)}
    assert set(kept) == {"r", "detached"}  # not the one it killed
    assert kept["r"].placement == place and kept["r"].restarts == 1 and kept["r"].held
    assert kept["detached"].placement.class_name == "D" and not kept["detached"].held  # no handle held
    assert not {k.actor_id: k for k in state.kept_actors(lambda conn: False)}["r"].held  # it gave up
    assert state.died("r", "after 1 restarts, the last allowed") == (conn_r, [], [target])
    assert state.spec("r") is None and list(state.specs) == ["detached", "killed"]
    with pytest.raises(ValueError, match="is dead"):
        state.keep_spec("r", spec, [])
    state.validate()


def test_waiters_can_give_up(state: State) -> None:
    state.await_death("y", "w")
    state.forget_waiter("y", "w")
    state.forget_waiter("y", "w")  # twice is harmless
    assert state.death_waiters == {}


def test_deaths_are_bounded_oldest_first(state: State) -> None:
    for i in range(5):
        state.died(f"a{i}", f"cause {i}")
    assert list(state.deaths) == ["a2", "a3", "a4"]
    assert state.cause("a0") is None and state.cause("a4") == "cause 4"


def test_closing_hands_back_every_connection_and_waiter(state: State) -> None:
    conn_x = Conn("x")
    state.adopt(conn_x)
    state.request(_place(), "waiting")
    assert state.closed() == ([conn_x], ["waiting"])
    assert state.holders.actors == {} and state.placing == {}


def test_validate_catches_contradictions() -> None:
    s: State = ClientState(Holders("client"))
    s.holders.actors["x"] = Conn("x")
    s.deaths["x"] = "gone"
    with pytest.raises(AssertionError, match="both held and dead"):
        s.validate()
    s2: State = ClientState(Holders("client"))
    s2.request(_place(), "w")
    s2.placing[1].message.place_actor.request_id = 7
    with pytest.raises(AssertionError, match="message differs"):
        s2.validate()


def test_a_move_is_news_once_per_restart_and_endpoint(state: State) -> None:
    """A master sends ActorMoved again to a client back from a lost session: the move this client
    follows or followed is not news (it would construct the actor twice); a move to another slot
    with the same count (a restart placed again after its slot was not ready) is, and so is any
    move after ActorRestarting, or one whose following failed while the actor may live on."""
    assert not state.follows("x", 1, "h:1")  # not an actor this client holds or would build
    state.adopt(Conn("x"))
    assert state.follows("x", 1, "h:1")
    assert not state.follows("x", 1, "h:1")  # sent again
    assert not state.follows("x", 0, "h:0")  # older
    assert state.follows("x", 1, "h:2")  # the same restart, placed again elsewhere
    state.restarting("x")
    assert state.follows("x", 1, "h:2")  # after ActorRestarting, news whatever its count
    state.unfollow("x", 1, "h:2")  # its host was out of reach: tried again when sent again
    assert state.follows("x", 1, "h:2") and state.follows("x", 2, "h:3")
    state.died("x", "gone")
    assert "x" not in state.moves


def _lookup(name: str) -> pb.ClientEvent:
    return pb.ClientEvent(lookup_actor=pb.LookupActor(name=name))


def test_an_answered_lookup_nobody_made_a_handle_from_is_let_go(state: State) -> None:
    """The master counts the asker a holder as it answers; an asker that gave up before the
    answer (cancelled, timed out) made no handle, and nothing else would ever let it go."""
    gave_up = state.look_up(_lookup("a"), "waiter-1")
    state.looked_up(gave_up)  # cancelled: its entry went before the answer came
    waiting = state.look_up(_lookup("a"), "waiter-2")
    assert state.found(gave_up, "x") is None
    assert state.take_unclaimed() == []  # another answer about "x" may be on its way to a handle
    assert state.found(waiting, "x") == "waiter-2"
    assert state.take_unclaimed() == []  # its asker has not taken it yet
    state.looked_up(waiting)
    state.adopt(Conn("x"))  # ... and made its handle: the client holds "x" for real
    assert state.take_unclaimed() == []
    nobody = state.look_up(_lookup("b"), "waiter-3")
    state.looked_up(nobody)
    state.found(nobody, "y")
    assert state.take_unclaimed() == [drop_ref("y")] and state.take_unclaimed() == []
    building = state.look_up(_lookup("z"), "waiter-5")  # a name this client is constructing
    state.looked_up(building)
    state.holders.placed("z")
    state.found(building, "z")
    assert state.take_unclaimed() == []  # it holds "z" as its creator: not let go
    missing = state.look_up(_lookup("c"), "waiter-4")
    state.found(missing, "")  # not found: the master counted nobody
    state.looked_up(missing)
    assert state.take_unclaimed() == []


def test_a_session_opened_again_sends_placements_holds_and_what_it_counts_on(state: State) -> None:
    place = _place("A")
    state.request(place, "waiting")
    live, gave_up = Conn("live"), Conn("gave-up")
    state.adopt(live)
    state.adopt(gave_up)
    state.keep_spec("kept", actor_host_pb2.ConstructActor(actor_id="kept", class_name="K"), [])
    placement, held, confirm = state.reopened(lambda conn: conn is not gave_up)
    assert placement == place and held == add_ref("live")
    said = confirm.confirm_actors
    assert list(said.actor_ids) == ["kept", "live"] and list(said.given_up) == ["gave-up"]
    assert [k.actor_id for k in said.kept] == ["kept"]


def test_letting_go_of_an_actor_forgets_its_moves_and_a_dead_one_says_nothing(state: State) -> None:
    x = Conn("x")
    state.adopt(x)
    state.holders.hold(x)
    assert state.follows("x", 1, "h:1")
    assert state.holders.drop(x)
    effects = state.last_gone(x, busy=False)
    assert effects.events == [drop_ref("x")] and effects.close is x and "x" not in state.moves
    y = Conn("y")
    state.adopt(y)
    state.holders.hold(y)
    state.died("y", "gone")
    assert state.holders.drop(y)
    assert state.last_gone(y, busy=False).events == []  # the master knows: nothing to tell it
