"""Deaths: the bounded list of actors already reported dead; alone and as a rejoining worker meets it."""

from __future__ import annotations

import pytest

from actorrt.master.deaths import DeadActor, Deaths
from actorrt.master.records import Actor
from actorrt.master.state import TableInvariantError
from actorrt.master.table import ClusterTable
from tests.master.tables import register

pytestmark = pytest.mark.usefixtures("validate_every_table")


def test_recent_deaths_are_kept_in_the_table_and_bounded() -> None:
    t = ClusterTable(dead_kept=3)
    for i in range(5):
        a = Actor(f"a{i}", "w", slot=0, endpoint="", client_id="c", class_name="A", num_cpus=1, gpu_ids=())
        t.record_death(a, f"cause {i}", node="n")
    assert list(t.dead) == ["a2", "a3", "a4"] and t.dead["a4"].cause == "cause 4" and t.dead["a4"].node == "n"


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


# ---- Deaths alone -------------------------------------------------------------------------------


def test_a_death_reported_again_is_the_newest_and_the_oldest_are_forgotten() -> None:
    dead = Deaths(kept=3)
    for i in range(3):
        dead.remember(DeadActor(f"a{i}", "A", "w", "n", f"cause {i}"))
    dead.remember(DeadActor("a0", "A", "w", "n", "cause again"))
    assert list(dead) == ["a1", "a2", "a0"] and list(reversed(dead)) == ["a0", "a2", "a1"]
    lost = dead.lost("a9", "gone while the master was down")
    assert lost.cause == "gone while the master was down" and lost.class_name == "" and "a1" not in dead
    assert list(dead) == ["a2", "a0", "a9"] and dead.get("a0") == DeadActor("a0", "A", "w", "n", "cause again")
    dead.validate()
    dead.kept = 2
    with pytest.raises(TableInvariantError, match="3 dead actors kept, the bound is 2"):
        dead.validate()
