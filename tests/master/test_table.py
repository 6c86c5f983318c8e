"""ClusterTable, the master's state, without gRPC or processes."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator

import pytest

from actorrt.common.errors import SLOT_NOT_READY, ActorNameTakenError, PlacementError
from actorrt.master.records import Actor, Placement, Request
from actorrt.master.recovery import Recovery
from actorrt.master.restarts import RESTART_BACKOFF_MAX_S, RESTART_BACKOFF_S, RESTART_STABLE_S, restart_delay
from actorrt.master.table import ClusterTable
from actorrt.master.workers import Worker


@pytest.fixture(autouse=True)
def _validate_every_table(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[ClusterTable]]:
    """After each test, every ClusterTable it built must pass ``validate()`` (dask's
    ``validate_state`` idea): a test that leaves the table inconsistent fails here."""
    tables: list[ClusterTable] = []
    init = ClusterTable.__init__

    def tracking_init(self: ClusterTable, *args: object, **kwargs: object) -> None:
        init(self, *args, **kwargs)  # type: ignore[arg-type]
        tables.append(self)

    monkeypatch.setattr(ClusterTable, "__init__", tracking_init)
    yield tables
    for t in tables:
        t.validate()


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def register(
    t: ClusterTable, live: list[Actor], *, node: str, cpus: int, worker_id: str = ""
) -> tuple[Worker, list[Actor]]:
    """A worker registers reporting the ``live`` actors it hosts (as the servicer has it: one
    still listed leaves the table first, ``Recovery.worker_returning``). Returns it and the
    actors it must stop."""
    recovery = Recovery(t, settle_after_s=4.0)
    w = t.workers.join(node=node, node_ip="127.0.0.1", cpus=cpus, gpus=0, worker_id=worker_id)
    return w, recovery.worker_registered(w, live)


def table_with_worker(cpus: int = 2, gpus: int = 0) -> tuple[ClusterTable, str, Clock]:
    clock = Clock()
    t = ClusterTable(clock)
    w = t.workers.join(node="n1", node_ip="127.0.0.1", cpus=cpus, gpus=gpus)
    t.clients.open("c1", "host", 1)
    for slot in range(cpus):
        t.slot_ready(w.worker_id, slot, f"127.0.0.1:{9000 + slot}")
    return t, w.worker_id, clock


def test_places_on_a_ready_slot_and_accounts_resources() -> None:
    t, wid, _ = table_with_worker(cpus=2, gpus=1)
    p = t.request(Request("c1", 1, num_cpus=1, num_gpus=1, class_name="A"))
    assert p is not None and p.worker_id == wid and p.gpu_ids == (0,)
    assert t.workers[wid].cpus_free == 1 and not t.workers[wid].gpus_free
    assert t.actors[p.actor_id].client_id == "c1" and p.actor_id in t.clients["c1"].actors
    assert t.workers.usage() == (1, 2)


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


def test_impossible_resources_are_refused_at_once() -> None:
    t, _, _ = table_with_worker(cpus=2)
    with pytest.raises(PlacementError, match="largest node has cpus=2"):
        t.request(Request("c1", 1, num_cpus=3, class_name="Big"))
    assert not t.queue


def test_requests_wait_while_no_worker_has_joined() -> None:
    t = ClusterTable()
    t.clients.open("c1", "h", 1)
    assert t.request(Request("c1", 1)) is None and len(t.queue) == 1
    t.remove_client("c1")  # a client that leaves takes its waiting requests along
    assert not t.queue


def test_release_keeps_resources_until_the_worker_reports_the_exit() -> None:
    t, wid, _ = table_with_worker(cpus=1)
    p = t.request(Request("c1", 1))
    assert p is not None
    assert t.release_actor("someone-else", p.actor_id, "x") is None  # only a client holding it may
    actor = t.release_actor("c1", p.actor_id, "killed")
    assert actor is not None and actor.stopping == "killed"
    assert t.workers[wid].cpus_free == 0
    t.actor_exited(p.actor_id)
    assert t.workers[wid].cpus_free == 1 and not t.actors


def test_removing_a_worker_returns_its_actors() -> None:
    t, wid, _ = table_with_worker(cpus=2)
    a = t.request(Request("c1", 1))
    b = t.request(Request("c1", 2))
    assert a and b
    dead = t.remove_worker(wid)
    assert {x.actor.actor_id for x in dead} == {a.actor_id, b.actor_id}
    assert not any(x.restarting for x in dead)
    assert not t.actors and not t.workers and not t.clients["c1"].actors


def test_silent_workers_and_lost_clients_expire() -> None:
    t, wid, clock = table_with_worker()
    p = t.request(Request("c1", 1))
    assert p is not None
    clock.now += 5
    assert t.workers.stale(10) == []
    clock.now += 6
    assert t.workers.stale(10) == [wid]
    t.seen(wid)
    assert t.workers.stale(10) == []
    t.client_lost("c1")
    assert t.clients.expired(3) == []
    clock.now += 3
    assert t.clients.expired(3) == ["c1"]
    stopped = t.remove_client("c1")
    assert [a.actor_id for a in stopped] == [p.actor_id] and stopped[0].stopping


def test_time_the_master_did_not_run_is_not_counted_as_silence() -> None:
    """``excuse``: a stall of the master's own is added to every worker's last heartbeat and
    every lost client's grace, never past now; silence before and after it still counts."""
    t, wid, clock = table_with_worker()
    t.client_lost("c1")
    clock.now += 8  # 3 s of silence, then the master stalls 5 s
    t.excuse(5)
    assert t.workers.stale(3.5) == [] and t.clients.expired(3.5) == []
    assert t.workers.stale(2.5) == [wid] and t.clients.expired(2.5) == ["c1"]
    t.excuse(100)  # longer than the silence: last seen now, not in the future
    assert t.workers[wid].last_seen == clock.now and t.clients["c1"].lost_at == clock.now
    clock.now += 11
    assert t.workers.stale(10) == [wid] and t.clients.expired(10) == ["c1"]


def test_a_returning_client_keeps_its_actors() -> None:
    t, _, clock = table_with_worker()
    t.request(Request("c1", 1))
    t.client_lost("c1")
    clock.now += 1
    t.clients.open("c1", "host", 1)
    clock.now += 100
    assert t.clients.expired(3) == []


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


def two_nodes(cpus: int = 2) -> tuple[ClusterTable, dict[str, str]]:
    t = ClusterTable()
    t.clients.open("c1", "h", 1)
    ids = {}
    for n in ("a", "b"):
        w = t.workers.join(node=n, node_ip="127.0.0.1", cpus=cpus, gpus=0)
        ids[n] = w.worker_id
        for slot in range(cpus):
            t.slot_ready(w.worker_id, slot, f"{n}:{slot}")
    return t, ids


def test_spread_places_on_the_node_with_most_free_cpus() -> None:
    t, _ = two_nodes()
    nodes = [t.request(Request("c1", i, spread=True)).node for i in range(2)]  # type: ignore[union-attr]
    assert sorted(nodes) == ["a", "b"]
    t.validate()


def test_the_default_packs_onto_the_fullest_node_that_fits() -> None:
    t, _ = two_nodes()
    nodes = [t.request(Request("c1", i)).node for i in range(2)]  # type: ignore[union-attr]
    assert nodes[0] == nodes[1]  # the second goes where the first already is
    third = t.request(Request("c1", 3))
    assert third is not None and third.node != nodes[0]
    t.validate()


def test_a_pinned_request_goes_to_its_node_only_and_waits_for_it() -> None:
    t, ids = two_nodes(cpus=1)
    p = t.request(Request("c1", 1, node=ids["b"]))
    assert p is not None and p.node == "b"
    assert t.request(Request("c1", 2, node=ids["b"])) is None  # b is full; a is free but not b
    assert len(t.queue) == 1
    t.validate()
    with pytest.raises(PlacementError, match="no node 'nope'"):
        t.request(Request("c1", 3, node="nope"))


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
    assert [r.actor.actor_id for r in t.take_released()] == [p.actor_id]
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
    assert list(t.refs.voided_of(x.actor_id)) == ["c1.2"]
    t.validate()
    t.drop_ref("c1", x.actor_id)
    assert not t.take_released()  # c1.3 is on its way still
    t.remove_client("c1")  # ... and its sender left: void too, its late claim ignored
    assert [r.actor.actor_id for r in t.take_released()] == [x.actor_id]
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
    assert [r.actor.actor_id for r in t.take_released()] == [x.actor_id]
    t.validate()


def test_a_detached_actor_outlives_its_creator_and_holders() -> None:
    t, _ = two_nodes(cpus=1)
    p = t.request(Request("c1", 1, name="ps", detached=True))
    assert p is not None
    t.drop_ref("c1", p.actor_id)
    assert t.remove_client("c1") == [] and not t.take_released()
    assert t.actors[p.actor_id].client_id == "" and t.names["ps"] == p.actor_id
    t.validate()


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


def ids_of(t: ClusterTable, p: Placement) -> str:
    return t.actors[p.actor_id].worker_id


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
    assert [r.actor.actor_id for r in t.take_released()] == ["a2"] and "a2" not in t.actors  # it had no process
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
    assert [r.actor.actor_id for r in t.take_released()] == [p.actor_id]
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
    assert [r.actor.actor_id for r in t.take_released()] == [b.actor_id] and not t.queue
    t.validate()


def test_only_a_client_holding_an_actor_may_kill_it() -> None:
    t, _ = two_nodes(cpus=1)
    t.clients.open("c2", "h", 2)
    p = t.request(Request("c1", 1))
    assert p is not None
    assert t.release_actor("c2", p.actor_id, "x") is None
    t.add_ref("c2", p.actor_id)
    assert t.release_actor("c2", p.actor_id, "x") is not None


def test_a_rejoining_worker_must_stop_actors_already_reported_dead() -> None:
    """After a partition the master told the owners their actors died; they stay dead."""
    t = ClusterTable()
    gone = Actor("gone", "w1", slot=0, endpoint="e:1", client_id="c", class_name="A", num_cpus=1, gpu_ids=())
    t.record_death(gone, "node lost: no heartbeat for 3s", node="n")
    live = [
        Actor("gone", "", slot=0, endpoint="e:1", client_id="c", class_name="A", num_cpus=1, gpu_ids=()),
        Actor("kept", "", slot=1, endpoint="e:2", client_id="c", class_name="A", num_cpus=1, gpu_ids=()),
    ]
    w, stale = register(t, live, node="n", cpus=2, worker_id="w1")
    assert [a.actor_id for a in stale] == ["gone"] and "reported dead" in stale[0].stopping
    assert set(t.actors) == {"kept"} and w.cpus_free == 1


# ---- scale: the free-slot index, deadlines, recent deaths, validate() ---------------------------


def big_table(nodes: int, slots: int) -> tuple[ClusterTable, Clock]:
    clock = Clock()
    t = ClusterTable(clock)
    t.clients.open("c1", "h", 1)
    for n in range(nodes):
        w = t.workers.join(node=f"n{n}", node_ip="10.0.0.1", cpus=slots, gpus=0)
        for s in range(slots):
            t.slot_ready(w.worker_id, s, f"10.0.{n}.1:{9000 + s}")
    return t, clock


def test_placement_spreads_and_uses_every_slot_once_at_scale() -> None:
    """2,000 nodes x 4 slots: each spread placement takes the node with the most free cpus, so the
    first 2,000 actors land on 2,000 different nodes, and all 8,000 slots fill exactly once."""
    t, _ = big_table(2000, 4)
    placed = [t.request(Request("c1", i, spread=True)) for i in range(8000)]
    assert all(p is not None for p in placed)
    assert len({p.node for p in placed[:2000]}) == 2000  # type: ignore[union-attr]
    assert len({(p.worker_id, p.slot) for p in placed}) == 8000  # type: ignore[union-attr]
    assert t.request(Request("c1", 8000)) is None and len(t.queue) == 1
    t.validate()


def test_packing_fills_each_node_before_the_next_at_scale() -> None:
    t, _ = big_table(2000, 4)
    placed = [t.request(Request("c1", i)) for i in range(8000)]
    assert all(p is not None for p in placed)
    assert len({p.node for p in placed[:4]}) == 1  # type: ignore[union-attr]
    assert len({(p.worker_id, p.slot) for p in placed}) == 8000  # type: ignore[union-attr]
    t.validate()


def test_a_freed_slot_is_found_again_through_the_index() -> None:
    t, _ = big_table(50, 2)
    placed = [t.request(Request("c1", i)) for i in range(100)]
    assert t.request(Request("c1", 100)) is None
    victim = placed[37]
    assert victim is not None
    t.actor_exited(victim.actor_id)
    t.validate()
    assert t.queue  # the slot's host is not warm again yet
    [p] = t.slot_ready(victim.worker_id, victim.slot, "new:1")
    assert (p.worker_id, p.slot, p.request.request_id) == (victim.worker_id, victim.slot, 100)
    assert not t.queue
    t.validate()


def test_gpu_requests_skip_nodes_without_free_gpus() -> None:
    t = ClusterTable()
    t.clients.open("c1", "h", 1)
    cpu_only = t.workers.join(node="cpu", node_ip="x", cpus=8, gpus=0)
    gpu = t.workers.join(node="gpu", node_ip="x", cpus=2, gpus=1)
    for w in (cpu_only, gpu):
        for s in range(w.cpus):
            t.slot_ready(w.worker_id, s, f"{w.node}:{s}")
    p = t.request(Request("c1", 1, num_gpus=1))
    assert p is not None and p.node == "gpu" and p.gpu_ids == (0,)
    assert t.request(Request("c1", 2, num_gpus=1)) is None  # its only gpu is taken
    t.validate()


def test_a_slot_ready_for_a_slot_an_actor_holds_is_ignored() -> None:
    """A worker may announce a fresh warm host before it reads the StartActor for that slot:
    the actor takes the host, so the slot must not be placed twice."""
    t, wid, _ = table_with_worker(cpus=1)
    p = t.request(Request("c1", 1))
    assert p is not None
    assert t.slot_ready(wid, p.slot, "fresh:1") == []
    assert not t.workers[wid].ready and t.request(Request("c1", 2)) is None
    t.validate()


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


def test_recent_deaths_are_kept_in_the_table_and_bounded() -> None:
    t = ClusterTable(dead_kept=3)
    for i in range(5):
        a = Actor(f"a{i}", "w", slot=0, endpoint="", client_id="c", class_name="A", num_cpus=1, gpu_ids=())
        t.record_death(a, f"cause {i}", node="n")
    assert list(t.dead) == ["a2", "a3", "a4"] and t.dead["a4"].cause == "cause 4" and t.dead["a4"].node == "n"


def test_validate_names_what_is_broken() -> None:
    from actorrt.master.state import TableInvariantError

    t, wid, _ = table_with_worker(cpus=2)
    p = t.request(Request("c1", 1))
    assert p is not None
    t.validate()
    t.workers[wid].cpus_free += 1
    with pytest.raises(TableInvariantError, match="cpus_free"):
        t.validate()
    t.workers[wid].cpus_free -= 1
    t.workers[wid].ready[p.slot] = "x:1"
    with pytest.raises(TableInvariantError, match="counted twice"):
        t.validate()
    del t.workers[wid].ready[p.slot]
    t.workers[wid].ready[5] = "x:5"  # ready, but not in the index
    with pytest.raises(TableInvariantError, match="indexed under"):
        t.validate()
    del t.workers[wid].ready[5]
    t.clients["c1"].actors.clear()
    with pytest.raises(TableInvariantError, match="does not list it"):
        t.validate()
    t.clients["c1"].actors.add(p.actor_id)
    t.validate()


def test_actors_of_a_removed_client_are_valid_while_they_stop() -> None:
    t, _, _ = table_with_worker(cpus=1)
    p = t.request(Request("c1", 1))
    assert p is not None
    assert [a.actor_id for a in t.remove_client("c1")] == [p.actor_id]
    t.validate()  # its client is gone, but it is stopping
    t.actor_exited(p.actor_id)
    t.validate()


def test_a_validating_master_ends_loudly_on_a_broken_invariant() -> None:
    """With ACTORRT_VALIDATE=1 (the whole test session sets it) a master whose table breaks an
    invariant logs it and exits with status 70: a real process, no test could miss it."""
    script = (
        "import logging; logging.basicConfig()\n"
        "from actorrt.master.servicer import MasterServicer\n"
        "from actorrt.master.table import ClusterTable\n"
        "t = ClusterTable()\n"
        "w = t.workers.join(node='n', node_ip='x', cpus=2, gpus=0)\n"
        "servicer = MasterServicer(t)\n"
        "servicer.check()\n"
        "w.cpus_free = 5\n"
        "servicer.check()\n"
        "print('not reached')\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=60,
        env=dict(os.environ, ACTORRT_VALIDATE="1"),
        check=False,
    )
    assert proc.returncode == 70, proc.stderr
    assert "invariant broken" in proc.stderr and "cpus_free=5" in proc.stderr
    assert "not reached" not in proc.stdout


def test_a_withdrawn_request_leaves_the_queue_and_frees_its_name() -> None:
    t, _ = two_nodes(cpus=1)
    t.request(Request("c1", 1))
    t.request(Request("c1", 2))
    assert t.request(Request("c1", 3, name="late")) is None
    assert t.withdraw("c1", 3) and not t.queue and "late" not in t.names
    assert not t.withdraw("c1", 3)  # already gone
    t.validate()
