"""The master's sessions, with a real in-process master, worker daemon and client on 127.0.0.1 (as
``actorrt.connect()`` with no address starts them): a worker's silence is judged only by time the
master was running (an embedded master's loop blocked by the user's script keeps its workers),
and an event the master cannot handle is logged while the session reads on."""

from __future__ import annotations

import time

import pytest

import actorrt
from actorrt.master.servicer import MasterServicer
from actorrt.v1 import master_pb2 as pb
from tests.conftest import Echo, master_and_worker

pytestmark = pytest.mark.timeout(90)


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
