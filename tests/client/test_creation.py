"""Creating an actor while the client's session with the master breaks: a creation asked for while
the session is down keeps its actor, and one cancelled as its placement arrives gives the slot
back. A real in-process master, worker daemon and client on 127.0.0.1."""

from __future__ import annotations

import asyncio

import pytest

import actorrt
from actorrt.client.control import Control
from actorrt.v1 import master_pb2 as pb
from tests.conftest import Echo, master_and_worker

pytestmark = pytest.mark.timeout(90)


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
