"""Futures awaited from another event loop than their own, on an embedded cluster with real
actor hosts: ``background``, a blocking ``with actorrt.connect()`` shared by the module, whose
loop runs on a thread of its own (as a client inside an actor will).
"""

from __future__ import annotations

import asyncio
import threading
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
