"""Many futures at once (``actorrt.wait``, ``actorrt.as_completed``) and futures awaited from
another event loop than their own, on embedded clusters with real actor hosts.

Two kinds of cluster: ``background``, a blocking ``with actorrt.connect()`` shared by the module,
whose loop runs on a thread of its own (as a client inside an actor will), and, in async tests,
``async with actorrt.connect()`` on the test's own loop.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

import actorrt
from tests.conftest import shared_embedded_cluster, wait_until


@actorrt.remote_class(max_concurrency=8)
class Napper:
    async def nap(self, seconds: float) -> float:
        await asyncio.sleep(seconds)
        return seconds

    async def fail_after(self, seconds: float, message: str) -> None:
        await asyncio.sleep(seconds)
        raise ValueError(message)


@pytest.fixture(scope="module")
def background() -> Iterator[actorrt.Cluster]:
    """An embedded cluster whose loop runs on its own thread (a plain script's ``with``)."""
    with shared_embedded_cluster(num_cpus=2, log_to_driver=False) as c:
        yield c


# ---- a CallFuture awaited from another loop -------------------------------------------------------


async def test_call_futures_are_awaitable_from_another_running_loop(background: actorrt.Cluster) -> None:
    assert background.loop is not asyncio.get_running_loop()
    creating = Napper.remote()  # a future of the background loop
    assert creating.get_loop() is background.loop
    napper = await creating  # awaited on this test's loop
    assert await napper.nap(0.01) == 0.01
    values = [await f for f in [napper.nap(0.02), napper.nap(0.01)]]
    assert values == [0.02, 0.01]
    with pytest.raises(actorrt.RemoteError, match="broken on purpose") as info:
        await napper.fail_after(0, "broken on purpose")
    assert isinstance(info.value, ValueError)
    late = napper.nap(0.05)
    assert late.result(10) == 0.05  # .result() from a thread that is not the future's loop's
    assert await late == 0.05  # done: read at once, on any loop
    await actorrt.kill(napper)


async def test_cancelling_the_await_on_another_loop_cancels_the_call_future(background: actorrt.Cluster) -> None:
    napper = await Napper.remote()
    fut = napper.nap(5)

    async def awaiting() -> float:
        return await fut

    with pytest.raises(TimeoutError):
        await asyncio.wait_for(awaiting(), 0.2)
    assert wait_until(fut.cancelled, 5), "the CallFuture on the cluster's loop was not cancelled"
    assert await napper.nap(0) == 0  # the actor is fine
    await actorrt.kill(napper)


def test_cancelling_from_another_thread_never_races_the_reply_that_settles_it() -> None:
    """``f.result(timeout)`` ran out, then ``f.cancel()`` from the script's thread, while the
    reply settled the future on the loop: asyncio's futures are not thread-safe, the reply's
    set_result raised InvalidStateError, and the connection's reader died with every call in
    flight. Here the reply settles the future between the cancel and the loop's next turn."""
    loop = asyncio.new_event_loop()
    runner = threading.Thread(target=loop.run_forever, daemon=True)
    runner.start()
    try:
        fut: actorrt.CallFuture[int] = actorrt.CallFuture(loop=loop)
        cancel_asked, errors = threading.Event(), []

        def reply() -> None:  # on the loop, as the reader settles a call: done() was False
            cancel_asked.wait(5)
            try:
                fut.set_result(7)
            except asyncio.InvalidStateError as e:
                errors.append(e)

        loop.call_soon_threadsafe(reply)
        time.sleep(0.05)  # the loop is inside reply(), waiting
        assert fut.cancel()  # from this thread: done on the loop, in turn
        cancel_asked.set()
        assert fut.result(timeout=5) == 7 and not errors  # the reply won; the cancel found it done
        other: actorrt.CallFuture[int] = actorrt.CallFuture(loop=loop)
        assert other.cancel()
        assert wait_until(other.cancelled, 5)
    finally:
        loop.call_soon_threadsafe(loop.stop)
        runner.join(5)
        loop.close()


def test_a_loop_on_another_thread_awaits_the_futures_of_this_one(background: actorrt.Cluster) -> None:
    """The shape of a client inside an actor: its futures belong to a loop thread of its own
    and are awaited by coroutines on a second loop, here run on yet another thread."""
    napper = Napper.remote().result(30)
    got: dict[str, Any] = {}

    async def on_second_loop() -> None:
        got["values"] = await asyncio.gather(*(_awaited(napper.nap(s)) for s in (0.03, 0.01)))
        got["thread"] = threading.current_thread().name

    worker = threading.Thread(target=lambda: actorrt.run(on_second_loop()), name="second-loop")
    worker.start()
    worker.join(30)
    assert got == {"values": [0.03, 0.01], "thread": "second-loop"}
    actorrt.kill(napper).result(15)


async def _awaited(fut: actorrt.CallFuture[Any]) -> Any:
    """A coroutine of ``await fut``: asyncio.gather takes futures of its own loop only."""
    return await fut


# ---- wait -------------------------------------------------------------------------------------


async def test_wait_returns_num_returns_done_futures_in_the_order_given() -> None:
    async with actorrt.connect(num_cpus=1, log_to_driver=False):
        napper = await Napper.remote()
        futures = [napper.nap(1.5), napper.nap(0.05), napper.nap(0.2), napper.nap(1.5)]
        done, pending = await actorrt.wait(futures, num_returns=2)
        assert done == [futures[1], futures[2]] and pending == [futures[0], futures[3]]
        assert not futures[0].done() and not futures[3].done()

        done, pending = await actorrt.wait(futures)  # num_returns=1: two are done, one is given
        assert done == [futures[1]] and pending == [futures[0], futures[2], futures[3]]

        done, pending = await actorrt.wait(futures, num_returns=4)
        assert done == futures and pending == []
        assert [f.result() for f in done] == [1.5, 0.05, 0.2, 1.5]
        await actorrt.kill(napper)


async def test_wait_with_a_timeout_returns_what_is_done_by_then() -> None:
    async with actorrt.connect(num_cpus=1, log_to_driver=False):
        napper = await Napper.remote()
        futures = [napper.nap(3), napper.nap(0.05), napper.nap(3)]
        start = time.monotonic()
        done, pending = await actorrt.wait(futures, num_returns=3, timeout=0.5)
        took = time.monotonic() - start
        assert done == [futures[1]] and pending == [futures[0], futures[2]]
        assert 0.45 <= took < 2.5, took

        start = time.monotonic()
        answer = actorrt.wait(futures, num_returns=2, timeout=0)  # one look, no waiting
        assert answer.done()
        assert await answer == ([futures[1]], [futures[0], futures[2]])
        assert time.monotonic() - start < 0.5

        fast = [napper.nap(0.01), napper.nap(0.02)]
        start = time.monotonic()
        done, pending = await actorrt.wait(fast, num_returns=2, timeout=30)  # the timeout is a bound only
        assert done == fast and pending == [] and time.monotonic() - start < 5
        await actorrt.kill(napper)


async def test_failed_futures_count_as_done_and_keep_their_error() -> None:
    async with actorrt.connect(num_cpus=1, log_to_driver=False):
        napper = await Napper.remote()
        slow, failing = napper.nap(3), napper.fail_after(0.05, "no luck")
        done, pending = await actorrt.wait([slow, failing], num_returns=1, timeout=10)
        assert done == [failing] and pending == [slow]
        with pytest.raises(actorrt.RemoteError, match="no luck"):
            await done[0]
        cancelled: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        cancelled.cancel()
        done, pending = await actorrt.wait([slow, cancelled], timeout=10)
        assert done == [cancelled] and pending == [slow]
        await actorrt.kill(napper)


async def test_waiting_again_on_what_is_pending_drains_every_future() -> None:
    """Ray's loop: ``done, pending = wait(pending)`` until nothing is left; each future comes
    out once, and a finished wait leaves no callback on the futures it did not return."""
    async with actorrt.connect(num_cpus=1, log_to_driver=False):
        napper = await Napper.remote()
        pending = [napper.nap(0.01 * (i % 5)) for i in range(40)]
        seen: list[actorrt.CallFuture[float]] = []
        while pending:
            done, pending = await actorrt.wait(pending, num_returns=min(3, len(pending)), timeout=10)
            assert done
            seen += done
            assert all(len(getattr(f, "_callbacks", None) or ()) == 0 for f in pending)
        assert len(seen) == 40 and len({id(f) for f in seen}) == 40
        await actorrt.kill(napper)


def test_wait_and_as_completed_refuse_what_they_cannot_wait_for() -> None:
    loop = asyncio.new_event_loop()
    try:
        a, b = loop.create_future(), loop.create_future()
        with pytest.raises(ValueError, match=r"num_returns must be between 1 and the number of futures \(2\), got 3"):
            actorrt.wait([a, b], num_returns=3)
        with pytest.raises(ValueError, match="got 0"):
            actorrt.wait([a, b], num_returns=0)
        with pytest.raises(TypeError, match="num_returns must be an int"):
            actorrt.wait([a, b], num_returns=1.5)  # type: ignore[arg-type]
        with pytest.raises(ValueError, match=r"futures\[2\] is the same future as futures\[0\]"):
            actorrt.wait([a, b, a])
        with pytest.raises(ValueError, match="timeout must be None or >= 0 seconds, got -1"):
            actorrt.wait([a, b], timeout=-1)
        with pytest.raises(TypeError, match=r"takes a list of futures, not one future: wait\(\[fut\]\)"):
            actorrt.wait(a)
        with pytest.raises(TypeError, match=r"futures\[1\] is a builtins.int, not a future"):
            actorrt.wait([a, 7])  # type: ignore[type-var]
        with pytest.raises(ValueError, match=r"as_completed\(\): futures\[1\] is the same future"):
            actorrt.as_completed([a, a])
        with pytest.raises(ValueError, match="timeout must be None or >= 0 seconds, got nan"):
            actorrt.as_completed([a], timeout=float("nan"))
        assert actorrt.wait([]).result() == ([], [])  # as Ray: nothing to wait for
        assert list(actorrt.as_completed([])) == []
    finally:
        loop.close()


# ---- as_completed -----------------------------------------------------------------------------


async def test_as_completed_yields_futures_in_the_order_they_complete() -> None:
    async with actorrt.connect(num_cpus=1, log_to_driver=False):
        napper = await Napper.remote()
        futures = [napper.nap(0.9), napper.nap(0.1), napper.fail_after(0.5, "middle"), napper.nap(0.3)]
        order = [fut async for fut in actorrt.as_completed(futures, timeout=30)]
        assert order == [futures[1], futures[3], futures[2], futures[0]]
        assert all(f.done() for f in order)
        with pytest.raises(actorrt.RemoteError, match="middle"):
            await order[2]

        slow = napper.nap(3)
        with pytest.raises(RuntimeError, match="would block the event loop its futures need; use 'async for'"):
            next(iter(actorrt.as_completed([slow])))
        start = time.monotonic()
        with pytest.raises(TimeoutError, match=r"1 of 2 futures not done within 0\.3s"):
            async for fut in actorrt.as_completed([slow, napper.nap(0.01)], timeout=0.3):
                assert fut is not slow
        assert 0.25 <= time.monotonic() - start < 2.5
        await actorrt.kill(napper)


async def test_wait_and_as_completed_take_futures_of_different_loops(background: actorrt.Cluster) -> None:
    far = await Napper.remote()  # the background cluster, on its own loop thread
    async with actorrt.connect(num_cpus=1, log_to_driver=False):
        near = await Napper.remote()  # this test's loop
        futures = [far.nap(0.6), near.nap(0.05), far.nap(0.2), near.nap(2)]
        assert futures[0].get_loop() is not futures[1].get_loop()
        done, pending = await actorrt.wait(futures, num_returns=3, timeout=10)
        assert done == futures[:3] and pending == [futures[3]]
        again = [far.nap(0.4), near.nap(0.2), far.nap(0.01)]
        order = [fut async for fut in actorrt.as_completed(again, timeout=30)]
        assert order == [again[2], again[1], again[0]]
        await actorrt.kill(near)
    await actorrt.kill(far)


# ---- from a plain script -------------------------------------------------------------------------


def test_wait_and_as_completed_block_in_a_plain_script(background: actorrt.Cluster) -> None:
    napper = Napper.remote().result(30)
    futures = [napper.nap(2), napper.nap(0.05), napper.nap(0.3)]
    done, pending = actorrt.wait(futures, num_returns=2, timeout=20).result()
    assert done == [futures[1], futures[2]] and pending == [futures[0]]
    start = time.monotonic()
    done, pending = actorrt.wait(futures, num_returns=3, timeout=0.2).result(10)
    assert len(done) == 2 and pending == [futures[0]] and time.monotonic() - start < 1.5
    assert actorrt.wait(futures, num_returns=3).result(10) == (futures, [])

    futures = [napper.nap(0.5), napper.nap(0.05), napper.fail_after(0.25, "late")]
    order = []
    for fut in actorrt.as_completed(futures, timeout=30):
        try:
            order.append(fut.result())
        except actorrt.RemoteError as e:
            order.append(str(e.cause))
    assert order == [0.05, "late", 0.5]
    with pytest.raises(TimeoutError, match=r"1 of 1 futures not done within 0\.1s"):
        for _ in actorrt.as_completed([napper.nap(2)], timeout=0.1):
            pass
    actorrt.kill(napper).result(15)
