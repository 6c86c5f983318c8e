"""Workers: the workers, their slots, the free-slot index and the placement policy (pack, spread,
pinned), alone and as the table places through them."""

from __future__ import annotations

import pytest

from actorrt.common.errors import PlacementError
from actorrt.master.records import Actor, Request
from actorrt.master.state import TableInvariantError
from actorrt.master.table import ClusterTable
from actorrt.master.workers import Workers
from tests.master.tables import Clock, big_table, table_with_worker, two_nodes

pytestmark = pytest.mark.usefixtures("validate_every_table")


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


# ---- Workers alone ------------------------------------------------------------------------------


def _actor(actor_id: str, num_cpus: int = 1, num_gpus: int = 0) -> Actor:
    return Actor(actor_id, "", -1, "", "c1", "A", num_cpus, (), num_gpus=num_gpus)


def test_a_slot_goes_ready_held_and_free_and_the_index_follows() -> None:
    """ready -> take (held) -> free; a ready for a held slot is ignored, a lost one leaves the
    index; cpus and gpus are what the actors leave."""
    workers = Workers(Clock())
    w = workers.join(node="n", node_ip="x", cpus=2, gpus=1)
    actors: dict[str, Actor] = {}
    assert not workers.any_ready() and workers.pick(Request("c1", 1)) is None  # no slot ready yet
    assert workers.ready(w.worker_id, 0, "x:0") and workers.ready(w.worker_id, 1, "x:1")
    assert workers.pick(Request("c1", 1, num_gpus=1)) is w
    a = actors["a"] = _actor("a", num_gpus=1)
    workers.take(w, a)
    assert (a.worker_id, a.slot, a.endpoint, a.gpu_ids) == (w.worker_id, 0, "x:0", (0,))
    assert w.cpus_free == 1 and not w.gpus_free and w.held == {0: "a"} and w.ready == {1: "x:1"}
    assert workers.pick(Request("c1", 2, num_gpus=1)) is None  # its only gpu is taken
    workers.validate(actors)
    assert not workers.ready(w.worker_id, 0, "x:0 again")  # held: the actor takes that host
    assert workers.lost(w.worker_id, 1) and not workers.lost(w.worker_id, 1)
    assert not workers.any_ready()
    workers.validate(actors)
    workers.free(actors.pop("a"))
    assert w.cpus_free == 2 and w.gpus_free == {0} and not w.held and not workers.any_ready()
    assert workers.usage() == (0, 2)
    workers.validate(actors)


def test_pick_spreads_to_the_most_free_cpus_packs_onto_the_fewest_and_pins_to_its_node() -> None:
    workers = Workers(Clock())
    big, small = (workers.join(node=n, node_ip="x", cpus=c, gpus=0) for n, c in (("big", 4), ("small", 2)))
    for w in (big, small):
        for slot in range(w.cpus):
            workers.ready(w.worker_id, slot, f"{w.node}:{slot}")
    assert workers.pick(Request("c1", 1, spread=True)) is big
    assert workers.pick(Request("c1", 1)) is small  # pack: the fewest free cpus that fit
    assert workers.pick(Request("c1", 1, num_cpus=3)) is big  # the small one does not fit
    assert workers.pick(Request("c1", 1, num_cpus=5)) is None
    assert workers.pick(Request("c1", 1, node=big.worker_id)) is big
    assert workers.pick(Request("c1", 1, node="nope")) is None
    workers.lost(small.worker_id, 0)
    workers.lost(small.worker_id, 1)
    assert workers.pick(Request("c1", 1, node=small.worker_id)) is None  # pinned: no ready slot there
    workers.validate({})


def test_a_worker_joins_once_and_leaves_the_index_when_it_leaves() -> None:
    workers = Workers(Clock())
    with pytest.raises(ValueError, match="at least 1 cpu"):
        workers.join(node="n", node_ip="x", cpus=0, gpus=0)
    w = workers.join(node="n", node_ip="x", cpus=1, gpus=0, worker_id="w1")
    with pytest.raises(ValueError, match="listed already"):
        workers.join(node="n", node_ip="x", cpus=1, gpus=0, worker_id="w1")
    workers.ready("w1", 0, "x:0")
    assert workers.remove("w1") is w and not w.connected and "w1" not in workers
    assert not workers.any_ready() and workers.remove("w1") is None
    assert workers.join(node="n", node_ip="x", cpus=1, gpus=0, worker_id="w1") is not w
    workers.validate({})


def test_never_fits_says_why_no_worker_ever_could() -> None:
    workers = Workers(Clock())
    assert workers.never_fits(Request("c1", 1, num_cpus=64)) == ""  # no worker yet: one may join
    w = workers.join(node="n", node_ip="x", cpus=2, gpus=0)
    assert workers.never_fits(Request("c1", 1, num_cpus=2)) == ""
    assert "the largest node has cpus=2, gpus=0" in workers.never_fits(Request("c1", 1, num_gpus=1))
    assert f"node {w.worker_id} has cpus=2" in workers.never_fits(Request("c1", 1, num_cpus=3, node=w.worker_id))
    assert "no node 'nope'" in workers.never_fits(Request("c1", 1, node="nope", class_name="Big"))


def test_silence_follows_the_clock_and_a_stall_of_the_master_is_excused() -> None:
    clock = Clock()
    workers = Workers(clock)
    w = workers.join(node="n", node_ip="x", cpus=1, gpus=0)
    clock.now += 5
    assert workers.stale(4) == [w.worker_id] and workers.stale(6) == []
    assert workers.seen(w.worker_id, load=0.5) and w.load == 0.5 and workers.stale(4) == []
    assert not workers.seen("nope")
    clock.now += 5
    workers.excuse(3)
    assert workers.stale(4) == [] and workers.stale(1) == [w.worker_id]


def test_validate_names_a_worker_the_index_does_not_know_as_it_is() -> None:
    workers = Workers(Clock())
    w = workers.join(node="n", node_ip="x", cpus=2, gpus=0)
    workers.ready(w.worker_id, 0, "x:0")
    workers.validate({})
    w.ready[1] = "x:1"  # ready, but not through ``ready``: its key in the index is stale
    with pytest.raises(TableInvariantError, match="indexed under"):
        workers.validate({})
    del w.ready[1]
    with pytest.raises(TableInvariantError, match="does not list it"):
        workers.validate({"a": Actor("a", w.worker_id, 1, "x:1", "c1", "A", 1, ())})


def test_table_a_lost_slot_is_not_placed_on_until_it_is_ready_again() -> None:
    t = ClusterTable()
    w = t.workers.join(node="n1", node_ip="127.0.0.1", cpus=2, gpus=0)
    t.clients.open("c1", "host", 1)
    t.slot_ready(w.worker_id, 0, "127.0.0.1:9000")
    t.slot_ready(w.worker_id, 1, "127.0.0.1:9001")
    assert t.workers.lost(w.worker_id, 0) and not t.workers.lost(w.worker_id, 0)  # the second: not listed
    assert not t.workers.lost("no-such-worker", 1)
    p = t.request(Request("c1", 1))
    assert p is not None and p.slot == 1 and p.endpoint == "127.0.0.1:9001"
    assert t.request(Request("c1", 2)) is None  # one cpu free, but no live host: it waits
    assert t.workers.lost(w.worker_id, 1) is False and len(t.queue) == 1
    placed = t.slot_ready(w.worker_id, 0, "127.0.0.1:9100")  # the respawned host
    assert [(x.request.request_id, x.slot, x.endpoint) for x in placed] == [(2, 0, "127.0.0.1:9100")]
