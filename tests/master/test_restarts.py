"""Restarts: whether an actor whose process ended is placed again, its backoff, and the stale copies
that hold it back; alone and in the table."""

from __future__ import annotations

import pytest

from actorrt.common.errors import SLOT_NOT_READY
from actorrt.master.records import Actor, Placement, Request
from actorrt.master.restarts import (
    NOT_RESTARTED,
    RESTART_BACKOFF_MAX_S,
    RESTART_BACKOFF_S,
    RESTART_STABLE_S,
    Restarts,
    restart_delay,
)
from actorrt.master.state import TableInvariantError
from actorrt.master.table import ClusterTable
from tests.master.tables import Clock, register, released_ids, table_with_worker, two_nodes

pytestmark = pytest.mark.usefixtures("validate_every_table")


def test_a_detached_actor_waiting_to_restart_ends_when_its_creator_leaves() -> None:
    """Its creator holds its constructor arguments: placed again without it, nobody would
    construct it (the host waited forever, a slot held, the table invalid)."""
    t, ids = two_nodes(cpus=1)
    p = t.request(Request("c1", 1, name="ps", detached=True, max_restarts=3))
    assert p is not None
    t.remove_worker(ids["a"], "gone")
    t.remove_worker(ids["b"], "gone")  # nowhere to place it again: its restart waits in the queue
    assert t.actors[p.actor_id].restarting and t.queue
    assert t.remove_client("c1") == []
    [ended] = t.take_released()
    assert ended.actor.actor_id == p.actor_id and "not restarted: its creator" in ended.actor.stopping
    assert p.actor_id not in t.actors and not t.queue and "ps" not in t.names
    t.validate()


def test_an_exit_reported_for_a_copy_the_table_no_longer_lists_is_ignored() -> None:
    t, ids = two_nodes(cpus=1)
    p = t.request(Request("c1", 1, max_restarts=1))
    assert p is not None
    first_worker = ids[p.node]
    [ended] = t.remove_worker(first_worker, "silent past the worker timeout")
    [moved] = t.place_waiting()
    assert ended.restarting and moved.actor_id == p.actor_id and moved.worker_id != first_worker
    live = [Actor(p.actor_id, "", p.slot, p.endpoint, "c1", "", 1, ())]
    _, stale = register(t, live, node=p.node, cpus=1, worker_id=first_worker)
    assert [a.actor_id for a in stale] == [p.actor_id]  # the master has its daemon stop it
    free = t.workers[moved.worker_id].cpus_free
    assert t.actor_exited(p.actor_id, "stopped: reported twice by its worker", first_worker, p.slot) == (None, [])
    assert t.actor_exited(p.actor_id, "a slot it does not hold", moved.worker_id, moved.slot + 1) == (None, [])
    actor = t.actors[p.actor_id]
    assert actor.worker_id == moved.worker_id and actor.restarts == 1 and not actor.restarting
    assert t.workers[moved.worker_id].cpus_free == free
    ended_now, _ = t.actor_exited(p.actor_id, "killed by signal 9 (SIGKILL)", moved.worker_id, moved.slot)
    assert ended_now is not None and "the last allowed" in ended_now.cause
    t.validate()


def ids_of(t: ClusterTable, p: Placement) -> str:
    return t.actors[p.actor_id].worker_id


def test_an_actor_whose_slot_was_not_ready_is_never_restarted() -> None:
    """It was never constructed: its creator places it again itself (a restart burned one of its
    restarts and placed a copy nobody would construct)."""
    t, _ = two_nodes(cpus=1)
    p = t.request(Request("c1", 1, max_restarts=2, name="n"))
    assert p is not None
    ended, placed = t.actor_exited(p.actor_id, SLOT_NOT_READY, ids_of(t, p), p.slot)
    assert ended is not None and not ended.restarting and ended.cause == SLOT_NOT_READY and not placed
    assert p.actor_id not in t.actors and "n" not in t.names  # the name is free for the next attempt
    t.validate()


def test_a_restart_placed_on_a_slot_that_was_not_ready_is_placed_again_uncounted() -> None:
    t, ids = two_nodes(cpus=1)
    p = t.request(Request("c1", 1, max_restarts=1))
    assert p is not None
    [ended] = t.remove_worker(ids[p.node], "lost")
    [again] = t.place_waiting()
    assert ended.restarting and t.actors[p.actor_id].restarts == 1
    requeued, placed = t.actor_exited(p.actor_id, SLOT_NOT_READY, again.worker_id, again.slot)
    assert requeued is not None and requeued.restarting  # queued again (no slot left now), still restart 1
    assert t.actors[p.actor_id].restarts == 1 and t.actors[p.actor_id].restarting and not placed
    [third] = t.slot_ready(again.worker_id, again.slot, "b:0")  # its warm host is back
    assert third.actor_id == p.actor_id and not t.actors[p.actor_id].restarting
    t.validate()


def test_an_actor_is_not_placed_again_while_a_stale_copy_of_it_is_being_stopped() -> None:
    """One worker drops out and comes back still hosting the copy; the master has it stop that
    copy. Placed again on that worker meanwhile, the worker refused it (already hosted) silently,
    and the copy's exit no longer counts: the actor stayed listed where nothing hosted it."""
    t, wid, _ = table_with_worker(cpus=2)
    p = t.request(Request("c1", 1, max_restarts=1))
    assert p is not None
    [ended] = t.remove_worker(wid, "silent past the worker timeout")
    assert ended.restarting and t.queue  # no worker left to place it on
    live = [Actor(p.actor_id, "", p.slot, p.endpoint, "c1", "", 1, ())]
    _, stale = register(t, live, node="n1", cpus=2, worker_id=wid)
    assert [a.actor_id for a in stale] == [p.actor_id]
    assert t.slot_ready(wid, 1, "127.0.0.1:9001") == []  # not while its copy is stopping
    t.validate()
    ended_now, placed = t.actor_exited(p.actor_id, "stopped: reported twice by its worker", wid, p.slot)
    assert ended_now is None and [x.actor_id for x in placed] == [p.actor_id] and placed[0].slot == 1
    assert t.actors[p.actor_id].restarts == 1
    t.validate()


def test_a_request_resent_while_its_actor_restarts_is_answered_when_it_is_placed_again() -> None:
    """The ActorPlaced was lost with the client's stream, and the actor (never constructed) died
    and waits to be placed again when the client sends the request again. It used to place a
    second actor, and the first, placed again later, was never constructed (its creator did not
    know it) and held a slot for the client's lifetime. The resent request now waits for it:
    answered when it is placed again, failed if it dies instead, and a client that gives up on
    the request (withdraws it) leaves it to be stopped."""
    t, wid, _ = table_with_worker(cpus=1)
    first = t.request(Request("c1", 1, max_restarts=2, name="learner"))
    assert first is not None  # its ActorPlaced is on the stream that breaks
    ended, placed = t.actor_exited(first.actor_id, "killed by signal 9 (SIGKILL)")
    assert ended is not None and ended.restarting and placed == []  # its slot is not ready again yet
    t.client_lost("c1")
    t.clients.open("c1", "host", 1)
    assert t.request(Request("c1", 1, max_restarts=2, name="learner")) is None  # waits for it
    assert len(t.actors) == 1 and t.answered_by("c1", 1) == first.actor_id and t.answered_by("c1", 2) == ""
    t.validate()
    (again,) = t.slot_ready(wid, 0, "127.0.0.1:9100")
    assert again.actor_id == first.actor_id and again.answers == 1 and again.request.restart_of
    assert t.answered_by("c1", 1) == "" and t.actors[first.actor_id].answers == 0
    t.validate()

    # it is given up on instead: the actor says which request to fail
    ended, _ = t.actor_exited(first.actor_id, "killed by signal 9 (SIGKILL)")
    assert ended is not None and ended.restarting
    assert t.request(Request("c1", 1, max_restarts=2, name="learner")) is None
    t.client_lost("c1")
    assert t.actors[first.actor_id].answers == 0  # nothing waits while its client is away
    t.clients.open("c1", "host", 1)
    assert t.request(Request("c1", 1, max_restarts=2, name="learner")) is None
    gone = t.release_actor("c1", first.actor_id, "its placement was abandoned while it restarted")
    assert gone is not None and gone.answers == 1 and [r.actor for r in t.take_released()] == [gone]
    assert t.answered_by("c1", 1) == "" and "learner" not in t.names
    t.validate()


def test_a_restartable_actor_is_placed_again_then_dies_after_its_last_restart() -> None:
    t, _ = two_nodes(cpus=1)
    p = t.request(Request("c1", 1, max_restarts=1, name="r"))
    assert p is not None
    ended, placed = t.actor_exited(p.actor_id, "killed by signal 9 (SIGKILL)")
    assert ended is not None and ended.restarting and ended.actor.restarts == 1
    assert [x.actor_id for x in placed] == [p.actor_id]  # same id, the other node's free slot
    assert placed[0].node != p.node and t.names["r"] == p.actor_id
    t.validate()
    ended, _ = t.actor_exited(p.actor_id, "killed by signal 9 (SIGKILL)")
    assert ended is not None and not ended.restarting
    assert "after 1 restarts, the last allowed" in ended.cause
    assert p.actor_id not in t.actors and "r" not in t.names
    t.validate()


def test_restarts_after_quick_exits_back_off_and_an_instance_that_lived_resets_it() -> None:
    """An actor that can never start (max_restarts=-1) must not spin: the first quick exit
    restarts at once, each further one waits twice as long (capped); one that lived resets it."""
    t, w, clock = table_with_worker(cpus=1)
    t.slot_ready(w, 1, "127.0.0.1:9001")  # a second warm host: a restart could be placed at once
    p = t.request(Request("c1", 1, max_restarts=-1))
    assert p is not None
    waits = []
    for _ in range(10):
        ended, placed = t.actor_exited(p.actor_id, "exit 1")
        assert ended is not None and ended.restarting
        waits.append(ended.delay_s)
        if ended.delay_s:
            assert placed == [] and t.next_wakeup() == clock.now + ended.delay_s
            clock.now += ended.delay_s - 0.01
            assert t.place_waiting() == []  # not before its backoff ends
            t.validate()  # waiting is not "fits a ready slot but was not placed"
            clock.now += 0.01
            t.validate()  # ended but not woken yet: the master's timer or sweep places it
            placed = t.place_waiting()
        assert [x.actor_id for x in placed] == [p.actor_id]
        t.slot_ready(w, placed[0].slot ^ 1, f"127.0.0.1:{9000 + (placed[0].slot ^ 1)}")
    assert waits == [0.0, RESTART_BACKOFF_S, 1.0, 2.0, 4.0, 8.0, 16.0, RESTART_BACKOFF_MAX_S, 30.0, 30.0]
    assert restart_delay(10**6) == RESTART_BACKOFF_MAX_S
    clock.now += RESTART_STABLE_S  # this instance lived: the next exit restarts at once
    ended, placed = t.actor_exited(p.actor_id, "exit 1")
    assert ended is not None and ended.delay_s == 0.0 and [x.actor_id for x in placed] == [p.actor_id]
    assert t.actors[p.actor_id].restarts == 11


def test_a_restart_waits_for_its_creator_to_be_back_to_construct_it() -> None:
    """Placed while its creator was away, the restart's construct notice went nowhere: it was
    listed on a slot and never constructed."""
    t, w, _ = table_with_worker(cpus=1)
    p = t.request(Request("c1", 1, max_restarts=1))
    assert p is not None
    ended, placed = t.actor_exited(p.actor_id, "exit 1")
    assert ended is not None and ended.restarting and placed == []  # its slot's host is not back yet
    t.client_lost("c1")  # its creator's session breaks meanwhile
    assert t.slot_ready(w, 0, "127.0.0.1:9000") == []
    t.validate()  # a ready slot, a queued restart, not placed: it waits for its creator
    t.clients.open("c1", "host", 1)
    assert [x.actor_id for x in t.place_waiting()] == [p.actor_id]


def test_a_restart_waiting_out_its_backoff_ends_when_killed() -> None:
    t, w, _ = table_with_worker(cpus=2)
    p = t.request(Request("c1", 1, max_restarts=-1))
    assert p is not None
    t.actor_exited(p.actor_id, "exit 1")
    t.slot_ready(w, p.slot, "127.0.0.1:9000")
    ended, _ = t.actor_exited(p.actor_id, "exit 1")
    assert ended is not None and ended.delay_s > 0 and t.actors[p.actor_id].restarting
    t.release_actor("c1", p.actor_id, "killed")
    assert released_ids(t) == [p.actor_id]
    assert not t.queue and t.next_wakeup() is None


def test_a_killed_actor_is_not_restarted_and_a_restarting_one_ends_at_once() -> None:
    t, ids = two_nodes(cpus=1)
    a = t.request(Request("c1", 1, max_restarts=-1))
    assert a is not None
    t.release_actor("c1", a.actor_id, "killed by actorrt.kill()")
    ended, _ = t.actor_exited(a.actor_id, "exit 0")
    assert ended is not None and not ended.restarting and ended.cause == "killed by actorrt.kill()"
    b = t.request(Request("c1", 2, max_restarts=-1))
    assert b is not None
    t.remove_worker(ids["a"] if b.node == "a" else ids["b"], "gone")
    t.remove_worker(ids["b"] if b.node == "a" else ids["a"], "gone")  # nowhere to restart
    assert t.actors[b.actor_id].restarting
    t.validate()
    t.release_actor("c1", b.actor_id, "killed")
    assert released_ids(t) == [b.actor_id] and not t.queue
    t.validate()


# ---- Restarts alone -----------------------------------------------------------------------------


def _placed(max_restarts: int, placed_at: float, restarts: int = 0) -> Actor:
    return Actor("a", "w", 0, "e", "c1", "A", 1, (), max_restarts=max_restarts, restarts=restarts, placed_at=placed_at)


def test_an_exit_restarts_counted_and_quick_exits_in_a_row_back_off() -> None:
    clock = Clock()
    restarts = Restarts(clock)
    actor = _placed(-1, clock.now)
    assert restarts.exited(actor, "exit 1", creator_connected=True) == (True, "exit 1", 0.0)  # the first: at once
    assert actor.restarts == 1 and actor.quick_exits == 1 and not restarts.waits("a")
    actor.placed_at = clock.now
    assert restarts.exited(actor, "exit 1", creator_connected=True) == (True, "exit 1", RESTART_BACKOFF_S)
    assert restarts.waits("a") and restarts.next_backoff() == clock.now + RESTART_BACKOFF_S
    actor.restarting = True
    restarts.validate({"a": actor}, set())
    clock.now += RESTART_BACKOFF_S - 0.01
    restarts.backoffs_over()
    assert restarts.waits("a")
    clock.now += 0.01
    restarts.backoffs_over()
    assert not restarts.waits("a") and restarts.next_backoff() is None
    actor.placed_at = clock.now - RESTART_STABLE_S  # this instance lived: the count starts again
    assert restarts.exited(actor, "exit 1", creator_connected=True) == (True, "exit 1", 0.0)
    assert actor.quick_exits == 0 and actor.restarts == 3


def test_an_exit_says_why_its_actor_is_not_restarted() -> None:
    restarts = Restarts(Clock())
    last = _placed(1, 0.0, restarts=1)
    assert restarts.exited(last, "exit 1", True) == (False, "exit 1 (after 1 restarts, the last allowed)", 0.0)
    assert restarts.exited(_placed(2, 0.0), "exit 1", False) == (False, f"exit 1; {NOT_RESTARTED}", 0.0)
    assert restarts.exited(_placed(0, 0.0), "exit 1", True) == (False, "exit 1", 0.0)  # never restartable
    killed = _placed(-1, 0.0)
    killed.stopping = "killed by actorrt.kill()"
    assert restarts.exited(killed, "exit 0", True) == (False, "killed by actorrt.kill()", 0.0)
    first = _placed(3, 0.0)
    assert restarts.exited(first, SLOT_NOT_READY, True) == (False, SLOT_NOT_READY, 0.0)  # never constructed
    again = _placed(3, 0.0, restarts=1)
    assert restarts.exited(again, SLOT_NOT_READY, True) == (True, SLOT_NOT_READY, 0.0)
    assert again.restarts == 1  # placed again, uncounted
    assert not restarts.waits("a")


def test_a_restarts_request_is_never_a_clients_and_asks_what_the_actor_had() -> None:
    restarts = Restarts(Clock())
    actor = Actor("a", "", -1, "", "c1", "A", 2, (), num_gpus=1, max_memory_mb=64)
    first, second = restarts.request(actor), restarts.request(actor)
    assert first.request_id < 0 and second.request_id < first.request_id
    assert (first.client_id, first.num_cpus, first.num_gpus, first.max_memory_mb, first.restart_of) == (
        "c1",
        2,
        1,
        64,
        "a",
    )


def test_stale_copies_hold_a_restart_back_until_each_exit_is_in_or_its_worker_is_gone() -> None:
    restarts = Restarts(Clock())
    actors = {"a": Actor("a", "", -1, "", "c1", "A", 1, (), restarting=True)}
    restarts.stale_copy("a", "w1")
    restarts.stale_copy("a", "w2")
    assert restarts.waits("a")
    restarts.validate(actors, {"w1", "w2"})
    with pytest.raises(TableInvariantError, match="on workers not in the table"):
        restarts.validate(actors, {"w1"})
    assert not restarts.copy_exited("a", "w3") and not restarts.copy_exited("b", "w1")
    assert restarts.copy_exited("a", "w1") and restarts.waits("a")
    restarts.worker_gone("w2")
    assert not restarts.waits("a") and not restarts.copy_exited("a", "w2")
    restarts.validate(actors, set())


def test_validate_names_a_backoff_kept_for_an_actor_placed_or_gone() -> None:
    clock = Clock()
    restarts = Restarts(clock)
    actor = _placed(-1, clock.now)
    restarts.exited(actor, "exit 1", True)
    actor.placed_at = clock.now
    restarts.exited(actor, "exit 1", True)  # a backoff
    with pytest.raises(TableInvariantError, match="waits out a restart backoff but is placed"):
        restarts.validate({"a": actor}, set())
    with pytest.raises(TableInvariantError, match="no longer listed"):
        restarts.validate({}, set())
    restarts.forget("a")
    restarts.validate({}, set())
