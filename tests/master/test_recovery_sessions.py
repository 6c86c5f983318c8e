"""What a master re-adopts when clients come back with the actors they hold, with a real in-process
master, worker daemon and client on 127.0.0.1: confirmed actors settled (dead ones at once,
unknown ones after the worker timeout, those due together together), a late holder told where an
actor placed again is, and a restart notice lost with its creator's stream sent again."""

from __future__ import annotations

import asyncio
import os
import signal
import time

import pytest

import actorrt
from actorrt.master.outgoing import Outgoing
from actorrt.v1 import master_pb2 as pb
from tests.conftest import Echo, master_and_worker

pytestmark = pytest.mark.timeout(90)


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
