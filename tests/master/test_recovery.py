"""Recovery, driven by events with an injected clock: workers registering again with the actors
they host, clients confirming the actors they hold after a lost session, and what a restarted
master settles once its workers had their time. (tests/master/test_recovery_sessions.py has
the same through a real master.)"""

from __future__ import annotations

import pytest

from actorrt.master.records import Actor, Request
from actorrt.master.recovery import (
    LOST_WHILE_MASTER_DOWN,
    READOPTED_TOLD_S,
    Died,
    Exit,
    Kept,
    Placements,
    Readopted,
    Recovery,
    Tell,
)
from actorrt.master.table import ClusterTable
from tests.master.tables import Clock, register, released_ids, table_with_worker

pytestmark = pytest.mark.usefixtures("validate_every_table")


def test_reregistering_worker_rebuilds_its_actors() -> None:
    """A restarted master learns the live actors from the daemon's registration."""
    t = ClusterTable()
    live = Actor("a1", "", slot=1, endpoint="127.0.0.1:9001", client_id="c9", class_name="A", num_cpus=1, gpu_ids=())
    w, stale = register(t, [live], node="n", cpus=2, worker_id="w-old")
    assert not stale
    assert w.worker_id == "w-old" and w.cpus_free == 1 and t.actors["a1"].worker_id == "w-old"
    assert not t.clients["c9"].connected  # its client must come back within the grace period
    t.clients.open("c9", "h", 2)
    assert t.clients["c9"].connected and "a1" in t.clients["c9"].actors


def test_a_worker_registering_again_with_its_actors_keeps_them_as_they_were() -> None:
    """Its session came back before the master saw it go: the same instances, with their holders
    and restarts. (Each restartable one was restarted, and its live copy stopped as stale.)"""
    t, wid, _ = table_with_worker(cpus=2)
    t.clients.open("c2", "h", 2)
    a = t.request(Request("c1", 1, max_restarts=1))
    b = t.request(Request("c1", 2))
    assert a is not None and b is not None
    t.add_ref("c2", a.actor_id)
    live = [Actor(p.actor_id, "", p.slot, p.endpoint, "c1", "", 1, ()) for p in (a, b)]
    recovery = Recovery(t, settle_after_s=4.0)
    assert recovery.still_hosted(wid, live) == {a.actor_id, b.actor_id}
    assert recovery.worker_returning(wid, live, []) == []
    _, stale = register(t, live, node="n1", cpus=2, worker_id=wid)
    assert stale == [] and not t.queue
    kept = t.actors[a.actor_id]
    assert kept.restarts == 0 and not kept.restarting and t.refs.holders_of(a.actor_id) == {"c1", "c2"}
    assert t.refs.counted(a.actor_id)
    assert t.workers[wid].cpus_free == 0 and t.workers[wid].held == {a.slot: a.actor_id, b.slot: b.actor_id}
    t.validate()


def test_a_worker_registering_again_is_told_again_to_stop_what_it_was_told_to_stop() -> None:
    """A kill sent to the worker's stream just before it broke may never have arrived: the
    worker still reports the actor when its session comes back, and without a second StopActor
    it ran until its creator left (for good, if detached), holding its slot."""
    t, wid, _ = table_with_worker(cpus=2)
    a = t.request(Request("c1", 1))
    b = t.request(Request("c1", 2))
    assert a is not None and b is not None
    killed = t.release_actor("c1", b.actor_id, "killed")
    assert killed is not None and killed.stopping == "killed"
    live = [Actor(p.actor_id, "", p.slot, p.endpoint, "c1", "", 1, ()) for p in (a, b)]
    assert Recovery(t, settle_after_s=4.0).worker_returning(wid, live, []) == []
    _, stale = register(t, live, node="n1", cpus=2, worker_id=wid)
    assert [(s.actor_id, s.stopping) for s in stale] == [(b.actor_id, "killed")]
    assert not t.actors[a.actor_id].stopping
    t.actor_exited(b.actor_id)  # the worker stops it and reports the exit: its slot is free
    assert t.workers[wid].cpus_free == 1 and set(t.actors) == {a.actor_id}
    t.validate()


def test_an_actor_rebuilt_from_its_worker_is_never_released_for_lack_of_holders() -> None:
    """A restarted master rebuilds actors from its workers' reports with their creator as their
    only known holder: a client's AddRef that came before the worker was dropped. The first
    AddRef after the worker turned counting on, so that client and the creator letting go
    released the actor while the first client still used it. Who holds a rebuilt actor is not
    known for sure: it is never released by reference; it ends with its creator, or by a kill."""
    t = ClusterTable(Clock())
    live = [Actor("shared", "", 0, "127.0.0.1:9000", "creator", "A", 1, ())]
    _, stale = register(t, live, node="n1", cpus=1)
    assert stale == []
    t.clients.open("creator", "host", 1)
    t.clients.open("late", "host", 2)  # its AddRef came after the worker registered
    t.add_ref("late", "shared")
    t.drop_ref("late", "shared")
    t.drop_ref("creator", "shared")  # a third client whose AddRef was dropped may still use it
    assert t.take_released() == [] and not t.actors["shared"].stopping
    t.validate()
    stopped = t.remove_client("creator")  # it ends with its creator
    assert [a.actor_id for a in stopped] == ["shared"] and t.actors["shared"].stopping
    t.validate()


def _lost(actor_id: str, client_id: str = "c1", *, max_restarts: int = 2, restarts: int = 0, name: str = "") -> Actor:
    """A restartable actor as its creator describes it to a restarted master."""
    return Actor(actor_id, "", -1, "", client_id, "R", 1, (), name=name, max_restarts=max_restarts, restarts=restarts)


def test_a_restartable_actor_a_restarted_master_lost_is_placed_again_from_its_creators_word() -> None:
    """No worker brought it back (it died while the master was down): its creator's word queues
    its restart, counted, its name kept unless taken meanwhile; its limit is honoured, and a
    creator that has left is nobody to construct it. Who holds it is not known for sure, so it
    is never released for lack of holders: it ends with its creator, or by a kill."""
    t, w, _ = table_with_worker(cpus=2)
    taken = t.request(Request("c1", 1, name="taken"))
    assert taken is not None
    assert t.readopt(_lost("a1", restarts=1, name="r"), held=True)
    assert t.readopt(_lost("a2", max_restarts=-1, restarts=7, name="taken"), held=False)
    a1, a2 = t.actors["a1"], t.actors["a2"]
    assert a1.restarting and a1.restarts == 2 and t.names["r"] == "a1" and t.refs.holders_of("a1") == {"c1"}
    assert a2.restarts == 8 and a2.name == "" and t.names["taken"] == taken.actor_id
    assert t.refs.holders_of("a2") == set() and not t.refs.counted("a2") and not t.refs.counted("a1")
    placed = t.place_waiting()
    assert [(p.actor_id, p.request.restart_of) for p in placed] == [("a1", "a1")]  # one free slot
    assert not t.actors["a1"].restarting and t.actors["a1"].worker_id == w
    t.validate()
    t.drop_ref("c1", "a1")  # its creator lets go: kept, someone else may hold it
    assert t.take_released() == [] and {"a1", "a2"} <= set(t.actors)
    assert t.release_actor("c1", "a2", "killed") is not None  # a kill still ends one
    assert released_ids(t) == ["a2"] and "a2" not in t.actors  # it had no process
    assert not t.readopt(_lost("a1"), held=True)  # listed: not twice
    assert not t.readopt(_lost("a3", max_restarts=1, restarts=1), held=True)  # its last restart was used
    assert not t.readopt(_lost("a5", "nobody"), held=True)  # its creator has left: nobody constructs it
    t.clients.open("c2", "host", 2)
    t.client_lost("c2")
    d = _lost("a4", "c2")
    d.detached = True
    assert t.readopt(d, held=False)  # its creator is away (in its grace): the restart waits for it
    t.release_actor("c1", taken.actor_id, "done")  # the one slot frees
    t.actor_exited(taken.actor_id, "released", w, taken.slot)
    assert t.slot_ready(w, taken.slot, "127.0.0.1:9100") == []  # a4 waits for its creator
    t.validate()
    t.clients.open("c2", "host", 2)
    assert [p.actor_id for p in t.place_waiting()] == ["a4"]
    t.validate()


# ---- confirmations, settled by the clock ---------------------------------------------------------

SETTLE_S = 4.0  # a worker timeout and a reconnect period


def restarted_master(cpus: int = 2) -> tuple[ClusterTable, Recovery, Clock]:
    """A master that just started (young: its workers may still be registering), with one worker
    whose slots are ready and the clients "creator" and "holder" back."""
    clock = Clock()
    t = ClusterTable(clock)
    recovery = Recovery(t, settle_after_s=SETTLE_S)
    w = t.workers.join(node="n1", node_ip="127.0.0.1", cpus=cpus, gpus=0)
    for slot in range(cpus):
        t.slot_ready(w.worker_id, slot, f"127.0.0.1:{9000 + slot}")
    for client_id in ("creator", "holder"):
        t.clients.open(client_id, "host", 1)
    return t, recovery, clock


def kept(actor_id: str, *, max_restarts: int = 2, restarts: int = 0, held: bool = True) -> Kept:
    """A restartable actor as its creator describes it in its confirm."""
    return Kept(Actor(actor_id, "", -1, "", "creator", "R", 1, (), max_restarts=max_restarts, restarts=restarts), held)


def test_a_confirmed_death_is_answered_at_once_an_unknown_actor_once_the_workers_had_their_time() -> None:
    t, recovery, clock = restarted_master()
    t.record_death(Actor("victim", "w", 0, "e", "creator", "A", 1, ()), "killed by signal 9")
    live = t.request(Request("creator", 1))
    assert live is not None
    effects = recovery.confirmed("creator", ["victim", "ghost", live.actor_id])
    assert effects == [Died("creator", "victim", "killed by signal 9"), Placements([])]
    assert recovery.settle_at == clock.now + SETTLE_S  # ghost waits: its worker may still register
    clock.now += SETTLE_S
    assert recovery.settle() == [Died("creator", "ghost", LOST_WHILE_MASTER_DOWN), Placements([])]
    assert "ghost" in t.dead and recovery.settle_at is None  # remembered: a worker with it stops it
    clock.now += 1  # settled: an unknown id is answered at once
    assert recovery.confirmed("holder", ["ghost2"]) == [
        Died("holder", "ghost2", LOST_WHILE_MASTER_DOWN),
        Placements([]),
    ]


def test_an_actor_its_worker_brings_back_while_pending_is_not_reported_dead() -> None:
    t, recovery, clock = restarted_master()
    assert recovery.confirmed("creator", ["a1"]) == [Placements([])]
    w = t.workers.join(node="n2", node_ip="127.0.0.1", cpus=1, gpus=0)
    assert recovery.worker_registered(w, [Actor("a1", "", 0, "e", "creator", "A", 1, ())]) == []
    clock.now += SETTLE_S
    assert recovery.settle() == [Placements([])] and "a1" in t.actors and "a1" not in t.dead


def test_a_kept_actor_is_placed_again_from_its_creators_word_and_a_late_holder_is_told_once() -> None:
    t, recovery, clock = restarted_master()
    clock.now += SETTLE_S  # its workers had their time: settled at once
    ghost = kept("ghost")
    [readopted, tell, placements] = recovery.confirmed("creator", ["ghost"], [ghost])
    actor = t.actors["ghost"]
    assert readopted == Readopted(actor) and actor is ghost.actor and actor.restarts == 1
    assert tell == Tell(actor, {"creator"}, placed=False)  # restarting when told: no ActorMoved yet
    assert isinstance(placements, Placements) and [p.request.restart_of for p in placements.placements] == ["ghost"]
    assert not actor.restarting and t.refs.holders_of("ghost") == {"creator"} and not t.refs.counted("ghost")
    t.add_ref("holder", "ghost")  # the AddRef a reopened session sends first
    assert recovery.confirmed("holder", ["ghost"]) == [Tell(actor, {"holder"}, placed=True), Placements([])]
    assert recovery.confirmed("holder", ["ghost"]) == [Placements([])]  # told already
    assert recovery.confirmed("creator", ["ghost"]) == [Placements([])]  # told when it was placed
    t.clients.open("late", "host", 3)
    t.add_ref("late", "ghost")
    clock.now += READOPTED_TOLD_S  # its connection has given up waiting by now
    assert recovery.confirmed("late", ["ghost"]) == [Placements([])]


def test_confirms_due_together_settle_together_and_a_given_up_handle_holds_nothing() -> None:
    t, recovery, clock = restarted_master()
    t.clients.open("quitter", "host", 3)
    assert recovery.confirmed("creator", ["ghost"], [kept("ghost", held=False)]) == [Placements([])]
    assert recovery.confirmed("quitter", ["ghost"], given_up={"ghost"}) == [Placements([])]
    due = recovery.settle_at
    assert due == clock.now + SETTLE_S
    clock.now = due  # due, but its timer has not run yet: the next confirm settles them all
    effects = recovery.confirmed("holder", ["ghost"])
    actor = t.actors["ghost"]
    assert not any(isinstance(fx, Died) for fx in effects) and recovery.settle_at is None
    assert t.refs.holders_of("ghost") == {"holder"}  # the creator only keeps it; the quitter gave up
    assert Tell(actor, {"creator", "holder"}, placed=False) in effects


def test_a_kept_actor_past_its_last_restart_or_without_its_creator_is_reported_dead() -> None:
    t, recovery, clock = restarted_master()
    clock.now += SETTLE_S
    last = "gone: no worker reported it to the restarted master"
    effects = recovery.confirmed("creator", ["spent"], [kept("spent", max_restarts=1, restarts=1)])
    assert effects == [
        Died("creator", "spent", f"{LOST_WHILE_MASTER_DOWN} (after 1 restarts, the last allowed)"),
        Placements([]),
    ]
    assert t.dead["spent"].cause.startswith(last)
    t.remove_client("creator")  # its creator left: nobody would construct it
    orphan = kept("orphan")
    assert recovery.confirmed("holder", ["orphan"], [orphan]) == [
        Died("holder", "orphan", LOST_WHILE_MASTER_DOWN),
        Placements([]),
    ]


# ---- workers registering again ------------------------------------------------------------------


def test_a_returning_worker_ends_what_it_no_longer_reports_with_the_causes_it_sends() -> None:
    t, wid, _ = table_with_worker(cpus=3)
    a, b, c = (t.request(Request("c1", i)) for i in (1, 2, 3))
    assert a is not None and b is not None and c is not None
    recovery = Recovery(t, settle_after_s=SETTLE_S)
    live = [Actor(a.actor_id, "", a.slot, a.endpoint, "c1", "", 1, ())]
    exits = [
        Exit(b.actor_id, b.slot, "killed by signal 9 (SIGKILL)", -9),
        Exit(c.actor_id, c.slot + 1, "an exit of another instance", 1),  # not the slot it is listed on
    ]
    ended = {e.actor.actor_id: (e.cause, code) for e, code in recovery.worker_returning(wid, live, exits)}
    assert ended == {
        b.actor_id: ("killed by signal 9 (SIGKILL)", -9),
        c.actor_id: ("lost while its worker daemon reconnected", 0),
    }
    assert wid not in t.workers and a.actor_id in t.actors  # kept for its registration
    w = t.workers.join(node="n1", node_ip="127.0.0.1", cpus=3, gpus=0, worker_id=wid)
    assert recovery.worker_registered(w, live) == [] and w.held == {a.slot: a.actor_id} and w.cpus_free == 2
