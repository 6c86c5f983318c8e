"""Workers: the workers, their slots, the free-slot index and the placement policy (pack, spread,
pinned), alone and as the table places through them."""

from __future__ import annotations

import pytest

from actorrt.common.errors import PlacementError
from actorrt.master.records import Request
from actorrt.master.table import ClusterTable
from tests.master.tables import big_table, table_with_worker, two_nodes

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
