"""ClusterTable, the master's state, without gRPC or processes: what keeps its parts in step
(placing, ending and releasing actors, workers and clients leaving) and ``validate()``. Each part
has its own file (test_workers.py, test_placement_queue.py, ...)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from actorrt.common.errors import PlacementError
from actorrt.master.records import Request
from tests.master.tables import table_with_worker, two_nodes

pytestmark = pytest.mark.usefixtures("validate_every_table")


def test_places_on_a_ready_slot_and_accounts_resources() -> None:
    t, wid, _ = table_with_worker(cpus=2, gpus=1)
    p = t.request(Request("c1", 1, num_cpus=1, num_gpus=1, class_name="A"))
    assert p is not None and p.worker_id == wid and p.gpu_ids == (0,)
    assert t.workers[wid].cpus_free == 1 and not t.workers[wid].gpus_free
    assert t.actors[p.actor_id].client_id == "c1" and p.actor_id in t.clients["c1"].actors
    assert t.workers.usage() == (1, 2)


def test_impossible_resources_are_refused_at_once() -> None:
    t, _, _ = table_with_worker(cpus=2)
    with pytest.raises(PlacementError, match="largest node has cpus=2"):
        t.request(Request("c1", 1, num_cpus=3, class_name="Big"))
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


def test_only_a_client_holding_an_actor_may_kill_it() -> None:
    t, _ = two_nodes(cpus=1)
    t.clients.open("c2", "h", 2)
    p = t.request(Request("c1", 1))
    assert p is not None
    assert t.release_actor("c2", p.actor_id, "x") is None
    t.add_ref("c2", p.actor_id)
    assert t.release_actor("c2", p.actor_id, "x") is not None


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
