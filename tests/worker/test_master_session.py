"""A worker daemon's session with its master, with a real in-process master and daemon on
127.0.0.1: a session whose own code raises comes back instead of going silent, an exit it could
not send before its session broke keeps its cause, nothing piles up while the master is away, and
a host started after the daemon began closing is killed."""

from __future__ import annotations

import asyncio
import os
import signal
import time

import pytest

import actorrt
from actorrt.v1 import master_pb2 as pb
from actorrt.worker.daemon import WorkerDaemon
from tests.conftest import Echo, master_and_worker

pytestmark = pytest.mark.timeout(90)


async def test_a_worker_whose_session_raises_says_so_and_registers_again(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A bug of the daemon's own while handling a command (injected: an exception right after
    it started the first actor) used to end its session task silently: a live daemon the
    cluster had lost for good. It is logged with its traceback, the actor it was starting fails
    with a clear error, and the daemon registers again and serves."""
    start = WorkerDaemon._start_actor
    raised: list[str] = []

    def fails_once(self: WorkerDaemon, cmd: object) -> None:
        start(self, cmd)  # type: ignore[arg-type]
        if not raised:
            raised.append("start_actor")
            raise RuntimeError("injected: a bug after starting an actor")

    monkeypatch.setattr(WorkerDaemon, "_start_actor", fails_once)
    async with master_and_worker(worker_timeout_s=2.0, reconnect=True) as (master, daemon):
        async with actorrt.connect(master.address, token="t", log_to_driver=False, placement_timeout=20.0) as c:
            # Its worker's session ended under it: the creation fails saying so, or (if it was
            # constructed before the master's word came) its calls do, once the word comes.
            with pytest.raises(actorrt.ActorDiedError, match="node lost: its worker daemon disconnected"):
                lost = await Echo.remote()
                for _ in range(200):
                    await lost.echo(1)
                    await asyncio.sleep(0.05)
            after = await Echo.remote()
            assert await after.echo(2) == 2
            # The lost actor's host was stopped when the daemon came back: its slot comes free.
            deadline = time.monotonic() + 20
            while True:
                status = await c.status()
                if [(n["cpus_used"], n["slots_ready"]) for n in status.nodes] == [(1, 1)]:
                    break
                assert time.monotonic() < deadline, status
                await asyncio.sleep(0.1)
            assert len(list(daemon.pool.serving())) == 1
            assert raised == ["start_actor"]
            assert len(master.table.workers) == 1
        failures = [r for r in caplog.records if "the worker session failed (RuntimeError" in r.getMessage()]
        assert failures and failures[0].exc_info is not None


async def test_a_host_started_after_the_daemon_began_closing_is_killed_and_the_close_ends(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A host keeper that goes on after its cancellation (Python 3.11's wait_for could drop one)
    starts a host the close never signalled. The close used to wait for that host forever; now
    it kills it after 5 s, and nothing is left running."""
    from actorrt.worker.host_runner import HostRunner
    from tests.conftest import host_pids

    spawn = HostRunner._spawn
    stubborn = asyncio.Event()

    async def spawn_despite_cancel(self: HostRunner, index: int) -> None:
        if not stubborn.is_set():
            await spawn(self, index)
            return
        try:
            await asyncio.sleep(3600)  # the keeper of a host that just exited, when the close begins
        except asyncio.CancelledError:
            await spawn(self, index)  # as if the cancellation had been dropped

    monkeypatch.setattr(HostRunner, "_spawn", spawn_despite_cancel)
    async with master_and_worker() as (master, daemon):
        async with actorrt.connect(master.address, token="t", log_to_driver=False):
            echo = await Echo.remote()
            assert await echo.echo(1) == 1
            stubborn.set()
            await actorrt.kill(echo)  # its keeper now waits in the stubborn spawn
        await asyncio.sleep(0.5)
        await asyncio.wait_for(daemon.close(), 30)
        assert any("started as its daemon closed: killed" in r.getMessage() for r in caplog.records)
        assert not [pid for pid, owner in host_pids().items() if owner == os.getpid()]


async def test_an_exit_the_worker_could_not_send_before_its_session_broke_keeps_its_cause() -> None:
    """A daemon whose session breaks (unseen by the master yet) with an actor's exit still
    queued dropped it as it registered again: the master ended the actor "lost while its worker
    daemon reconnected" instead of its cause (a signal, the memory limit, sys.exit), and a
    slot-not-ready refusal became a counted restart. The registration now carries those exits."""
    async with master_and_worker(reconnect=True) as (master, daemon):
        async with actorrt.connect(master.address, token="t", log_to_driver=False) as c:
            echo = await Echo.remote()
            actor_id, pid = echo._conn.actor_id, await echo.pid()
            queue = daemon._events
            stalled, entered, get = asyncio.Event(), asyncio.Event(), queue.get

            async def stalled_get() -> pb.WorkerEvent:  # writes no longer get through
                entered.set()
                await stalled.wait()
                return await get()

            queue.get = stalled_get  # type: ignore[method-assign]
            await asyncio.wait_for(entered.wait(), 10)  # after the event it was waiting for (a heartbeat)
            os.kill(pid, signal.SIGKILL)
            deadline = time.monotonic() + 10
            while not any(e.HasField("actor_exited") for e in list(queue._queue)):  # type: ignore[attr-defined]
                assert time.monotonic() < deadline, "the daemon never queued the exit"
                await asyncio.sleep(0.05)
            worker_queue = master.servicer._to_worker.pop(daemon.worker_id)
            worker_queue.put_nowait(None)  # the session ends; the master keeps the worker listed
            deadline = time.monotonic() + 10
            while daemon._connected:  # the daemon saw it end: the exit is not written to it
                assert time.monotonic() < deadline, "the daemon never saw its session end"
                await asyncio.sleep(0.02)
            del queue.get
            stalled.set()
            deadline = time.monotonic() + 15
            while c.state.cause(actor_id) is None:
                assert time.monotonic() < deadline, "no death notice"
                await asyncio.sleep(0.05)
            assert "SIGKILL" in (c.state.cause(actor_id) or ""), c.state.cause(actor_id)
            fresh = await Echo.remote()
            assert await fresh.echo(4) == 4


async def test_a_daemon_keeps_no_output_or_heartbeats_queued_while_its_master_is_away() -> None:
    """While the master was unreachable every line an actor printed (up to 1000 per second,
    8 KiB each) and every heartbeat queued up in the daemon, to be thrown away at the reconnect:
    a long outage could grow the daemon past its memory limit. Now only exits wait (their
    causes go with the next registration); the output stays in the actors' log files."""
    async with master_and_worker(reconnect=True) as (master, daemon):
        async with actorrt.connect(master.address, token="t", log_to_driver=False) as c:
            loud = await Loud.remote()
            assert await loud.shout(1) == 1
            master.keep_workers = True  # it goes as a crashed one would: the worker waits for the next
            await master.close()  # calls go on without it: the data plane bypasses the master
            deadline = time.monotonic() + 10
            while daemon._connected:
                assert time.monotonic() < deadline, "the daemon never noticed its master was gone"
                await asyncio.sleep(0.05)
            for _ in range(6):  # 3 s of output (500 lines a message) and heartbeats (one a second)
                assert await loud.shout(1000) == 1000
                await asyncio.sleep(0.5)
            assert daemon._events.qsize() == 0, daemon._events.qsize()
            c.holders.actors.clear()  # its master is gone for good: nothing to release at close


@actorrt.remote_class
class Loud:
    def shout(self, n: int) -> int:
        for i in range(n):
            print(f"line {i} " + "x" * 100, flush=True)
        return n
