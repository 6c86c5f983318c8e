"""Actors on a real cluster: a master and two worker daemons, each its own process."""

from __future__ import annotations

import asyncio
import logging
import os
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import actorrt
import actorrt.client.control
from tests.conftest import ProcCluster


@actorrt.remote_class
class Counter:
    limit = 100  # a class attribute: readable remotely, not a method

    def __init__(self, start: int = 0) -> None:
        self.n = start

    def add(self, k: int = 1) -> int:
        self.n += k
        return self.n

    @property
    def doubled(self) -> int:
        return 2 * self.n

    def fail(self, message: str) -> None:
        raise ValueError(message)

    def fail_custom(self) -> None:
        raise QuotaExceededError("over quota", 7)

    def give_lock(self) -> threading.Lock:
        return threading.Lock()

    def scale(self, x: np.ndarray, k: float) -> np.ndarray:
        x *= k  # arguments arrive writable
        return x

    def pid(self) -> int:
        return os.getpid()

    def burn(self, seconds: float) -> tuple[float, float]:
        """CPU-bound pure Python for about ``seconds``; returns its (start, end) wall times."""
        start = time.time()
        x = 0
        while time.time() - start < seconds:
            for i in range(10_000):
                x += i * i
        return start, time.time()


class QuotaExceededError(Exception):
    def __init__(self, message: str, used: int) -> None:
        super().__init__(message, used)
        self.used = used


@actorrt.remote_class(max_concurrency=4)
class Sleeper:
    async def nap(self, seconds: float) -> float:
        await asyncio.sleep(seconds)
        return seconds


@actorrt.remote_class(max_concurrency=2)
class Canceller:
    async def await_a_cancelled_task(self) -> None:
        task = asyncio.ensure_future(asyncio.sleep(9))
        task.cancel()
        await task  # raises asyncio.CancelledError, a BaseException

    def raise_cancelled(self) -> None:
        raise asyncio.CancelledError("from a plain method")

    async def cancel_itself(self) -> None:
        task = asyncio.current_task()
        assert task is not None
        task.cancel()
        await asyncio.sleep(1)

    @property
    def cancelled_property(self) -> int:
        raise asyncio.CancelledError("from a property")

    async def ok(self) -> int:
        return 1


@actorrt.remote_class
class Broken:
    def __init__(self) -> None:
        raise RuntimeError("constructor exploded")


async def test_call_and_attributes(cluster: ProcCluster) -> None:
    async with cluster.connect():
        counter = await Counter.remote(5)
        assert await counter.add(1) == 6
        assert await counter.n == 6  # read a plain attribute
        assert await counter.doubled == 12  # a property reads like an attribute
        assert await counter.limit == 100
        counter.n = 40  # set: ordered before every later call
        assert await counter.add(2) == 42
        assert "Counter" in repr(counter)
        await actorrt.kill(counter)


async def test_10000_pipelined_calls_keep_their_order(cluster: ProcCluster) -> None:
    async with cluster.connect():
        counter = await Counter.remote(0)
        futures = [counter.add(1) for _ in range(10_000)]  # all sent before any is awaited
        results = await asyncio.gather(*futures)
        assert results == list(range(1, 10_001))
        await actorrt.kill(counter)


async def test_numpy_arrays_travel_both_ways(cluster: ProcCluster) -> None:
    async with cluster.connect():
        counter = await Counter.remote()
        for shape in [(3,), (1024, 1024), (5, 7, 9)]:
            x = np.random.default_rng(0).random(shape)
            y = await counter.scale(x, 2.0)
            assert y.shape == x.shape and np.array_equal(y, 2 * x)
        strided = np.arange(20.0)[::3]  # non-contiguous: pickled in-band
        assert np.array_equal(await counter.scale(strided, 1.0), strided)
        big = np.ones(16 * 2**20, dtype=np.uint8)
        assert int((await counter.scale(big, 3)).sum()) == 3 * big.size
        await actorrt.kill(counter)


async def test_exception_fails_the_call_and_the_actor_lives_on(cluster: ProcCluster) -> None:
    async with cluster.connect():
        counter = await Counter.remote(0)
        with pytest.raises(actorrt.RemoteError) as info:
            await counter.fail("bad input 42")
        err = info.value
        assert isinstance(err, ValueError)  # an instance of the original type as well
        assert err.method == "Counter.fail"
        assert "bad input 42" in str(err) and "in fail" in err.remote_traceback
        with pytest.raises(QuotaExceededError) as custom:  # a class defined in the test module
            await counter.fail_custom()
        assert custom.value.used == 7 and isinstance(custom.value, actorrt.RemoteError)
        assert await counter.add(1) == 1  # the actor lives on
        await actorrt.kill(counter)


async def test_a_method_that_raises_cancelled_error_fails_its_call(cluster: ProcCluster) -> None:
    """``asyncio.CancelledError`` is not an ``Exception``: from an async method (one that awaited
    a cancelled task, or whose own task was cancelled) it escaped the host's handler and the call
    never got a reply (the caller hung); from a plain method or a property it ended the whole call
    stream. It is the call's error now, and not a cancellation of the caller."""
    async with cluster.connect():
        actor = await Canceller.remote()
        for name in ("await_a_cancelled_task", "raise_cancelled", "cancel_itself", "cancelled_property"):
            with pytest.raises(actorrt.RemoteError) as info:
                attribute = getattr(actor, name)
                await asyncio.wait_for(attribute if name == "cancelled_property" else attribute(), 20)
            assert not isinstance(info.value, asyncio.CancelledError)
            assert info.value.type_name.endswith("CancelledError"), info.value.type_name
        assert await actor.ok() == 1  # the actor and its stream live on
        await actorrt.kill(actor)


async def test_unpicklable_argument_fails_at_call_site(cluster: ProcCluster) -> None:
    async with cluster.connect():
        counter = await Counter.remote(0)
        with pytest.raises(actorrt.SerializationError, match=r"argument 0 of Counter.add .*lock"):
            counter.add(threading.Lock())
        with pytest.raises(actorrt.SerializationError, match=r"argument 'k' of Counter.add"):
            counter.add(k=threading.Lock())
        assert await counter.add(1) == 1  # nothing was sent
        with pytest.raises(actorrt.RemoteError, match=r"return value of Counter.give_lock .*could not be pickled"):
            await counter.give_lock()
        assert await counter.add(1) == 2
        await actorrt.kill(counter)


async def test_constructor_error_raises_and_frees_the_slot(cluster: ProcCluster) -> None:
    """The slot is free when the error arrives: the caller may count slots at once."""
    async with cluster.connect() as c:
        for _ in range(3):
            with pytest.raises(actorrt.RemoteError, match="constructor exploded") as info:
                await Broken.remote()
            assert isinstance(info.value, RuntimeError)
            status = await c.status()
            assert status.slots_used == 0 and not status.actors, status.actors


async def test_placement_waits_for_a_free_slot_then_times_out(
    cluster: ProcCluster, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(actorrt.client.control, "PLACEMENT_WARN_S", 0.2)
    async with cluster.connect() as c:
        a, b = await asyncio.gather(Counter.remote(1), Counter.remote(2))  # both slots taken
        with caplog.at_level(logging.WARNING, logger="actorrt.client"):
            waiting = Counter.remote(3)  # queued: sent now, placed when a slot frees
            await asyncio.sleep(0.5)
        assert not waiting.done()
        said = [r.getMessage() for r in caplog.records if "for a free slot" in r.getMessage()]
        assert said == [
            "Counter has waited 0.2s for a free slot (it asks for cpus=1 gpus=0; it fails after 300s): "
            "every slot may be taken, see `actorrt status`"
        ], said
        status = await c.status()
        assert status.placements_waiting == 1 and status.slots_free == 0
        await actorrt.kill(a)
        third = await asyncio.wait_for(waiting, 10)
        assert await third.add(1) == 4
        started = time.monotonic()
        with pytest.raises(actorrt.PlacementError, match="no free slot"):
            await Counter.options(placement_timeout=0.5).remote(0)
        assert 0.4 < time.monotonic() - started < 5
        with pytest.raises(actorrt.PlacementError, match="largest node has cpus=1"):
            await Counter.options(num_cpus=4).remote(0)  # impossible: refused at once
        await actorrt.kill(b)
        await actorrt.kill(third)


async def test_kill_fails_pending_calls_and_frees_the_slot(cluster: ProcCluster) -> None:
    async with cluster.connect() as c:
        counter = await Counter.remote(0)
        busy = counter.burn(5.0)
        await asyncio.sleep(0.2)
        await actorrt.kill(counter)
        with pytest.raises(actorrt.ActorDiedError, match=r"killed by actorrt\.kill"):
            await busy
        with pytest.raises(actorrt.ActorDiedError):
            await counter.add(1)
        status = await c.status()
        assert status.slots_used == 0 and not status.actors


async def test_actor_killed_by_signal_reports_the_cause(cluster: ProcCluster) -> None:
    async with cluster.connect():
        counter = await Counter.remote(0)
        pid = await counter.pid()
        pending = counter.burn(10.0)
        await asyncio.sleep(0.2)
        os.kill(pid, 9)
        with pytest.raises(actorrt.ActorDiedError, match=r"signal 9 \(SIGKILL\)"):
            await asyncio.wait_for(pending, 3)
        with pytest.raises(actorrt.ActorDiedError):
            await counter.add(1)


async def test_two_cpu_bound_actors_run_in_parallel(cluster: ProcCluster) -> None:
    """The GIL is escaped: two actors burn CPU at the same time, in two processes."""
    async with cluster.connect():
        a, b = await asyncio.gather(Counter.remote(), Counter.remote())
        assert await a.pid() != await b.pid()
        t0 = time.perf_counter()
        (a0, a1), (b0, b1) = await asyncio.gather(a.burn(1.0), b.burn(1.0))
        wall = time.perf_counter() - t0
        overlap = min(a1, b1) - max(a0, b0)
        assert overlap > 0.8, f"the two calls overlapped only {overlap:.2f}s of 1s"
        assert wall < 1.6, f"2 x 1s of CPU took {wall:.2f}s"
        await asyncio.gather(actorrt.kill(a), actorrt.kill(b))


async def test_async_methods_interleave_up_to_max_concurrency(cluster: ProcCluster) -> None:
    async with cluster.connect():
        s = await Sleeper.remote()
        t0 = time.perf_counter()
        assert await asyncio.gather(*[s.nap(0.5) for _ in range(4)]) == [0.5] * 4
        assert time.perf_counter() - t0 < 1.4  # 4 naps of 0.5s overlapped
        t0 = time.perf_counter()
        assert await asyncio.gather(*[s.nap(0.3) for _ in range(8)]) == [0.3] * 8
        assert time.perf_counter() - t0 >= 0.6  # at most 4 at once: two rounds
        await actorrt.kill(s)


def test_host_slots_hand_over_in_order_and_survive_cancellation() -> None:
    from actorrt.host.actor import ConcurrencyLimit

    async def main() -> None:
        slots = ConcurrencyLimit(1)
        assert slots.take() and not slots.take()
        order: list[str] = []

        async def waiter(name: str) -> None:
            await slots.wait_take()
            order.append(name)

        a, b, c = (asyncio.create_task(waiter(n)) for n in "abc")
        await asyncio.sleep(0)
        b.cancel()  # cancelled while waiting: leaves the line
        slots.give()  # to a
        await asyncio.sleep(0)
        c_task_waiting = not c.done()
        slots.give()  # a's slot back: to c (b is gone)
        await asyncio.gather(a, c, return_exceptions=True)
        assert order == ["a", "c"] and c_task_waiting and b.cancelled()
        slots.give()
        assert slots.free == 1 and slots.take()

        # handed a slot just as it is cancelled: the slot goes on to the next in line
        d, e = asyncio.create_task(waiter("d")), asyncio.create_task(waiter("e"))
        await asyncio.sleep(0)
        slots.give()  # to d, which is cancelled before it runs
        d.cancel()
        await asyncio.gather(d, e, return_exceptions=True)
        assert order[-1] == "e" and d.cancelled() and slots.free == 0

    asyncio.run(main())


def test_blocking_api_for_plain_scripts(cluster: ProcCluster) -> None:
    with cluster.connect() as c:
        counter = Counter.remote(10).result()
        assert counter.add(1).result() == 11
        futures = [counter.add(1) for _ in range(100)]
        assert actorrt.get(futures)[-1] == 111
        assert counter.n.result() == 111
        with pytest.raises(ValueError):
            counter.fail("x").result()
        assert c.status().result().slots_used == 1
        actorrt.kill(counter).result()


async def test_files_are_shipped_into_the_actor_working_directory(
    cluster: ProcCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / "a.txt").write_text("alpha")
    (data / "b.txt").write_text("beta")
    monkeypatch.chdir(tmp_path)

    @actorrt.remote_class
    class Reader:
        def read(self, path: str) -> str:
            with open(path) as f:
                return f.read()

    async with cluster.connect(files=["data/*.txt"]):
        reader = await Reader.remote()
        assert await reader.read("data/a.txt") == "alpha"
        assert await reader.read("data/b.txt") == "beta"
        await actorrt.kill(reader)
    with pytest.raises(FileNotFoundError, match="matches no file"):
        async with cluster.connect(files=["nope/*.bin"]):
            pass


async def test_code_from_a_local_module_travels_by_value(
    cluster: ProcCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pkg = tmp_path / "shipme_local"
    pkg.mkdir()
    (pkg / "__init__.py").write_text(
        "import importlib.util\n"
        "import actorrt\n"
        "def helper(x):\n"
        "    return x * 3\n"
        "@actorrt.remote_class\n"
        "class Tripler:\n"
        "    def run(self, x):\n"
        "        return helper(x)\n"
        "    def importable_here(self):\n"
        "        return importlib.util.find_spec('shipme_local') is not None\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    import shipme_local  # type: ignore[import-not-found]  # written by this test, just above

    async with cluster.connect():
        t = await shipme_local.Tripler.remote()
        assert await t.run(14) == 42
        assert await t.importable_here() is False  # the worker never had the module
        await actorrt.kill(t)


async def test_a_local_module_imported_after_the_last_creation_travels_by_value_in_a_call(
    cluster: ProcCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Local modules were registered for pickling by value only when the process created an
    actor: a function from one imported later (or by a script that only finds actors by name)
    went by reference, and the host, which lacks the module, failed with ModuleNotFoundError."""
    (tmp_path / "shipme_later.py").write_text("def quadruple(x):\n    return 4 * x\n")

    @actorrt.remote_class
    class Applier:
        def apply(self, f: Any, x: int) -> int:
            return int(f(x))

    async with cluster.connect():
        applier = await Applier.remote()
        monkeypatch.syspath_prepend(str(tmp_path))
        import shipme_later  # type: ignore[import-not-found]  # written by this test, just above

        assert await applier.apply(shipme_later.quadruple, 5) == 20
        await actorrt.kill(applier)


async def test_status_reports_nodes_slots_actors_and_clients(cluster: ProcCluster) -> None:
    async with cluster.connect() as c:
        counter = await Counter.remote()
        status = await c.status()
        assert len(status.nodes) == 2 and status.slots_total == 2 and status.slots_used == 1
        assert [a["class_name"] for a in status.actors] == ["Counter"]
        assert any(cl["client_id"] == c.client_id for cl in status.clients)
        text = str(status)
        assert "slots 1/2 used" in text and "Counter" in text
        await actorrt.kill(counter)


async def test_closing_the_connection_stops_its_actors(cluster: ProcCluster) -> None:
    async with cluster.connect():
        await Counter.remote()
        await Counter.remote()
    # the autouse leak check asserts both slots are free again


async def test_wrong_token_is_refused(cluster: ProcCluster) -> None:
    with pytest.raises(actorrt.AuthenticationError, match="wrong token"):
        async with actorrt.connect(cluster.address, token="not-the-token", timeout=5):
            pass


async def test_unreachable_master_is_a_connection_error() -> None:
    from tests.conftest import free_port

    with pytest.raises(actorrt.MasterUnreachableError):
        async with actorrt.connect(f"127.0.0.1:{free_port()}", token="t", timeout=2):
            pass


async def test_embedded_cluster_without_an_address(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ACTORRT_ADDRESS", raising=False)
    async with actorrt.connect() as c:
        assert c.embedded and c.address.startswith("127.0.0.1:")
        counter = await Counter.remote(1)
        assert await counter.add(1) == 2
        assert (await c.status()).slots_total == os.cpu_count()


async def test_remote_class_rejects_bad_options() -> None:
    with pytest.raises(ValueError, match=r"num_cpus must be 1\.\.65536"):
        actorrt.remote_class(num_cpus=0)
    with pytest.raises(TypeError, match="max_concurrency must be an int"):
        actorrt.remote_class(max_concurrency="4")  # type: ignore[call-overload]  # the wrong type is the test
    with pytest.raises(actorrt.ClusterConnectionError, match="not connected"):
        Counter.remote()


@pytest.mark.parametrize(
    "options, error, message",
    [
        ({"timeout": 0}, ValueError, r"connect: timeout must be > 0 seconds, got 0"),
        ({"timeout": None}, TypeError, r"connect: timeout must be a number of seconds, got None"),
        ({"timeout": float("inf")}, TypeError, r"connect: timeout must be a number of seconds, got inf"),
        ({"placement_timeout": -1}, ValueError, r"placement_timeout must be >= 0 seconds \(0 waits forever\), got -1"),
        ({"placement_timeout": "5"}, TypeError, r"placement_timeout must be a number of seconds, got '5'"),
    ],
)
def test_connect_refuses_timeouts_it_cannot_use(options: dict, error: type[Exception], message: str) -> None:
    """``timeout=0`` failed every connection with "no master answered within 0s"; ``None``
    connected, then every actor creation raised a TypeError (``None > 0``)."""
    with pytest.raises(error, match=message):
        actorrt.connect("127.0.0.1:1", **options)
