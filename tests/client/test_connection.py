"""An actor's connection when the client itself fails (a bug of ours reading replies or
writing calls): the calls in flight fail saying why instead of waiting forever, and the
handles on a connection that gave up still let the actor go; a handle collected under the
holders' lock does not deadlock."""

from __future__ import annotations

import asyncio
import gc
import logging
import threading
import time
from typing import Any

import pytest

import actorrt
from tests.conftest import ProcCluster, Talker


async def test_calls_in_flight_fail_naming_the_cause_when_reading_replies_raises(
    cluster: ProcCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    """If the client's reader of an actor's replies raises (a bug of ours), what is in flight
    fails with ActorDiedError saying why, instead of waiting for replies nobody reads."""
    from actorrt.client.connection import ActorConnection

    async with cluster.connect():
        talker = await Talker.remote()
        assert await talker.say("warm") == "warm"

        def broken(self: ActorConnection, replies: Any) -> None:
            raise RuntimeError("injected: a bug settling replies")

        monkeypatch.setattr(ActorConnection, "_settle", broken)
        with pytest.raises(actorrt.ActorDiedError, match=r"could not read its host's replies.*injected"):
            await asyncio.wait_for(talker.say("lost"), 30)
        monkeypatch.undo()
        await actorrt.kill(talker)


async def test_calls_fail_naming_the_cause_when_writing_them_fails_on_our_side(cluster: ProcCluster) -> None:
    """A write that fails before reaching the stream (here an exception injected into the
    write itself) used to stop the outbox and nothing else: the stream stayed open and the
    call waited forever. The stream is now ended, and the call fails saying why."""
    async with cluster.connect():
        talker = await _with_writes_failing_on_our_side()
        await actorrt.kill(talker)


async def _with_writes_failing_on_our_side() -> Any:
    """A live Talker whose connection's writes raise (injected), once a call failed for it."""
    talker = await Talker.remote()
    assert await talker.say("warm") == "warm"
    outbox = talker._conn._outbox
    assert outbox is not None

    async def broken_write(message: Any) -> None:
        raise RuntimeError("injected: a write failing on our side")

    outbox._write = broken_write
    with pytest.raises(actorrt.ActorDiedError, match=r"writing its calls failed \(RuntimeError: injected"):
        await asyncio.wait_for(talker.say("lost"), 30)
    return talker


async def test_a_handle_dropped_after_its_connection_gave_up_still_lets_the_actor_go(
    cluster: ProcCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A connection that failed on our side (or whose verdict never came) while its actor lived
    sent no DropRef when its last handle went; its outbox kept the write's error, whose
    traceback held the calling frames and so a handle; and every failed call raised the one
    ActorDiedError the connection kept, whose traceback kept the frames it was raised in (here
    the helper's, with the handle in its locals). The actor and its slot stayed held until the
    client left."""
    # pytest keeps every log record, and the logged failure's traceback holds the call's frames
    # (with a bound method, so a handle): not passed on, the record goes as it would elsewhere
    monkeypatch.setattr(logging.getLogger("actorrt.client"), "propagate", False)
    async with cluster.connect() as c:
        talker = await _with_writes_failing_on_our_side()
        assert (await c.status()).actors  # alive: only our side gave up on it
        del talker
        gc.collect()
        deadline = time.monotonic() + 15
        while (await c.status()).actors:
            assert time.monotonic() < deadline, "the actor was never released"
            await asyncio.sleep(0.1)


async def test_a_handle_collected_on_a_thread_that_holds_the_handle_lock_does_not_deadlock(
    cluster: ProcCluster,
) -> None:
    """Code under the client's handle lock allocates, so a garbage collection can run a
    collected handle's __del__ (which takes that lock) on the same thread: with a plain lock
    that thread blocked forever (the client's loop thread, or an actor's)."""
    async with cluster.connect() as c:
        talker = await Talker.remote()
        extra = c.make_handle(talker._conn)  # a second handle, dropped under the lock below
        done = threading.Event()

        def drop_under_the_lock() -> None:
            nonlocal extra
            with c.holders.lock:
                del extra  # as a collection inside a locked section would
                gc.collect()
            done.set()

        worker = threading.Thread(target=drop_under_the_lock, daemon=True)
        worker.start()
        assert done.wait(10), "the thread deadlocked on the handle lock"
        assert await talker.say("still held") == "still held"
        await c.kill(talker)
