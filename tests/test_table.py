"""ClusterTable, the master's state, without gRPC or processes."""

from __future__ import annotations

import pytest

from actorrt._errors import PlacementError
from actorrt._table import Actor, ClusterTable, Request


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def table_with_worker(cpus: int = 2, gpus: int = 0) -> tuple[ClusterTable, str, Clock]:
    clock = Clock()
    t = ClusterTable(clock)
    w, _ = t.add_worker(node="n1", node_ip="127.0.0.1", cpus=cpus, gpus=gpus)
    t.open_client("c1", "host", 1)
    for slot in range(cpus):
        t.slot_ready(w.worker_id, slot, f"127.0.0.1:{9000 + slot}")
    return t, w.worker_id, clock


def test_places_on_a_ready_slot_and_accounts_resources() -> None:
    t, wid, _ = table_with_worker(cpus=2, gpus=1)
    p = t.request(Request("c1", 1, num_cpus=1, num_gpus=1, class_name="A"))
    assert p is not None and p.worker_id == wid and p.gpu_ids == (0,)
    assert t.workers[wid].cpus_free == 1 and not t.workers[wid].gpus_free
    assert t.actors[p.actor_id].client_id == "c1" and p.actor_id in t.clients["c1"].actors
    assert t.slots() == (1, 2)


def test_queue_is_fifo_and_drains_when_a_slot_frees() -> None:
    t, wid, _ = table_with_worker(cpus=1)
    first = t.request(Request("c1", 1))
    assert first is not None
    assert t.request(Request("c1", 2)) is None and t.request(Request("c1", 3)) is None
    actor, placed = t.actor_exited(first.actor_id)
    assert actor is not None and placed == []  # the slot's host is not warm again yet
    placed = t.slot_ready(wid, first.slot, "127.0.0.1:9100")
    assert [p.request.request_id for p in placed] == [2]
    assert [r.request_id for r in t.queue] == [3]


def test_impossible_resources_are_refused_at_once() -> None:
    t, _, _ = table_with_worker(cpus=2)
    with pytest.raises(PlacementError, match="largest node has cpus=2"):
        t.request(Request("c1", 1, num_cpus=3, class_name="Big"))
    assert not t.queue


def test_requests_wait_while_no_worker_has_joined() -> None:
    t = ClusterTable()
    t.open_client("c1", "h", 1)
    assert t.request(Request("c1", 1)) is None and len(t.queue) == 1
    assert t.cancel_request("c1", 1) and not t.queue and t.placements_failed == 1


def test_release_keeps_resources_until_the_worker_reports_the_exit() -> None:
    t, wid, _ = table_with_worker(cpus=1)
    p = t.request(Request("c1", 1))
    assert p is not None
    assert t.release_actor("someone-else", p.actor_id, "x") is None  # only the owner may
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
    assert {x.actor_id for x in dead} == {a.actor_id, b.actor_id}
    assert not t.actors and not t.workers and not t.clients["c1"].actors


def test_silent_workers_and_lost_clients_expire() -> None:
    t, wid, clock = table_with_worker()
    p = t.request(Request("c1", 1))
    assert p is not None
    clock.now += 5
    assert t.stale_workers(10) == []
    clock.now += 6
    assert t.stale_workers(10) == [wid]
    t.seen(wid)
    assert t.stale_workers(10) == []
    t.client_lost("c1")
    assert t.expired_clients(3) == []
    clock.now += 3
    assert t.expired_clients(3) == ["c1"]
    stopped = t.remove_client("c1")
    assert [a.actor_id for a in stopped] == [p.actor_id] and stopped[0].stopping


def test_a_returning_client_keeps_its_actors() -> None:
    t, _, clock = table_with_worker()
    t.request(Request("c1", 1))
    t.client_lost("c1")
    clock.now += 1
    t.open_client("c1", "host", 1)
    clock.now += 100
    assert t.expired_clients(3) == []


def test_reregistering_worker_rebuilds_its_actors() -> None:
    """A restarted master learns the live actors from the daemon's registration."""
    t = ClusterTable()
    live = Actor("a1", "", slot=1, endpoint="127.0.0.1:9001", client_id="c9", class_name="A", num_cpus=1, gpu_ids=())
    w, stale = t.add_worker(node="n", node_ip="127.0.0.1", cpus=2, gpus=0, worker_id="w-old", live_actors=[live])
    assert not stale
    assert w.worker_id == "w-old" and w.cpus_free == 1 and t.actors["a1"].worker_id == "w-old"
    assert not t.clients["c9"].connected  # its client must come back within the grace period
    t.open_client("c9", "h", 2)
    assert t.clients["c9"].connected and "a1" in t.clients["c9"].actors


def test_spreads_actors_over_nodes() -> None:
    t = ClusterTable()
    t.open_client("c1", "h", 1)
    for n in ("a", "b"):
        w, _ = t.add_worker(node=n, node_ip="127.0.0.1", cpus=2, gpus=0)
        t.slot_ready(w.worker_id, 0, f"{n}:1")
        t.slot_ready(w.worker_id, 1, f"{n}:2")
    nodes = [t.request(Request("c1", i)).node for i in range(2)]  # type: ignore[union-attr]
    assert sorted(nodes) == ["a", "b"]


def test_a_rejoining_worker_must_stop_actors_already_reported_dead() -> None:
    """After a partition the master told the owners their actors died; they stay dead."""
    t = ClusterTable()
    t.record_death("gone", "node lost: no heartbeat for 3s")
    live = [
        Actor("gone", "", slot=0, endpoint="e:1", client_id="c", class_name="A", num_cpus=1, gpu_ids=()),
        Actor("kept", "", slot=1, endpoint="e:2", client_id="c", class_name="A", num_cpus=1, gpu_ids=()),
    ]
    w, stale = t.add_worker(node="n", node_ip="127.0.0.1", cpus=2, gpus=0, worker_id="w1", live_actors=live)
    assert [a.actor_id for a in stale] == ["gone"] and "reported dead" in stale[0].stopping
    assert set(t.actors) == {"kept"} and w.cpus_free == 1
