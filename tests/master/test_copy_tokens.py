"""Handle copies' tokens at the master's boundary: a token is its sender's client id and a counter
(``<client id>.<n>``), client ids are short, and a session that sends anything else is refused
with ``INVALID_ARGUMENT`` naming the field, before the master keeps a byte of it. Speaks the
protocol by hand to a real master, as a token holder could."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path

import grpc
import pytest

from actorrt.master.references import client_id_problem, token_problem
from actorrt.transport import rpc as _rpc
from actorrt.v1 import master_pb2 as pb
from actorrt.v1 import master_pb2_grpc as pb_grpc
from tests.conftest import Echo, ProcCluster

MIB = 1 << 20
_OPTIONS = [("grpc.max_send_message_length", -1)]


def _rss(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no VmRSS for {pid}")


async def _session(
    stub: pb_grpc.MasterStub, cluster: ProcCluster, client_id: str
) -> grpc.aio.StreamStreamCall[pb.ClientEvent, pb.ClientNotice]:
    call = stub.ClientSession(metadata=_rpc.auth_metadata(cluster.token))
    await call.write(
        pb.ClientEvent(open_session=pb.OpenSession(version=_rpc.PROTOCOL_VERSION, client_id=client_id, hostname="h"))
    )
    return call


async def _refusal(
    call: grpc.aio.StreamStreamCall[pb.ClientEvent, pb.ClientNotice], events: list[pb.ClientEvent]
) -> tuple[grpc.StatusCode, str]:
    """Send ``events``, one every 50 ms until the master ends the session (a write after that
    would end it on this side, ``INTERNAL``), reading its notices meanwhile; then its status and
    details. Raises TimeoutError if the session does not end."""

    async def read_to_the_end() -> None:
        with contextlib.suppress(grpc.RpcError):
            while await call.read() is not grpc.aio.EOF:
                pass

    reader = asyncio.create_task(read_to_the_end())
    for ev in events:
        if reader.done():
            break
        await call.write(ev)
        await asyncio.sleep(0.05)
    async with asyncio.timeout(10):
        await reader
    return await call.code(), await call.details() or ""


async def test_copy_tokens_that_are_not_the_senders_own_short_form_are_refused(cluster: ProcCluster) -> None:
    """Before: a token holder's 100 AddRefs with distinct 3 MiB tokens added ~320 MiB to the
    master, kept after it left (voided tokens are kept per actor until the actor dies)."""
    master_pid = cluster.procs[0].pid
    async with cluster.connect() as c:
        echo = await Echo.remote()
        aid = echo.actor_id
        before = _rss(master_pid)
        async with grpc.aio.insecure_channel(cluster.address, options=_OPTIONS) as channel:
            stub = pb_grpc.MasterStub(channel)
            sender = await _session(stub, cluster, "attacker-1")
            opened = await sender.read()
            assert isinstance(opened, pb.ClientNotice) and opened.HasField("session_opened")
            # its own short tokens are taken: a copy sent, then taken back
            await sender.write(pb.ClientEvent(add_ref=pb.AddRef(actor_id=aid, token="attacker-1.1")))
            await sender.write(pb.ClientEvent(drop_ref=pb.DropRef(actor_id=aid, token="attacker-1.1")))
            await sender.write(pb.ClientEvent(lookup_actor=pb.LookupActor(request_id=1, actor_id=aid)))
            found = await sender.read()
            assert (
                isinstance(found, pb.ClientNotice)
                and found.HasField("actor_found")
                and found.actor_found.actor_id == aid
            )  # the session lives
            big = [
                pb.ClientEvent(add_ref=pb.AddRef(actor_id=aid, token=f"attacker-1.{n}" + "7" * (3 * MIB)))
                for n in range(100)
            ]
            code, details = await _refusal(sender, big)
            assert code == grpc.StatusCode.INVALID_ARGUMENT, details
            assert "AddRef.token must be a handle copy's token, this client's own, attacker-1.<n>" in details
            # another client's token in an AddRef; a claim of 3 MiB; a client id of 3 MiB
            other = await _session(stub, cluster, "attacker-2")
            code, details = await _refusal(
                other, [pb.ClientEvent(add_ref=pb.AddRef(actor_id=aid, token="attacker-1.2"))]
            )
            assert code == grpc.StatusCode.INVALID_ARGUMENT and "'attacker-1.2' (12 characters)" in details
            claim = await _session(stub, cluster, "attacker-3")
            long_claim = pb.ClientEvent(drop_ref=pb.DropRef(actor_id=aid, token="x" * (3 * MIB)))
            code, details = await _refusal(claim, [long_claim])
            assert code == grpc.StatusCode.INVALID_ARGUMENT
            assert "DropRef.token must be a handle copy's token, <client id>.<n>" in details
            code, details = await _refusal(await _session(stub, cluster, "c" * (3 * MIB)), [])
            assert (
                code == grpc.StatusCode.INVALID_ARGUMENT and "OpenSession.client_id must be 1 to 64 letters" in details
            )
        grew = _rss(master_pid) - before
        print(f"\nthe master's RSS grew {grew / MIB:.1f} MiB")
        assert grew < 40 * MIB, f"the master grew {grew / MIB:.0f} MiB"
        assert await echo.echo(3) == 3  # the actor and its holders are as they were
        await c.kill(echo)


@pytest.mark.parametrize(
    ("token", "sender", "ok"),
    [
        ("c1.1", "c1", True),
        ("0123456789abcdef.18446744073709551615", "0123456789abcdef", True),
        ("a.b.7", "a.b", True),  # a client id may hold dots: the counter is what follows the last
        ("c1.1", "", True),  # a claim names another client's copy
        ("c2.1", "c1", False),
        ("c1.", "c1", False),
        ("c1.x", "c1", False),
        ("c1.1" + "0" * 20, "c1", False),
        ("c" * 65 + ".1", "", False),
        ("c1.1\n", "", False),
        ("", "", False),
    ],
)
def test_the_token_form(token: str, sender: str, ok: bool) -> None:
    assert (token_problem("AddRef.token", token, sender) is None) is ok


def test_the_client_id_form() -> None:
    assert client_id_problem("0123456789abcdef") is None and client_id_problem("sim-client-3") is None
    for bad in ("", "c" * 65, "a b", "a\x1b[2J"):
        problem = client_id_problem(bad)
        assert problem is not None and "\x1b" not in problem, bad


async def test_names_over_the_bound_in_raw_lookups_and_placements_are_refused_without_their_text(
    cluster: ProcCluster,
) -> None:
    """The client refuses a name over 256 characters before it is sent; a peer that skips that
    check got a 1 MB name echoed back whole (a 1.9 MB reason). The master refuses it, naming its
    length and the first characters only, and the session goes on."""
    long_name = "n" * (1 << 20)
    async with grpc.aio.insecure_channel(cluster.address, options=_OPTIONS) as channel:
        stub = pb_grpc.MasterStub(channel)
        call = await _session(stub, cluster, "namer-1")
        opened = await call.read()
        assert isinstance(opened, pb.ClientNotice) and opened.HasField("session_opened")
        await call.write(pb.ClientEvent(lookup_actor=pb.LookupActor(request_id=1, name=long_name)))
        found = await call.read()
        assert isinstance(found, pb.ClientNotice) and found.HasField("actor_found")
        assert not found.actor_found.actor_id and len(found.actor_found.reason) < 200, len(found.actor_found.reason)
        assert "at most 256 characters; got 1,048,576" in found.actor_found.reason
        await call.write(pb.ClientEvent(place_actor=pb.PlaceActor(request_id=2, name=long_name)))
        failed = await call.read()
        assert isinstance(failed, pb.ClientNotice) and failed.HasField("placement_failed")
        assert len(failed.placement_failed.reason) < 200 and "PlaceActor.name" in failed.placement_failed.reason
        # the session goes on: a short name is looked up as usual
        await call.write(pb.ClientEvent(lookup_actor=pb.LookupActor(request_id=3, name="nobody")))
        again = await call.read()
        assert isinstance(again, pb.ClientNotice) and "no live actor is named 'nobody'" in again.actor_found.reason
        await call.done_writing()
