"""References: holders, handle copies on their way (counted with a sign), voided copies; alone and
as the table releases actors nobody holds."""

from __future__ import annotations

import pytest

from actorrt.master.records import Actor, Request
from actorrt.master.references import SETTLED_KEPT, References
from actorrt.master.state import TableInvariantError
from tests.master.tables import released_ids, two_nodes

pytestmark = pytest.mark.usefixtures("validate_every_table")


def test_an_actor_is_released_when_no_holder_and_no_copy_in_flight_remains() -> None:
    t, _ = two_nodes(cpus=1)
    t.clients.open("c2", "h", 2)
    p = t.request(Request("c1", 1))
    assert p is not None
    aid = p.actor_id
    t.add_ref("c1", aid, "c1.1")  # c1 sends a copy to c2
    t.add_ref("c2", aid)  # c2 unpickled it ...
    t.drop_ref("c2", aid, "c1.1")  # ... and says the copy arrived
    t.drop_ref("c1", aid)  # the creator drops its handle
    assert not t.take_released() and t.refs.holders_of(aid) == {"c2"}
    t.validate()
    t.drop_ref("c2", aid, "c1.2")  # a copy that arrived before its sender's word
    t.drop_ref("c2", aid)
    assert not t.take_released()  # that copy is still counted (-1): its AddRef is on its way
    t.add_ref("c1", aid, "c1.2")
    t.drop_ref("c1", aid)  # nothing changes for c1; the count check runs again
    released = t.take_released()
    assert [r.actor.actor_id for r in released] == [aid] and "no handle" in released[0].actor.stopping
    t.validate()
    assert aid in t.refs.sent_by("c1")
    t.actor_exited(aid, "stopped")
    assert aid not in t.refs.sent_by("c1")  # it remembered every actor it ever sent a copy of
    t.validate()


def test_copies_in_flight_die_with_the_client_that_sent_them() -> None:
    t, _ = two_nodes(cpus=1)
    t.clients.open("c2", "h", 2)
    p = t.request(Request("c2", 1, detached=False))
    assert p is not None
    t.add_ref("c1", p.actor_id, "c1.7")  # c1 held it and sent a copy that is never unpickled
    t.clients.open("c3", "h", 3)
    t.drop_ref("c2", p.actor_id)
    assert not t.take_released()
    t.remove_client("c1")
    assert released_ids(t) == [p.actor_id]
    t.validate()


def test_a_copy_whose_receiver_died_before_claiming_it_is_void() -> None:
    """A copy sent in a call whose receiver died before running it was never claimed, and kept
    its actor for the sender's lifetime. Its sender voids it: at once if the receiver's process
    is gone, else when it ends (the sender may have given up on a live receiver, whose claim may
    still come first); only its own copies; a claim that comes after all is ignored."""
    t, _ = two_nodes(cpus=2)
    t.clients.open("c2", "h", 2)
    x, r, s = (t.request(Request("c2", i, max_restarts=m)) for i, m in ((1, 0), (2, 1), (3, 0)))
    assert x is not None and r is not None and s is not None
    t.add_ref("c1", x.actor_id)
    t.drop_ref("c2", x.actor_id)  # x's creator let go: c1 holds it, and sends copies of it
    for token in ("c1.1", "c1.2", "c1.3", "c1.4"):
        t.add_ref("c1", x.actor_id, token)
    t.void_copy("c1", x.actor_id, "c1.1", r.actor_id)  # r lives: void when its process ends ...
    t.void_copy("c1", x.actor_id, "c1.4", r.actor_id)
    t.drop_ref("c3", x.actor_id, "c1.4")  # ... unless claimed first (then it is simply counted)
    t.void_copy("c2", x.actor_id, "c1.2", s.actor_id)  # not c2's copy
    assert set(t.refs.tokens_of(x.actor_id)) == {"c1.1", "c1.2", "c1.3"}
    t.validate()
    t.actor_exited(r.actor_id, "killed by signal 9")  # r restarts: its process that got c1.1 is gone
    t.actor_exited(s.actor_id, "exited with code 1")  # s is gone for good
    t.void_copy("c1", x.actor_id, "c1.2", s.actor_id)
    assert set(t.refs.tokens_of(x.actor_id)) == {"c1.3"}
    t.drop_ref("c3", x.actor_id, "c1.1")  # a claim of a void copy comes after all: ignored
    assert list(t.refs.settled_of(x.actor_id)) == ["c1.4", "c1.1", "c1.2"]  # claimed, voided, voided
    t.validate()
    t.drop_ref("c1", x.actor_id)
    assert not t.take_released()  # c1.3 is on its way still
    t.remove_client("c1")  # ... and its sender left: void too, its late claim ignored
    assert released_ids(t) == [x.actor_id]
    t.drop_ref("c2", x.actor_id, "c1.3")
    assert t.refs.tokens_of(x.actor_id) == {}
    t.validate()


def test_a_void_copy_releases_its_actor_when_the_receivers_process_ends() -> None:
    t, _ = two_nodes(cpus=1)
    x, r = t.request(Request("c1", 1)), t.request(Request("c1", 2))
    assert x is not None and r is not None
    t.add_ref("c1", x.actor_id, "c1.1")
    t.void_copy("c1", x.actor_id, "c1.1", r.actor_id)  # r lives: its claim may still come
    t.drop_ref("c1", x.actor_id)
    assert not t.take_released()
    t.actor_exited(r.actor_id, "exited with code 1")
    assert released_ids(t) == [x.actor_id]
    t.validate()


def test_a_detached_actor_outlives_its_creator_and_holders() -> None:
    t, _ = two_nodes(cpus=1)
    p = t.request(Request("c1", 1, name="ps", detached=True))
    assert p is not None
    t.drop_ref("c1", p.actor_id)
    assert t.remove_client("c1") == [] and not t.take_released()
    assert t.actors[p.actor_id].client_id == "" and t.names["ps"] == p.actor_id
    t.validate()


# ---- References alone ---------------------------------------------------------------------------


def _listed(*actor_ids: str) -> dict[str, Actor]:
    return {a: Actor(a, "w", i, "e", "c1", "A", 1, ()) for i, a in enumerate(actor_ids)}


def test_holders_and_the_clients_holdings_mirror_each_other() -> None:
    refs, actors, clients = References(), _listed("a", "b"), {"c1", "c2"}
    for actor_id in actors:
        refs.listed(actor_id)
        refs.hold("c1", actor_id)
    refs.hold("c2", "a")
    assert refs.holders_of("a") == {"c1", "c2"} and refs.holding("c1") == {"a", "b"}
    assert refs.holds("c2", "a") and not refs.holds("c2", "b") and refs.count("a") == 2
    refs.validate(actors, clients)
    refs.let_go("c1", "a")
    assert refs.holders_of("a") == {"c2"} and refs.holding("c1") == {"b"} and refs.held("a")
    holders = refs.forget("a")
    del actors["a"]
    assert holders == {"c2"} and refs.holding("c2") == set()  # its holders, as they were
    refs.validate(actors, clients)
    with pytest.raises(TableInvariantError, match=r"holders \['c1'\] are not all clients holding it"):
        refs.validate(actors, {"c2"})


def test_a_copy_is_counted_with_a_sign_whichever_word_comes_first() -> None:
    refs, actors = References(), _listed("a")
    refs.listed("a")
    refs.claimed("a", "c1.1")  # the receiver's claim came first: counted below zero
    assert refs.tokens_of("a") == {"c1.1": -1} and refs.held("a") and not refs.in_flight("a", "c1.1")
    refs.sent_copy("c1", "a", "c1.1")  # its sender's word: settled
    refs.sent_copy("c1", "a", "c1.2")
    assert refs.tokens_of("a") == {"c1.2": 1} and refs.in_flight("a", "c1.2") and refs.sent_by("c1") == {"a"}
    refs.validate(actors, {"c1"})
    refs.claimed("a", "c1.2")
    assert refs.tokens_of("a") == {} and not refs.held("a")  # nobody holds it: the table releases it
    with pytest.raises(TableInvariantError, match="nobody holds it, but it was not released"):
        refs.validate(actors, {"c1"})
    actors["a"].stopping = "released: no handle to it remains"
    refs.validate(actors, {"c1"})


def test_a_copy_void_later_is_void_when_its_receivers_process_ends_unless_claimed_first() -> None:
    refs, actors = References(), _listed("a", "receiver")
    for actor_id in actors:
        refs.listed(actor_id, counted=False)
    for token in ("c1.1", "c1.2"):
        refs.sent_copy("c1", "a", token)
        refs.void_later("receiver", "a", token)
    refs.claimed("a", "c1.2")  # the receiver claimed this one before it ended
    refs.validate(actors, {"c1"})
    assert refs.process_ended("receiver") == ["a"] and refs.process_ended("receiver") == []
    assert refs.tokens_of("a") == {} and list(refs.settled_of("a")) == ["c1.2", "c1.1"]
    for _ in range(2):
        refs.claimed("a", "c1.1")  # its late claim is ignored, however often it comes
    assert refs.tokens_of("a") == {} and list(refs.settled_of("a")) == ["c1.2", "c1.1"]
    assert not refs.void("a", "c1.9")  # not counted: nothing to void
    refs.validate(actors, {"c1"})


def test_a_copy_is_claimed_once_however_often_its_bytes_are_loaded() -> None:
    """One pickled handle's bytes loaded twice (or in two processes) claim its copy twice: the
    count went to -1 and held the actor until its sender left. Only the first claim counts,
    whether it comes before or after the sender's word."""
    refs, actors = References(), _listed("a")
    refs.listed("a")
    refs.hold("c1", "a")
    refs.sent_copy("c1", "a", "c1.1")
    refs.claimed("a", "c1.1")
    refs.claimed("a", "c1.1")  # loaded again, after the copy was settled
    refs.claimed("a", "c1.2")  # before its sender's word ...
    refs.claimed("a", "c1.2")  # ... and again
    assert refs.tokens_of("a") == {"c1.2": -1}
    refs.sent_copy("c1", "a", "c1.2")
    refs.claimed("a", "c1.2")
    assert refs.tokens_of("a") == {} and list(refs.settled_of("a")) == ["c1.1", "c1.2"]
    refs.let_go("c1", "a")
    assert not refs.held("a")  # nobody holds it: released
    actors["a"].stopping = "released: no handle to it remains"
    refs.validate(actors, {"c1"})


def test_settled_copies_are_bounded_per_actor() -> None:
    refs, actors = References(), _listed("a")
    refs.listed("a", counted=False)
    for n in range(SETTLED_KEPT + 5):
        refs.sent_copy("c1", "a", f"c1.{n}")
        assert refs.void("a", f"c1.{n}")
    voided = list(refs.settled_of("a"))
    assert len(voided) == SETTLED_KEPT and voided[0] == "c1.5"  # the oldest forgotten first
    refs.validate(actors, {"c1"})


def test_a_client_that_leaves_holds_nothing_and_its_copies_on_their_way_are_void() -> None:
    refs, actors = References(), _listed("a", "b")
    for actor_id in actors:
        refs.listed(actor_id)
    refs.hold("c1", "a")
    refs.hold("c2", "b")
    refs.sent_copy("c1", "b", "c1.1")  # on its way: never claimed now
    refs.claimed("b", "c1.2")  # arrived before its sender's word, which never comes
    refs.sent_copy("c2", "b", "c2.1")
    assert sorted(refs.client_gone("c1")) == ["a", "b"]
    assert refs.holders_of("a") == set() and refs.holding("c1") == set() and refs.sent_by("c1") == set()
    assert refs.tokens_of("b") == {"c2.1": 1} and list(refs.settled_of("b")) == ["c1.1", "c1.2"]
    refs.claimed("b", "c1.2")  # claimed again: settled, ignored
    assert refs.tokens_of("b") == {"c2.1": 1}
    actors["a"].stopping = "released: no handle to it remains"
    refs.validate(actors, {"c2"})
