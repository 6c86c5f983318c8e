"""``actorrt.compat.parl``: PARL programs on a real cluster (a master and worker daemons, each its
own process), with PARL's semantics: calls, attributes as the remote object's ``__dict__`` has
them, futures, PARL's errors, ``distributed_files``, ``max_memory``, release on collection,
workers joining and leaving, and clients in forked processes."""

from __future__ import annotations

import gc
import math
import multiprocessing
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import numpy as np
import pytest

import actorrt
import actorrt.compat.parl as parl
from actorrt.compat.parl import exceptions
from tests.conftest import ProcCluster, wait_until

ROOT = Path(__file__).resolve().parents[2]


@parl.remote_class
class Actor:
    LIMIT = 100  # a class constant

    def __init__(self, arg1: int = 0, arg2: str = "") -> None:
        self.arg1 = arg1
        self.arg2 = arg2
        self.arg3 = 5  # type: ignore[method-assign,assignment]  # shadows the method arg3: PARL reads this

    def arg3(self) -> str:
        return "the method"

    def add_one(self, value: int) -> int:
        return value + 1

    def set_later(self, value: Any) -> None:
        self.later = value

    def shadow_add_one(self) -> None:
        self.add_one = "now an attribute"  # type: ignore[method-assign,assignment]

    @property
    def doubled(self) -> int:
        return 2 * self.arg1

    def raise_value_error(self, text: str) -> None:
        raise ValueError(text)

    def raise_attribute_error(self) -> None:
        return self.not_there  # type: ignore[attr-defined]

    def give_lock(self) -> threading.Lock:
        return threading.Lock()

    def echo(self, value: Any) -> Any:
        return value

    def sleep(self, seconds: float) -> float:
        time.sleep(seconds)
        return seconds

    def pid(self) -> int:
        return os.getpid()

    def daemon_pid(self) -> int:
        """The worker daemon: the parent, or the parent of the fork server that forked us."""
        parent = os.getppid()
        if Path(f"/proc/{parent}/comm").read_text().strip() == "actorrt-forksrv":
            return int(Path(f"/proc/{parent}/stat").read_text().rsplit(")", 1)[1].split()[1])
        return parent

    def tree(self) -> dict[str, str]:
        """The working folder, as path -> file text (or '<dir>')."""
        out = {}
        for folder, dirs, files in os.walk("."):
            for d in dirs:
                out[os.path.relpath(os.path.join(folder, d))] = "<dir>"
            for f in files:
                out[os.path.relpath(os.path.join(folder, f))] = Path(folder, f).read_text()
        return out


@parl.remote_class(wait=False)
class FutureActor:
    def __init__(self, start: int = 0) -> None:
        self.count = start

    def add(self, k: int) -> int:
        self.count += k
        return self.count

    def sleep(self, seconds: float) -> float:
        time.sleep(seconds)
        return seconds

    def fail(self) -> None:
        raise RuntimeError("future call failed")


@parl.remote_class(wait=False)
class BrokenInit:
    def __init__(self) -> None:
        raise KeyError("no such config")

    def ping(self) -> str:
        return "pong"


@parl.remote_class
class Exploding:
    def __init__(self) -> None:
        raise RuntimeError("constructor exploded")


@parl.remote_class(n_gpu=1)
class NeedsGpu:
    def ping(self) -> str:
        return "pong"

    def devices(self) -> str:
        return os.environ.get("CUDA_VISIBLE_DEVICES", "unset")


@parl.remote_class(max_memory=100)
class Grower:
    def grow(self, mb: int) -> int:
        self.blobs = [*getattr(self, "blobs", []), np.ones(mb * 2**20, dtype=np.uint8)]
        return len(self.blobs)

    def ping(self) -> str:
        return "pong"


class _Env:
    def reset(self) -> int:
        return 0

    def step(self, action: int) -> int:
        return action + 1


@parl.remote_class
class Forwarding:
    """Forwards what it does not define to its env, as an old ``gym.Wrapper`` does."""

    def __init__(self) -> None:
        self.env = _Env()

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or name == "env":
            raise AttributeError(name)
        return getattr(self.env, name)


@parl.remote_class
class OwnsActorId:
    """Defines a method named as the runtime's handles name their actor's id."""

    def actor_id(self) -> str:
        return "the user's"


@parl.remote_class
class Outer:
    def make_inner(self) -> tuple[bool, int]:
        """A remote class used inside a remote object is a plain local one there (as in PARL)."""
        inner = Actor(3)
        return isinstance(inner, parl.RemoteProxy), inner.add_one(inner.arg1)


@parl.remote_class(wait=False)
class FailingProperty:
    @property
    def broken(self) -> int:
        raise ValueError("cannot read it")


def _explode() -> None:
    raise ValueError("cannot be rebuilt in the actor")


class ArrivesBroken:
    """Pickles fine; unpickling it (in the actor) raises."""

    def __reduce__(self) -> tuple[Any, tuple[()]]:
        return _explode, ()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ProcCluster]:
    c = ProcCluster(tmp_path_factory.mktemp("actorrt-home")).start(workers=2, cpus_per_worker=2)
    try:
        yield c
    finally:
        c.stop()


@pytest.fixture(autouse=True)
def _parl_token(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """PARL programs pass no token: they get it from ACTORRT_TOKEN. Every test ends disconnected."""
    if "cluster" in request.fixturenames:
        monkeypatch.setenv("ACTORRT_TOKEN", request.getfixturevalue("cluster").token)
    yield
    parl.disconnect()


def _live_actors(cluster: ProcCluster) -> int:
    return len(cluster.status()["actors"])


# ---- connect -----------------------------------------------------------------------------------


def test_connect_is_process_wide_and_once(cluster: ProcCluster) -> None:
    with pytest.raises(AssertionError, match=r"parl\.connect"):
        parl.get_global_client()
    with pytest.raises(AssertionError, match=r"parl\.connect"):
        Actor()
    parl.connect(cluster.address)
    client = parl.get_global_client()
    assert client.master_address == cluster.address and client.actor_num.value == 0
    parl.connect("127.0.0.1:1")  # a second connect does nothing, as PARL's
    assert parl.get_global_client() is client
    actor = Actor(1)
    assert client.actor_num.value == 1
    parl.disconnect()
    with pytest.raises(exceptions.RemoteError, match=r"parl\.disconnect"):
        actor.add_one(1)
    assert wait_until(lambda: _live_actors(cluster) == 0, 10)  # the client's objects stopped with it
    parl.connect(cluster.address)
    assert parl.get_global_client() is not client and Actor(2).add_one(2) == 3


# ---- calls and attributes ----------------------------------------------------------------------


def test_calls_and_attributes_as_the_remote_object_has_them(cluster: ProcCluster) -> None:
    parl.connect(cluster.address)
    actor = Actor(10, arg2="two")
    assert actor.add_one(1) == 2
    assert actor.arg1 == 10 and actor.arg2 == "two" and actor.doubled == 20 and actor.LIMIT == 100
    assert actor.arg3 == 5  # an instance attribute that shadows a method reads as its value
    actor.arg1 = 21  # a write goes remote
    assert actor.arg1 == 21 and actor.doubled == 42
    actor.new_name = [1, 2]  # type: ignore[attr-defined]  # a new attribute, set from here
    assert actor.new_name == [1, 2]  # type: ignore[attr-defined]
    actor.set_later({"k": 1})  # an attribute a method adds is read as one at once
    assert actor.later == {"k": 1}
    actor.shadow_add_one()  # a method shadowed after construction: read as the value now
    assert actor.add_one == "now an attribute"
    assert {"arg1", "arg2", "arg3", "later", "LIMIT", "doubled"} <= set(dir(actor))
    assert "Actor" in repr(actor) and "live" in repr(actor)
    with pytest.raises(AttributeError, match="reserved"):
        actor._xparl_mine = 1  # type: ignore[attr-defined]
    with pytest.raises(ValueError, match="reserved"):
        Actor(_xparl_x=1)  # type: ignore[call-arg]


def test_objects_are_independent_and_calls_go_to_their_own(cluster: ProcCluster) -> None:
    parl.connect(cluster.address)
    actors = [Actor(i) for i in range(3)]
    assert [a.arg1 for a in actors] == [0, 1, 2]
    assert len({a.pid() for a in actors}) == 3  # each its own process
    assert parl.get_global_client().actor_num.value == 3


# ---- futures -----------------------------------------------------------------------------------


def test_wait_false_returns_future_objects(cluster: ProcCluster) -> None:
    parl.connect(cluster.address)
    actor: Any = FutureActor(5)  # wait=False: its methods return FutureObjects (mypy cannot tell)
    futures = [actor.add(1) for _ in range(50)]  # sent now, run in order
    assert all(isinstance(f, parl.FutureObject) for f in futures)
    assert [f.get() for f in futures] == list(range(6, 56))
    assert actor.count == 55  # attribute reads wait and return the value
    actor.label = "set in the background"  # a write does not wait; a read after it sees it
    assert actor.label == "set in the background"
    with pytest.raises(exceptions.FutureGetRepeatedlyError):
        futures[0].get()

    slow = actor.sleep(1.0)
    assert slow.empty()
    with pytest.raises(exceptions.FutureObjectEmpty):
        slow.get_nowait()
    with pytest.raises(exceptions.FutureObjectEmpty):
        slow.get(timeout=0.05)
    assert slow.get(timeout=20) == 1.0 and not slow.empty()
    with pytest.raises(ValueError, match="timeout must be > 0"):
        actor.add(0).get(timeout=0)

    # Objects work in parallel: two 1 s sleeps on two objects take about 1 s, not 2.
    other: Any = FutureActor()
    started = time.monotonic()
    pair = [actor.sleep(1.0), other.sleep(1.0)]
    assert [f.get() for f in pair] == [1.0, 1.0]
    assert time.monotonic() - started < 1.8


def test_a_failed_future_call_resets_the_object(cluster: ProcCluster) -> None:
    parl.connect(cluster.address)
    actor: Any = FutureActor()
    failing = actor.fail()
    with pytest.raises(exceptions.FutureFunctionError) as info:
        failing.get()
    cause = info.value.__cause__
    assert isinstance(cause, exceptions.RemoteError) and "future call failed" in str(cause)
    with pytest.raises(exceptions.FutureFunctionError, match="`fail`"):
        actor.add(1)  # reset, as PARL resets it: later uses raise again
    assert wait_until(lambda: _live_actors(cluster) == 0, 10)

    broken = BrokenInit()  # construction runs in the background; its error shows at first use
    with pytest.raises(exceptions.FutureFunctionError, match="__init__") as init:
        broken.ping()
    assert "no such config" in str(init.value.__cause__)


# ---- errors ------------------------------------------------------------------------------------


def test_parl_errors(cluster: ProcCluster) -> None:
    parl.connect(cluster.address)
    actor = Actor()
    with pytest.raises(exceptions.RemoteError) as raised:
        actor.raise_value_error("bad input 42")
    text = str(raised.value)
    assert "bad input 42" in text and "raise_value_error" in text and "traceback" in text
    assert isinstance(raised.value.__cause__, actorrt.RemoteError)
    with pytest.raises(exceptions.RemoteError, match="was reset after `raise_value_error` failed"):
        actor.add_one(1)
    assert wait_until(lambda: _live_actors(cluster) == 0, 10)  # its job was reset: the actor is gone

    with pytest.raises(exceptions.RemoteAttributeError, match="not_there"):
        Actor().raise_attribute_error()
    with pytest.raises(exceptions.RemoteAttributeError, match="no_such_method"):
        Actor().no_such_method(1)  # type: ignore[attr-defined]
    with pytest.raises(exceptions.RemoteSerializeError, match="could not be pickled"):
        Actor().give_lock()
    with pytest.raises(exceptions.RemoteDeserializeError, match="could not be unpickled"):
        Actor().echo(ArrivesBroken())
    assert issubclass(exceptions.RemoteSerializeError, exceptions.RemoteError)

    alive = Actor()
    with pytest.raises(actorrt.SerializationError, match="argument 0"):
        alive.echo(threading.Lock())  # cannot be pickled here: nothing sent, the object lives on
    assert alive.add_one(1) == 2

    with pytest.raises(exceptions.RemoteError, match="constructor exploded") as init:
        Exploding()
    assert "__init__" in str(init.value)
    with pytest.raises(exceptions.ResourceError, match="num_gpus=1"):
        NeedsGpu()
    assert parl.get_global_client().actor_num.value == 1  # the live one only


def test_what_parl_programs_do_that_a_handle_would_not(cluster: ProcCluster) -> None:
    parl.connect(cluster.address)
    # a method named like the runtime handle's own actor_id is the user's
    assert OwnsActorId().actor_id() == "the user's"
    unwrapped = cast(Any, OwnsActorId).__wrapped__
    assert cast(Any, parl.remote_class(wait=False)(unwrapped))().actor_id().get() == "the user's"
    # a class that forwards through __getattr__: names it does not define are sent as calls
    forwarding = Forwarding()
    assert (forwarding.reset(), forwarding.step(4)) == (0, 5)
    with pytest.raises(exceptions.RemoteAttributeError, match="no_such_method"):
        forwarding.no_such_method()  # the remote __getattr__ decides, as in PARL
    # a remote class made inside a remote object is local there
    assert Outer().make_inner() == (False, 4)
    # wait=False: an attribute read that fails is a FutureFunctionError, as PARL's read through a future
    with pytest.raises(exceptions.FutureFunctionError) as read:
        _ = FailingProperty().broken
    assert isinstance(read.value.__cause__, exceptions.RemoteError) and "cannot read it" in str(read.value.__cause__)
    # constructor arguments that cannot be pickled: PARL's RemoteSerializeError for __init__
    with pytest.raises(exceptions.RemoteSerializeError, match="__init__") as init:
        Actor(cast(Any, threading.Lock()))
    assert "cannot be pickled" in str(init.value)
    assert wait_until(lambda: _live_actors(cluster) == 0, 10)
    assert parl.get_global_client().actor_num.value == 0


# ---- files -------------------------------------------------------------------------------------


def test_distributed_files_ship_folders_and_globs(
    cluster: ProcCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "data" / "sub").mkdir(parents=True)
    (tmp_path / "data" / "empty").mkdir()
    (tmp_path / "data" / "sub" / "deep.txt").write_text("deep")
    (tmp_path / "data" / "top.txt").write_text("top")
    for name in ("a", "b"):
        (tmp_path / f"conf_{name}.yaml").write_text(f"name: {name}")
    (tmp_path / "left_out.txt").write_text("not shipped")
    monkeypatch.chdir(tmp_path)
    parl.connect(cluster.address, distributed_files=["data", "conf_*.yaml"])
    tree = Actor().tree()
    assert tree == {
        "data": "<dir>",
        "data/empty": "<dir>",
        "data/sub": "<dir>",
        "data/sub/deep.txt": "deep",
        "data/top.txt": "top",
        "conf_a.yaml": "name: a",
        "conf_b.yaml": "name: b",
    }


def test_distributed_files_that_match_nothing_say_so(cluster: ProcCluster, tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="no_such_file"):
        parl.connect(cluster.address, distributed_files=[str(tmp_path / "no_such_file*")])


# ---- memory ------------------------------------------------------------------------------------


def test_max_memory_counts_growth_as_parl_does(cluster: ProcCluster) -> None:
    parl.connect(cluster.address)
    grower = Grower()
    baseline_mb = parl.get_global_client().backend.baseline_bytes() / 2**20
    print(f"\nbaseline {baseline_mb:.1f} MiB")
    # A warm host: an interpreter with grpc, numpy and actorrt loaded; its proportional share
    # (most pages are shared with the fork server and the other warm hosts).
    assert 5 < baseline_mb < 500
    limit = next(a for a in cluster.status()["actors"])["resources"]["max_memory_mb"]
    assert int(limit) == int(np.ceil(baseline_mb + 100))
    # 60 MB of growth: under PARL's max_memory=100 (though over 100 MB in all): it lives.
    assert grower.grow(60) == 1
    time.sleep(1.0)  # the daemon measures every 0.2 s
    assert grower.ping() == "pong"
    # 150 MB more: past it. The daemon stops it (while it grows, or just after): the call, or
    # the next one, says why.
    with pytest.raises(exceptions.RemoteError, match=r"memory limit exceeded: \d+ MB used, max_memory_mb=") as info:
        grower.grow(150)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            grower.ping()
            time.sleep(0.1)
    assert isinstance(info.value.__cause__, actorrt.ActorDiedError)
    with pytest.raises(exceptions.RemoteError, match="reset"):
        grower.ping()


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf, 1e300, 10**400])
def test_a_memory_limit_that_cannot_be_is_refused_at_decoration(cluster: ProcCluster, bad: float) -> None:
    """``max_memory=nan``, ``inf`` or ``1e300`` passed the decorator (only ``<= 0`` was refused)
    and every creation of the class failed with a raw ``ValueError: cannot convert float NaN
    to integer``, ``OverflowError`` or protobuf's "Value out of range". Refused where the class
    is decorated, naming the bound; actorrt's own ``max_memory_mb`` the same way, and a limit
    within the bound still creates the object."""
    with pytest.raises(ValueError, match=r"max_memory must be a finite number of MB in \(0, 1073741824\]"):
        parl.remote_class(max_memory=bad)(_Env)
    as_given: Any = bad  # what a caller may pass, whatever the hint says
    with pytest.raises(ValueError, match=r"max_memory_mb must be an int in 1\.\.1073741824 or None"):
        actorrt.remote_class(max_memory_mb=as_given)(_Env)
    parl.connect(cluster.address)
    roomy = parl.remote_class(max_memory=2**30)(_Env)()  # the bound itself: no limit it could reach
    assert roomy.reset() == 0
    [row] = cluster.status()["actors"]
    assert int(row["resources"]["max_memory_mb"]) == 2**30


# ---- lifetime ----------------------------------------------------------------------------------


def test_an_object_is_released_when_its_proxy_is_collected(cluster: ProcCluster) -> None:
    parl.connect(cluster.address)
    keep = Actor()
    gone = Actor()
    gone_pid = gone.pid()
    assert _live_actors(cluster) == 2 and parl.get_global_client().actor_num.value == 2
    del gone
    gc.collect()
    assert wait_until(lambda: _live_actors(cluster) == 1, 10)
    assert parl.get_global_client().actor_num.value == 1
    assert keep.pid() != gone_pid and keep.add_one(1) == 2
    FutureActor().add(1)  # a wait=False object dropped at once is released as well
    gc.collect()
    assert wait_until(lambda: _live_actors(cluster) == 1, 10)


def test_workers_join_and_leave(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    c = ProcCluster(tmp_path / "home").start(workers=1, cpus_per_worker=1)
    try:
        monkeypatch.setenv("ACTORRT_TOKEN", c.token)
        parl.connect(c.address)
        first = Actor()
        for _ in range(2):  # two machines join
            c.spawn("connect", "--address", c.address, "--cpu_num", "1", "--token", c.token)
        assert wait_until(lambda: len(c.status()["nodes"]) == 3, 10)
        doomed, survivor = Actor(1), Actor(2)  # on the new nodes: the first has no free slot
        daemons = {a.daemon_pid() for a in (first, doomed, survivor)}
        assert len(daemons) == 3
        leaving = next(p for p in c.procs if p.pid == doomed.daemon_pid())
        leaving.send_signal(signal.SIGTERM)  # one machine leaves, stopped by its PID
        leaving.wait(15)

        def lost() -> bool:
            try:
                doomed.add_one(1)
            except exceptions.RemoteError as e:
                assert "gone" in str(e)
                return True
            return False

        assert wait_until(lost, 15)
        assert first.add_one(1) == 2 and survivor.add_one(2) == 3  # the others live on
        del survivor  # released: its slot frees (the doomed one was reset when its node left)
        gc.collect()
        assert wait_until(lambda: len(c.status()["nodes"]) == 2, 10)
        again = Actor(3)  # a new object finds a slot on the nodes that remain
        assert again.arg1 == 3 and again.daemon_pid() in daemons
    finally:
        parl.disconnect()
        c.stop()


# ---- forked processes --------------------------------------------------------------------------


def _child_uses_the_parents_client(results: Any) -> None:
    """In a forked child of a connected process: no connect, just create (PARL's habit)."""
    actor = Actor(7)
    client = parl.get_global_client()
    relay = cast(Any, client.backend).proc  # a forked child's client is a relay process
    results.put((actor.add_one(1), actor.arg1, client.pid == os.getpid(), relay.pid))


def _child_connects(address: str, results: Any) -> None:
    parl.connect(address)
    actor: Any = FutureActor(1)
    results.put((actor.add(2).get(), cast(Any, parl.get_global_client().backend).proc.pid))


def _run_children(target: Any, args: tuple[Any, ...], n: int = 2) -> list[Any]:
    fork = multiprocessing.get_context("fork")
    results = fork.Queue()
    children = [fork.Process(target=target, args=(*args, results)) for _ in range(n)]
    for child in children:
        child.start()
    try:
        out = [results.get(timeout=60) for _ in children]
        for child in children:
            child.join(30)
            assert child.exitcode == 0
    finally:
        for child in children:  # stopped by PID, whatever happened
            if child.is_alive():
                child.kill()
                child.join()
    return out


def _gone(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] == "Z"
    except OSError:
        return True


def test_forked_children_get_clients_of_their_own(cluster: ProcCluster) -> None:
    parl.connect(cluster.address)
    mine = Actor(1)
    out = _run_children(_child_uses_the_parents_client, ())
    assert [o[:3] for o in out] == [(2, 7, True)] * 2
    relays = [o[3] for o in out]
    try:
        assert wait_until(lambda: all(_gone(p) for p in relays), 15)  # each ended with its child
    finally:
        for pid in relays:
            if not _gone(pid):
                os.kill(pid, signal.SIGKILL)
    assert wait_until(lambda: _live_actors(cluster) == 1, 10)  # the children's objects stopped with them
    assert mine.add_one(1) == 2  # the parent's client works on
    assert parl.get_global_client().pid == os.getpid()


def _child_creates(results: Any) -> None:
    results.put(Actor(2).add_one(1))


def test_a_forked_child_connects_with_the_token_its_parent_was_given(
    cluster: ProcCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No ACTORRT_TOKEN and no token file here: the parent passed token=, and so does the child."""
    monkeypatch.delenv("ACTORRT_TOKEN")
    monkeypatch.setenv("ACTORRT_HOME", str(cluster.home / "elsewhere"))  # no token file there
    parl.connect(cluster.address, token=cluster.token)
    assert _run_children(_child_creates, (), n=1) == [2]


def test_forked_children_connect_while_the_parent_does_not(cluster: ProcCluster) -> None:
    out = _run_children(_child_connects, (cluster.address,))
    assert [o[0] for o in out] == [3, 3]
    for pid in (o[1] for o in out):
        assert wait_until(lambda pid=pid: _gone(pid), 15)
    with pytest.raises(AssertionError):
        parl.get_global_client()  # connecting in a child does not connect the parent


# ---- the example -------------------------------------------------------------------------------


def test_parl_migration_example_runs_and_removes_its_folder(cluster: ProcCluster, tmp_path: Path) -> None:
    run = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "parl_migration.py"), "--address", cluster.address],
        capture_output=True,
        text=True,
        timeout=120,
        env=dict(os.environ, ACTORRT_TOKEN=cluster.token, TMPDIR=str(tmp_path)),
    )
    assert run.returncode == 0, run.stderr
    assert "all remote objects answered" in run.stdout
    assert not list(tmp_path.glob("parl-migration-*"))  # the distributed files' folder is gone


def test_n_gpu_gives_the_object_its_own_device(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A worker offering 2 GPUs (counted: this machine has no NVIDIA driver, so none are real)."""
    c = ProcCluster(tmp_path / "home").start(workers=1, cpus_per_worker=2, worker_args=("--gpus", "2"))
    try:
        monkeypatch.setenv("ACTORRT_TOKEN", c.token)
        parl.connect(c.address)
        a, b = NeedsGpu(), NeedsGpu()
        assert {a.devices(), b.devices()} == {"0", "1"}
        del a, b
        gc.collect()
    finally:
        parl.disconnect()
        c.stop()
