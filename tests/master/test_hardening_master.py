"""The master judges its workers' silence only by time it was running: a master whose loop was
blocked (an embedded one shares its loop with the user's script) keeps its workers, and a worker
whose own session code raises comes back instead of going silent. A real
in-process master, worker daemon and client on 127.0.0.1, as ``actorrt.connect()`` with no
address starts them."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from collections.abc import AsyncIterator

import pytest

import actorrt
from actorrt.client.control import Control
from actorrt.master.outgoing import Outgoing
from actorrt.master.server import Master
from actorrt.master.servicer import MasterServicer
from actorrt.v1 import master_pb2 as pb
from actorrt.worker.daemon import WorkerDaemon

pytestmark = pytest.mark.timeout(90)


@actorrt.remote_class
class Echo:
    def echo(self, x: int) -> int:
        return x

    def pid(self) -> int:
        return os.getpid()


@contextlib.asynccontextmanager
async def master_and_worker(
    *, worker_timeout_s: float = 10.0, reconnect: bool = False
) -> AsyncIterator[tuple[Master, WorkerDaemon]]:
    """An in-process master (token "t") and a 2-slot worker daemon, closed at the end."""
    master = await Master("127.0.0.1", 0, token="t", worker_timeout_s=worker_timeout_s).start()
    daemon = WorkerDaemon(master.address, token="t", cpus=2, reconnect=reconnect, wait_ready=True, echo_output=False)
    try:
        await daemon.start()
        yield master, daemon
    finally:
        await daemon.close()
        await master.close()


async def test_a_loop_blocked_past_the_worker_timeout_keeps_the_embedded_worker(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A script that blocks its loop (building a model, importing torch's compiler: seconds, more
    on a loaded machine) blocks its embedded master and worker too. The master's next sweep used to
    find no heartbeat for the whole block and drop the worker, and every actor asked for after it
    waited out the placement timeout (the demo hung 5 minutes under load)."""
    async with master_and_worker(worker_timeout_s=2.0) as (master, daemon):
        async with actorrt.connect(master.address, token="t", log_to_driver=False, placement_timeout=15.0):
            before = await Echo.remote()
            assert await before.echo(1) == 1
            time.sleep(5.0)  # the whole cluster's loop: no heartbeat sent, none read, no sweep
            after = await Echo.remote()
            assert await after.echo(2) == 2
            assert await before.echo(3) == 3
            assert list(master.table.workers) == [daemon.worker_id]
        assert any("the master did not run for" in r.getMessage() for r in caplog.records)


async def test_an_event_the_master_cannot_handle_is_logged_and_the_session_reads_on(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A bug of the master's own while handling one event of a client (injected: a lookup that
    raises) used to end that client's session unseen (the task's exception never retrieved):
    the client reconnected and anything it had sent meanwhile was lost. It is logged with its
    traceback and the session reads on."""
    lookup = MasterServicer._lookup
    raised: list[str] = []

    def fails_once(self: MasterServicer, client_id: str, step: pb.LookupActor) -> None:
        if not raised:
            raised.append(client_id)
            raise RuntimeError("injected: a bug handling a lookup")
        lookup(self, client_id, step)

    monkeypatch.setattr(MasterServicer, "_lookup", fails_once)
    async with master_and_worker() as (master, _):
        async with actorrt.connect(master.address, token="t", log_to_driver=False, timeout=3.0) as c:
            with pytest.raises(actorrt.ClusterConnectionError, match="did not answer"):
                await actorrt.get_actor("anything")  # its answer was never sent
            echo = await Echo.options(name="echo").remote()
            found = await actorrt.get_actor("echo")
            assert await found.echo(3) == 3 and await echo.echo(4) == 4
            assert raised == [c.client_id]
    messages = [r.getMessage() for r in caplog.records]
    failures = [r for r in caplog.records if "could not handle client" in r.getMessage()]
    assert len(failures) == 1 and failures[0].exc_info is not None, messages
    assert not any("lost the master" in m for m in messages), messages  # the session never ended


async def test_confirmed_actors_are_reported_dead_at_once_if_known_dead_and_unknown_ones_after_the_worker_timeout(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """What a reopened session's ConfirmActors gets: a death the master recorded is reported at
    once with its cause (its first notice went nowhere while the client was away); an id the
    master does not know only once it has lived a worker timeout and a reconnect period (its
    workers may still be registering with their actors), and it is remembered dead; a live
    actor never."""
    async with master_and_worker(worker_timeout_s=2.0) as (master, _):
        async with actorrt.connect(master.address, token="t", log_to_driver=False) as c:
            live, victim = await Echo.remote(), await Echo.remote()
            live_id, victim_id, unknown_id = live._conn.actor_id, victim._conn.actor_id, "feedfacefeedface"
            os.kill(await victim.pid(), signal.SIGKILL)
            deadline = time.monotonic() + 10
            while c.state.cause(victim_id) is None and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
            cause = c.state.cause(victim_id)
            assert cause is not None and "SIGKILL" in cause
            servicer = master.servicer
            sent: list[tuple[str, pb.ActorDied, float]] = []
            send = servicer.out.send_client

            def recording(client_id: str, msg: pb.ClientNotice) -> None:
                if msg.HasField("actor_died"):
                    sent.append((client_id, msg.actor_died, time.monotonic()))
                send(client_id, msg)

            monkeypatch.setattr(servicer.out, "send_client", recording)
            servicer.recovery.started_at = servicer.table.clock()  # as young as a master that just restarted
            t0 = time.monotonic()
            servicer._confirm(c.client_id, [victim_id, unknown_id, live_id])
            assert [(to, d.actor_id, d.cause) for to, d, _ in sent] == [(c.client_id, victim_id, cause)]
            deadline = time.monotonic() + 10
            while c.state.cause(unknown_id) is None and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
            assert [d.actor_id for _, d, _ in sent] == [victim_id, unknown_id]
            assert sent[1][2] - t0 >= 3.9  # not before the worker timeout (2 s) and a reconnect period (2 s)
            assert "no worker reported it to the restarted master" in (c.state.cause(unknown_id) or "")
            assert await live.echo(5) == 5 and c.state.cause(live_id) is None
            assert unknown_id in master.table.dead  # a worker registering with it now must stop it


async def test_a_holder_confirming_an_actor_placed_again_late_is_told_where_it_is(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A restartable actor the restarted master placed again from its creator's word: a holder
    whose session came back only after the master settled became a holder again but heard
    nothing, and its connection waited out its 60 s for the master's word while the actor lived.
    It is told what the others were (ActorRestarting, then ActorMoved once placed), once."""
    async with master_and_worker(worker_timeout_s=2.0) as (master, _):
        async with (
            actorrt.connect(master.address, token="t", log_to_driver=False) as creator,
            actorrt.connect(master.address, token="t", log_to_driver=False) as late,
        ):
            servicer = master.servicer
            sent: list[tuple[str, str, pb.ClientNotice]] = []
            send = servicer.out.send_client

            def recording(client_id: str, msg: pb.ClientNotice) -> None:
                sent.append((client_id, msg.WhichOneof("notice") or "", msg))
                send(client_id, msg)

            monkeypatch.setattr(servicer.out, "send_client", recording)
            servicer.recovery.started_at = servicer.table.clock() - 60.0  # its workers had their time: settles at once
            ghost = "0123456789abcdef"
            place = pb.PlaceActor(class_name="Ghost", max_restarts=2)
            place.resources.num_cpus = 1
            servicer._confirm(creator.client_id, [ghost], [pb.KeptActor(actor_id=ghost, placement=place, held=True)])
            assert [(to, kind) for to, kind, _ in sent] == [
                (creator.client_id, "actor_restarting"),
                (creator.client_id, "actor_moved"),  # a free slot: placed at once
            ]
            assert sent[1][2].actor_moved.construct and servicer.table.actors[ghost].restarts == 1
            sent.clear()
            servicer.table.add_ref(late.client_id, ghost)  # the AddRef a reopened session sends first
            servicer._confirm(late.client_id, [ghost])
            assert [(to, kind) for to, kind, _ in sent] == [
                (late.client_id, "actor_restarting"),
                (late.client_id, "actor_moved"),
            ]
            moved = sent[1][2].actor_moved
            assert not moved.construct and moved.endpoint == servicer.table.actors[ghost].endpoint
            sent.clear()
            servicer._confirm(late.client_id, [ghost])  # its session came back once more: told already
            servicer._confirm(creator.client_id, [ghost])  # was told when it was placed
            assert sent == []
            servicer.table.release_actor("", ghost, "the test is over")
            servicer._released()
            servicer.check()


async def test_confirms_due_together_settle_together_and_a_given_up_handle_holds_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A confirm that came once the settle was due but before its timer ran was settled alone:
    a holder's confirm of an actor its creator keeps was answered ActorDied and remembered dead,
    so the creator's word that followed could no longer place it again. And a client whose
    connection had given up on the actor was counted as holding it, keeping it placed for
    nobody. Now they settle together, and ``given_up`` ids are answered but hold nothing."""
    async with master_and_worker(worker_timeout_s=2.0) as (master, _):
        async with (
            actorrt.connect(master.address, token="t", log_to_driver=False) as creator,
            actorrt.connect(master.address, token="t", log_to_driver=False) as holder,
            actorrt.connect(master.address, token="t", log_to_driver=False) as quitter,
        ):
            servicer = master.servicer
            sent: list[tuple[str, str]] = []
            send = servicer.out.send_client

            def recording(client_id: str, msg: pb.ClientNotice) -> None:
                sent.append((client_id, msg.WhichOneof("notice") or ""))
                send(client_id, msg)

            monkeypatch.setattr(servicer.out, "send_client", recording)
            servicer.recovery.started_at = servicer.table.clock()  # young: the creator's confirm waits
            ghost = "fedcba9876543210"
            place = pb.PlaceActor(class_name="Ghost", max_restarts=1)
            kept = pb.KeptActor(actor_id=ghost, placement=place, held=False)
            servicer._confirm(creator.client_id, [ghost], [kept])
            servicer._confirm(quitter.client_id, [ghost], given_up={ghost})
            assert sent == [] and servicer._settle_timer is not None
            servicer.recovery.started_at -= 60.0  # now due, the timer not run yet
            servicer._confirm(holder.client_id, [ghost])
            actor = servicer.table.actors[ghost]
            assert (
                servicer.table.refs.holders_of(ghost) == {holder.client_id} and actor.restarts == 1
            )  # the quitter holds nothing
            assert (holder.client_id, "actor_died") not in sent and servicer._settle_timer is None
            assert (holder.client_id, "actor_restarting") in sent and (creator.client_id, "actor_moved") in sent
            assert all(to != quitter.client_id for to, _ in sent)
            servicer.check()
            servicer.table.release_actor("", ghost, "the test is over")
            servicer._released()
            servicer.check()


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


async def test_a_restart_notice_lost_with_its_creators_stream_is_sent_again_when_the_creator_returns(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The master tells a restarted actor's creator where to construct it (ActorMoved); when the
    creator's stream broke with that notice in it, nobody constructed the actor and the calls
    queued behind its restart waited for good. A creator back from a lost session is told again
    where its restarted actors are; one it has followed already is not built twice. (The loss
    is made here: the notice is dropped and the session ended, as a broken stream does.)"""
    send = Outgoing.send_client
    lost: list[pb.ClientNotice] = []

    def loses_the_first_move(self: Outgoing, client_id: str, msg: pb.ClientNotice) -> None:
        if msg.HasField("actor_moved") and not lost:
            lost.append(msg)
            self.to_client[client_id].put_nowait(None)  # the session ends; the notice never went
            return
        send(self, client_id, msg)

    async with master_and_worker() as (master, _):
        async with actorrt.connect(master.address, token="t", log_to_driver=False, timeout=20.0):
            actor = await Echo.options(max_restarts=2).remote()
            first = await actor.pid()
            monkeypatch.setattr(Outgoing, "send_client", loses_the_first_move)
            os.kill(first, signal.SIGKILL)
            async with asyncio.timeout(30):
                while not lost:
                    await asyncio.sleep(0.05)
                assert lost[0].actor_moved.construct
                second = await actor.pid()  # waits for the restart, built once the creator is back
            assert second != first and await actor.echo(5) == 5
            monkeypatch.setattr(Outgoing, "send_client", send)
            # the creator comes back again (its stream ends): the move it followed is not news
            servicer = master.servicer
            (client_id,) = servicer._to_client
            old = servicer._to_client[client_id]
            old.put_nowait(None)
            async with asyncio.timeout(30):
                while servicer._to_client.get(client_id) in (None, old):
                    await asyncio.sleep(0.05)
                for x in range(20):  # a second construction would break the stream these use
                    assert await actor.echo(x) == x
                    await asyncio.sleep(0.05)
            assert await actor.pid() == second
            assert master.table.actors[actor.actor_id].restarts == 1


async def test_a_creation_asked_for_while_the_session_is_down_keeps_its_actor() -> None:
    """A placement asked for while the client's session was down waited in the session's queue
    and was also sent again with the unanswered requests: the master answered both copies with
    the same actor, and the client, with no waiter for the second answer, released it: the
    creation failed "its placement was abandoned". A repeated answer is known for what it is."""
    async with master_and_worker() as (master, _):
        async with actorrt.connect(master.address, token="t", log_to_driver=False) as cluster:
            servicer = master.servicer
            (client_id,) = servicer._to_client
            session = cluster.control.session
            assert session is not None
            servicer._to_client[client_id].put_nowait(None)  # the master ends the session
            async with asyncio.timeout(30):
                while session._up.is_set():
                    await asyncio.sleep(0.002)
                actor = await Echo.remote()  # asked for while the session is down
                assert await actor.echo(1) == 1
                await asyncio.sleep(1.0)  # a release of it would have reached the master by now
                assert await actor.echo(2) == 2
            assert list(master.table.actors) == [actor.actor_id]


async def test_a_creation_cancelled_as_its_placement_arrives_gives_the_slot_back(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A creation cancelled after the master's ActorPlaced reached its waiter but before the
    creating task ran again (``asyncio.wait_for`` around ``.remote()``, a TaskGroup cancelling
    its siblings) dropped the answer: nobody constructed or released the actor, and its slot
    stayed taken for the client's lifetime. The answer is released."""
    on_notice, request = Control._on_notice, Control.request_placement
    creating: list[asyncio.Task[object]] = []

    async def recording(self: Control, *args: object) -> object:
        task = asyncio.current_task()
        assert task is not None
        creating.append(task)
        return await request(self, *args)  # type: ignore[arg-type]

    def cancels_once_placed(self: Control, notice: pb.ClientNotice) -> None:
        on_notice(self, notice)
        if notice.HasField("actor_placed") and creating:
            creating.pop().cancel()
            monkeypatch.setattr(Control, "request_placement", request)  # once

    monkeypatch.setattr(Control, "request_placement", recording)
    monkeypatch.setattr(Control, "_on_notice", cancels_once_placed)
    async with master_and_worker() as (master, _):
        async with actorrt.connect(master.address, token="t", log_to_driver=False):
            with pytest.raises(asyncio.CancelledError):
                await Echo.remote()
            async with asyncio.timeout(10):
                while master.table.actors:
                    await asyncio.sleep(0.05)
            assert await (await Echo.remote()).echo(3) == 3
