"""Creating an actor while the client's session with the master breaks: a creation asked for while
the session is down keeps its actor, and one cancelled as its placement arrives gives the slot
back; creations under way when the client closes its connection fail at once. A real master,
worker daemon and client on 127.0.0.1 (in-process, or processes started by the CLI)."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import pytest

import actorrt
from actorrt.client.control import Control
from actorrt.v1 import master_pb2 as pb
from tests.conftest import Echo, ProcCluster, master_and_worker, run_driver, wait_until

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


_CLOSES_WHILE_CREATING = """
import asyncio, json, os, sys, threading, time
import actorrt

@actorrt.remote_class
class Slow:
    def __init__(self, flags):
        open(os.path.join(flags, str(os.getpid())), "w").close()
        time.sleep(60)

address, token, flags, mode = sys.argv[1:5]
outcomes = {}

def create(name, timeout):
    try:
        Slow.remote(flags).result(timeout)
        outcomes[name] = "created"
    except Exception as e:
        outcomes[name] = f"{type(e).__name__}: {e}"

# Two constructing (the worker's two slots), one waiting for a slot; one waits with no timeout.
threads = [threading.Thread(target=create, args=(name, timeout)) for name, timeout in
           (("a", 20), ("b", 20), ("no timeout", None))]

def constructing():
    return len(os.listdir(flags)) >= 2

if mode == "sync":
    with actorrt.connect(address, token=token, log_to_driver=False):
        for t in threads:
            t.start()
        while not constructing():
            time.sleep(0.02)
        left = time.monotonic()
else:  # the cluster on this thread's loop; the loop ends with the block
    async def main():
        async with actorrt.connect(address, token=token, log_to_driver=False):
            mine = Slow.remote(flags)
            for t in threads:
                t.start()
            while not constructing():
                await asyncio.sleep(0.02)
            await asyncio.sleep(0.2)  # the others' placements reach the master
            return time.monotonic(), mine
    left, mine = asyncio.run(main())
    try:  # on the thread whose loop it was, now closed
        mine.result(20)
    except Exception as e:
        outcomes["on the loop's thread"] = f"{type(e).__name__}: {e}"
for t in threads:
    t.join(30)
mine = str(os.getpid())
print(json.dumps({"outcomes": outcomes, "after_s": time.monotonic() - left,
                  "shm": [n for n in os.listdir("/dev/shm") if n.startswith(f"actorrt-{mine}-")]}))
"""


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_creations_under_way_fail_at_once_when_their_connection_closes(
    one_worker: ProcCluster, tmp_path: Path, mode: str
) -> None:
    """Creations under way when the client left its ``connect()`` block (two constructing, one
    waiting for a slot) were never answered: ``.result(20)`` timed out after the full 20 s, one
    with no timeout waited forever (and kept the interpreter from exiting), a future of a loop
    that had ended raised ``RuntimeError: Event loop is closed`` on that loop's thread while it
    stayed pending ("Task was destroyed but it is pending!" on stderr), and each construction
    left its shared-memory probe in /dev/shm for good. Closing fails each at once, saying so,
    after cleaning up what it made."""
    flags = tmp_path / "constructing"
    flags.mkdir()
    started = time.monotonic()
    out = await asyncio.to_thread(run_driver, one_worker, _CLOSES_WHILE_CREATING, str(flags), mode, timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr
    assert time.monotonic() - started < 40, out.stdout  # the interpreter exits: no thread left waiting
    report = json.loads(out.stdout.splitlines()[-1])
    expected = {"a", "b", "no timeout"} | ({"on the loop's thread"} if mode == "async" else set())
    assert set(report["outcomes"]) == expected, report
    for outcome in report["outcomes"].values():
        assert outcome == (
            "ClusterConnectionError: Slow was not created: the cluster connection was closed while creating it"
        ), report
    assert report["after_s"] < 5, report
    assert report["shm"] == [], report
    assert "Traceback" not in out.stderr and "destroyed" not in out.stderr, out.stderr

    def freed() -> bool:
        status = one_worker.status()
        return not status["actors"] and status["slots"]["used"] == 0

    assert await asyncio.to_thread(wait_until, freed, 10), one_worker.status()
