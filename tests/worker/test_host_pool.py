"""HostPool, the worker daemon's pool of actor hosts, without gRPC or processes."""

from __future__ import annotations

import random
import signal
from collections.abc import Iterator

import pytest

from actorrt.common.errors import SLOT_NOT_READY
from actorrt.v1 import common_pb2
from actorrt.v1 import master_pb2 as pb
from actorrt.worker.host_pool import STOP_GRACE_S, HostPool, HostState, PoolStateError, Signal

_pools: list[HostPool] = []


@pytest.fixture(autouse=True)
def _validate_every_pool() -> Iterator[None]:
    """Every pool a test made must be valid when the test ends (and after each transition)."""
    _pools.clear()
    yield
    for pool in _pools:
        pool.validate()
        assert pool.violation is None


def make_pool(size: int = 2, ready: bool = True) -> HostPool:
    pool = HostPool(size, validate_each=True)
    _pools.append(pool)
    for i in range(size if ready else 0):
        pool.spawned(i, 1000 + i, f"/tmp/slot{i}")
        pool.ready(i, f"127.0.0.1:{9000 + i}")
    return pool


def start(actor_id: str, slot: int = 0, max_memory_mb: int = 0) -> pb.StartActor:
    return pb.StartActor(
        actor_id=actor_id,
        slot=slot,
        client_id="c1",
        class_name="A",
        resources=common_pb2.Resources(num_cpus=1, max_memory_mb=max_memory_mb),
    )


def test_a_host_warms_up_and_the_master_hears_it() -> None:
    pool = make_pool(1, ready=False)
    assert pool.hosts[0].state is HostState.STARTING and pool.started() == 0
    pool.spawned(0, 123, "/tmp/w")
    assert pool.hosts[0].state is HostState.STARTING and pool.hosts[0].pid == 123
    effects = pool.ready(0, "127.0.0.1:9000")
    assert [e.slot_ready for e in effects.events] == [pb.SlotReady(slot=0, endpoint="127.0.0.1:9000")]
    assert pool.hosts[0].state is HostState.READY and pool.started() == 1
    assert pool.ready_events() == effects.events  # what a master we rejoin learns


def test_failed_starts_back_off_and_a_success_resets_the_backoff() -> None:
    pool = make_pool(1, ready=False)
    delays = []
    for _ in range(6):
        pool.spawned(0, 77, "/tmp/w")
        delays.append(pool.start_failed(0))
    assert delays == [0.4, 0.8, 1.6, 3.2, 5.0, 5.0]
    assert pool.hosts[0].failures == 6 and pool.hosts[0].pid == 0 and not pool.hosts[0].workdir
    assert pool.start_failed(0) == 5.0  # no process at all (it could not be spawned)
    pool.spawned(0, 78, "/tmp/w")
    pool.ready(0, "e:1")
    assert pool.hosts[0].failures == 0


def test_assign_makes_a_ready_host_busy() -> None:
    pool = make_pool(2)
    effects = pool.assign(start("a1", slot=1))
    assert not effects.refused and not effects.events
    assert pool.hosts[1].state is HostState.BUSY and pool.host_of("a1") is pool.hosts[1]
    assert [h.index for h in pool.serving()] == [1]
    assert pool.started() == 2  # a busy host counts as started (readiness at startup)
    assert pool.counts()[HostState.READY] == 1 and pool.counts()[HostState.BUSY] == 1
    assert [e.slot_ready.slot for e in pool.ready_events()] == [0]


@pytest.mark.parametrize("why", ["busy", "starting", "exited", "no such host"])
def test_assign_to_a_host_that_is_not_ready_is_refused_with_slot_not_ready(why: str) -> None:
    pool = make_pool(2)
    if why == "busy":
        pool.assign(start("other", slot=0))
    elif why == "starting":
        pool.exited(0, -9)
        pool.reported(0)
        pool.restart(0)
    elif why == "exited":
        pool.exited(0, 1)
    slot = 5 if why == "no such host" else 0
    effects = pool.assign(start("a1", slot=slot))
    assert effects.refused
    assert [e.actor_exited for e in effects.events] == [
        pb.ActorExited(actor_id="a1", slot=slot, cause=SLOT_NOT_READY, exit_code=-1)
    ]
    assert pool.host_of("a1") is None


def test_an_actor_already_hosted_is_not_started_twice() -> None:
    pool = make_pool(2)
    pool.assign(start("a1", slot=0))
    effects = pool.assign(start("a1", slot=1))
    assert effects.refused and not effects.events  # its owner must not hear it died: it runs
    assert pool.hosts[1].state is HostState.READY


def test_stop_signals_term_then_kill_and_keeps_the_first_cause() -> None:
    pool = make_pool(1)
    pool.assign(start("a1"))
    effects = pool.stop("a1", "released by its owner")
    assert effects.signals == [
        Signal(1000, signal.SIGTERM, host=0),
        Signal(1000, signal.SIGKILL, STOP_GRACE_S, host=0),
    ]
    host = pool.hosts[0]
    assert host.state is HostState.STOPPING and host.stop_cause == "stopped: released by its owner"
    again = pool.stop("a1", "")
    assert again.signals and host.stop_cause == "stopped: released by its owner"
    pool.exited(0, -15)
    report = pool.reported(0, own_cause="it raised SystemExit")
    assert report is not None and report.cause == "stopped: released by its owner"  # ours wins
    assert report.event().actor_exited == pb.ActorExited(
        actor_id="a1", slot=0, cause="stopped: released by its owner", exit_code=-15
    )


def test_stop_of_an_unknown_actor_does_nothing() -> None:
    pool = make_pool(1)
    effects = pool.stop("nobody", "x")
    assert effects.refused and not effects.signals and pool.hosts[0].state is HostState.READY
    assert pool.stop("", "x").refused  # a warm host has no actor id to match


def test_memory_over_the_limit_stops_the_actor_and_kills_its_whole_tree() -> None:
    pool = make_pool(1)
    pool.assign(start("a1", max_memory_mb=100))
    assert pool.limits_set()
    assert pool.memory_used(0, 50 * 2**20, (1000,)).signals == []
    effects = pool.memory_used(0, 300 * 2**20, (1000, 1001))
    assert effects.signals == [Signal(1000, signal.SIGKILL), Signal(1001, signal.SIGKILL)]
    host = pool.hosts[0]
    assert host.state is HostState.STOPPING
    assert host.stop_cause == "memory limit exceeded: 300 MB used, max_memory_mb=100 (over the actor's 2 processes)"
    assert pool.memory_used(0, 400 * 2**20, (1000,)).signals == []  # once is enough
    pool.exited(0, -9)
    report = pool.reported(0)
    assert report is not None and report.cause.startswith("memory limit exceeded: 300 MB")


def test_no_limit_means_no_memory_stop() -> None:
    pool = make_pool(1)
    pool.assign(start("a1"))
    assert not pool.limits_set()
    assert pool.memory_used(0, 2**40, (1000,)).signals == [] and pool.hosts[0].state is HostState.BUSY


def test_a_warm_host_that_exits_is_lost_at_once_and_reports_no_actor() -> None:
    pool = make_pool(1)
    effects = pool.exited(0, -9)
    assert [e.slot_lost for e in effects.events] == [pb.SlotLost(slot=0, cause="killed by signal 9 (SIGKILL)")]
    assert pool.hosts[0].state is HostState.EXITED and not pool.ready_events()
    assert pool.reported(0) is None
    assert pool.restart(0) and pool.hosts[0].state is HostState.STARTING and pool.hosts[0].pid == 0


def test_an_actor_that_ends_itself_is_reported_after_its_output_with_its_own_cause() -> None:
    pool = make_pool(1)
    pool.assign(start("a1"))
    assert pool.exited(0, 3).events == []  # not yet: its last lines go first
    host = pool.hosts[0]
    assert host.state is HostState.EXITED and host.actor is not None and host.pid == 1000  # output still routed
    report = pool.reported(0, own_cause="sys.exit(3) in method 'f'")
    assert report is not None and report.cause == "sys.exit(3) in method 'f'" and report.exit_code == 3
    assert host.actor is None and host.pid == 0


def test_exit_causes_from_the_status() -> None:
    pool = make_pool(3)
    for i, code in enumerate((0, 2, -11)):
        pool.assign(start(f"a{i}", slot=i))
        pool.exited(i, code)
    causes = [r.cause for r in (pool.reported(i) for i in range(3)) if r is not None]
    assert causes == ["its owner closed it", "its process exited with code 2", "killed by signal 11 (SIGSEGV)"]


def test_restart_waits_for_the_exit_of_a_warm_host_to_be_reported_too() -> None:
    pool = HostPool(1, validate_each=True)  # not checked at teardown: it keeps the violation
    pool.spawned(0, 1, "/w")
    pool.ready(0, "e:1")
    pool.exited(0, -9)
    with pytest.raises(PoolStateError, match="before its exit was reported"):
        pool.restart(0)


def test_a_closing_pool_starts_no_host_again() -> None:
    pool = make_pool(1)
    pool.close()
    pool.exited(0, 0)
    pool.reported(0)
    assert not pool.restart(0) and pool.hosts[0].state is HostState.EXITED


@pytest.mark.parametrize(
    "bad",
    [
        lambda p: p.ready(0, "e:1"),  # already ready
        lambda p: p.spawned(0, 5, "/w"),  # not starting
        lambda p: p.restart(0),  # it has not exited
        lambda p: p.reported(0),  # it has not exited
        lambda p: (p.exited(0, 0), p.exited(0, 0)),  # twice
    ],
)
def test_transitions_from_the_wrong_state_raise_and_are_kept(bad: object) -> None:
    pool = HostPool(1, validate_each=True)
    pool.spawned(0, 1, "/w")
    pool.ready(0, "e:1")
    with pytest.raises(PoolStateError):
        bad(pool)  # type: ignore[operator]
    assert pool.violation is not None


def test_restart_waits_for_the_actors_exit_report() -> None:
    pool = HostPool(1, validate_each=True)
    pool.spawned(0, 1, "/w")
    pool.ready(0, "e:1")
    pool.assign(start("a1"))
    pool.exited(0, 1)
    with pytest.raises(PoolStateError, match="before its exit was reported"):
        pool.restart(0)


@pytest.mark.parametrize(
    ("corrupt", "message"),
    [
        (lambda p: setattr(p.hosts[0], "endpoint", ""), "has endpoint ''"),
        (lambda p: setattr(p.hosts[0], "actor", start("x")), "hosts an actor"),
        (lambda p: setattr(p.hosts[1], "state", HostState.BUSY), "hosts no actor"),
        (lambda p: setattr(p.hosts[1], "pid", 1000), "pid 1000 on hosts 0 and 1"),
        (lambda p: setattr(p.hosts[1], "stop_cause", "x"), "stop cause"),
        (lambda p: setattr(p.hosts[0], "failures", 2), "keeps 2 failures"),
        (lambda p: setattr(p.hosts[1], "index", 7), "has index 7"),
    ],
)
def test_validate_catches_fields_that_contradict_states(corrupt: object, message: str) -> None:
    pool = HostPool(2)
    for i in range(2):
        pool.spawned(i, 1000 + i, "/w")
        pool.ready(i, f"e:{i}")
    pool.validate()
    corrupt(pool)  # type: ignore[operator]
    with pytest.raises(PoolStateError, match=message):
        pool.validate()


def test_validate_catches_an_actor_on_two_hosts() -> None:
    pool = HostPool(2)
    for i in range(2):
        pool.spawned(i, 1000 + i, "/w")
        pool.ready(i, f"e:{i}")
    pool.assign(start("a1", slot=0))
    pool.assign(start("a2", slot=1))
    pool.hosts[1].actor = start("a1", slot=1)
    with pytest.raises(PoolStateError, match="actor a1 on hosts 0 and 1"):
        pool.validate()


def test_validate_each_turns_a_broken_transition_into_an_error() -> None:
    pool = HostPool(1, validate_each=True)
    pool.hosts[0].endpoint = "stale"  # a bug elsewhere left this behind
    with pytest.raises(PoolStateError, match="has endpoint 'stale'"):
        pool.spawned(0, 1, "/w")
    assert pool.violation is not None
    unchecked = HostPool(1)
    unchecked.hosts[0].endpoint = "stale"
    unchecked.spawned(0, 1, "/w")  # no check unless asked for


def test_a_pool_needs_a_host() -> None:
    with pytest.raises(ValueError, match="at least 1 host"):
        HostPool(0)


@pytest.mark.parametrize("seed", range(5))
def test_random_walks_through_the_daemons_calls_keep_the_pool_valid(seed: int) -> None:
    """What the daemon may call in each state, in random order, with the master's commands
    arriving at any time (placements on hosts that just died, stops of actors long gone)."""
    rng = random.Random(seed)
    pool = HostPool(3, validate_each=True)
    _pools.append(pool)
    pids = iter(range(100, 10**6))
    started: set[str] = set()
    reported: list[str] = []
    for step in range(3000):
        host = rng.choice(pool.hosts)
        i, state = host.index, host.state
        roll = rng.random()
        if roll < 0.15:
            actor_id = f"a{rng.randrange(8)}"
            effects = pool.assign(start(actor_id, slot=rng.randrange(4), max_memory_mb=rng.choice((0, 10))))
            if not effects.refused:
                started.add(actor_id)
        elif roll < 0.25:
            pool.stop(f"a{rng.randrange(8)}", "test")
        elif roll < 0.3 and host.serving:
            pool.memory_used(i, rng.randrange(20) * 2**20, (host.pid,))
        elif state is HostState.STARTING:
            if not host.pid:
                pool.spawned(i, next(pids), f"/w{step}")
            elif rng.random() < 0.2:
                pool.start_failed(i)
            else:
                assert pool.ready(i, f"e:{step}").events[0].slot_ready.slot == i
        elif state in (HostState.READY, HostState.BUSY, HostState.STOPPING) and roll < 0.5:
            pool.exited(i, rng.choice((0, 1, -9, -15)))
        elif state is HostState.EXITED:
            if host.pid:
                had = host.actor
                report = pool.reported(i)
                assert (report is None) == (had is None)
                if report is not None:
                    reported.append(report.actor.actor_id)
            else:
                assert pool.restart(i)
    assert reported and set(reported) <= started
    assert sum(pool.counts().values()) == 3
