"""Refused RPCs are logged rarely, short and escaped: a peer that sends garbage cannot flood a
daemon's log or write control characters into it."""

from __future__ import annotations

import asyncio

import grpc
import pytest

from actorrt.transport import rpc as _rpc
from tests.conftest import ProcCluster


def _ident(b: bytes) -> bytes:
    """A gRPC (de)serializer for raw bytes."""
    return b


async def test_refusals_are_logged_rarely_short_and_escaped(cluster: ProcCluster) -> None:
    """300 refused RPCs whose method paths carry ~7 KB with terminal escapes leave at most the
    rate limit's lines in the master's log, each short, with the escapes escaped."""
    log_path = cluster.home / "proc-0.log"
    before = log_path.stat().st_size
    path = "/actorrt.v1.Master/\x1b[2J\x1b]0;owned\x07" + "A" * 7000
    options = [("grpc.max_send_message_length", -1)]
    async with grpc.aio.insecure_channel(cluster.address, options=options) as channel:
        for _ in range(300):
            with pytest.raises(grpc.aio.AioRpcError) as info:
                await channel.unary_unary(path, request_serializer=_ident, response_deserializer=_ident)(
                    b"", timeout=10
                )
            assert info.value.code() == grpc.StatusCode.UNAUTHENTICATED
    await asyncio.sleep(0.5)
    with open(log_path, "rb") as f:
        f.seek(before)
        new = f.read()
    refusals = [line for line in new.splitlines() if b"refused" in line]
    assert 1 <= len(refusals) <= _rpc.REFUSALS_LOGGED_PER_MIN, refusals[:3]
    assert len(new) < 10_000, f"{len(new)} bytes of log for 300 refusals"
    assert b"\x1b" not in new and b"\x07" not in new
    assert all(len(line) < 600 for line in refusals)
    assert b"\\x1b[2J" in refusals[0] and b"more characters" in refusals[0]


def test_the_refusal_log_counts_what_it_suppressed(caplog: pytest.LogCaptureFixture) -> None:
    now = [0.0]
    limited = _rpc.RateLimitedLog(burst=2, period_s=60, clock=lambda: now[0])
    with caplog.at_level("WARNING", logger="actorrt"):
        assert [limited.warning("refused %s", i) for i in range(5)] == [True, True, False, False, False]
        now[0] = 61
        assert limited.warning("refused %s", 5)
    assert [r.getMessage() for r in caplog.records] == [
        "refused 0",
        "refused 1",
        "refused 5 (3 similar lines suppressed before this one)",
    ]
