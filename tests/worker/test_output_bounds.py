"""Actor output of any shape never blocks an actor or its calls, and what the daemon keeps and
forwards of it stays bounded: huge lines, binary, no newline, floods, log answers."""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import actorrt
from actorrt.worker import output as worker_output
from tests.conftest import ProcCluster, wait_until

pytestmark = pytest.mark.timeout(120)


def _rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


@actorrt.remote_class
class Noisy:
    def __init__(self) -> None:
        self.flooding: threading.Thread | None = None
        self.written = 0

    def echo(self, x: int) -> int:
        return x

    def long_line(self, nbytes: int) -> int:
        print("L" * nbytes, flush=True)
        return nbytes

    def no_newline(self, nbytes: int) -> int:
        chunk = b"N" * 2**20
        for _ in range(nbytes // len(chunk)):
            sys.stdout.buffer.write(chunk)
        sys.stdout.buffer.flush()
        return nbytes

    def newline(self) -> None:
        print(flush=True)

    def binary(self, nbytes: int) -> int:
        sys.stdout.buffer.write(os.urandom(nbytes))
        sys.stdout.buffer.flush()
        sys.stderr.buffer.write(os.urandom(nbytes) + b"\n")
        sys.stderr.buffer.flush()
        return nbytes

    def start_flood(self, seconds: float) -> None:
        """Write short lines as fast as one thread can, for ``seconds``, beside the calls."""
        block = (("f" * 99 + "\n") * 10_000).encode()

        def flood() -> None:
            end = time.monotonic() + seconds
            while time.monotonic() < end:
                sys.stdout.buffer.write(block)
                self.written += len(block)
            sys.stdout.buffer.flush()

        self.flooding = threading.Thread(target=flood)
        self.flooding.start()

    def flood_done(self) -> int:
        assert self.flooding is not None
        self.flooding.join()
        return self.written


def _actor_log(cluster: ProcCluster, actor_id: str) -> str:
    return (cluster.home / "logs" / "actors" / f"{actor_id}.log").read_text(errors="replace")


async def test_huge_lines_binary_and_no_newline_never_block_the_actor(
    one_worker: ProcCluster, capsys: pytest.CaptureFixture[str]
) -> None:
    async with one_worker.connect():
        a = await Noisy.remote()
        t0 = time.monotonic()
        assert await asyncio.wait_for(a.long_line(2**20), 15) == 2**20
        assert await asyncio.wait_for(a.echo(1), 15) == 1
        line_s = time.monotonic() - t0
        t0 = time.monotonic()
        assert await asyncio.wait_for(a.no_newline(10 * 2**20), 15) == 10 * 2**20
        assert await asyncio.wait_for(a.echo(2), 15) == 2
        no_newline_s = time.monotonic() - t0
        await asyncio.wait_for(a.newline(), 15)
        t0 = time.monotonic()
        assert await asyncio.wait_for(a.binary(2**20), 15) == 2**20
        assert await asyncio.wait_for(a.echo(3), 15) == 3
        binary_s = time.monotonic() - t0
        timings = (
            f"\n1 MiB line: answered in {line_s:.3f}s; 10 MB with no newline: {no_newline_s:.3f}s; "
            f"1 MiB binary on stdout and stderr: {binary_s:.3f}s"
        )
        cap = worker_output.MAX_LINE_BYTES

        def capped() -> bool:
            text = _actor_log(one_worker, a.actor_id)
            return f"[... {2**20 - cap} more bytes]" in text and f"[... {10 * 2**20 - cap} more bytes]" in text

        assert wait_until(capped, 10), _actor_log(one_worker, a.actor_id)[-300:]
        text = _actor_log(one_worker, a.actor_id)
        assert "L" * cap + f" [... {2**20 - cap} more bytes]" in text  # the kept part is whole
        await asyncio.sleep(0.5)  # forwarded lines travel worker -> master -> this client
        forwarded = capsys.readouterr().out
        assert re.search(rf"\(Noisy pid=\d+ id={a.actor_id[:8]}\) L+ \[\.\.\. \d+ more characters\]", forwarded)
        assert await a.echo(4) == 4
        await actorrt.kill(a)
        with capsys.disabled():
            print(timings)


async def test_an_output_flood_never_blocks_calls(one_worker: ProcCluster) -> None:
    async with one_worker.connect(log_to_driver=False):
        a = await Noisy.remote()
        daemon = one_worker.procs[1].pid
        rss_before = _rss_kib(daemon)
        await a.start_flood(2.0)
        latencies = []
        t_end = time.monotonic() + 2.0
        while time.monotonic() < t_end:
            t0 = time.monotonic()
            assert await asyncio.wait_for(a.echo(5), 10) == 5
            latencies.append(time.monotonic() - t0)
            await asyncio.sleep(0.05)
        written = await asyncio.wait_for(a.flood_done(), 30)
        rss_after = _rss_kib(daemon)
        print(
            f"\nflood: actor wrote {written / 2**20 / 2.0:.0f} MiB/s for 2 s; calls answered in "
            f"max {max(latencies):.3f}s (median {sorted(latencies)[len(latencies) // 2]:.3f}s) over "
            f"{len(latencies)} calls; daemon RSS {rss_before // 1024} -> {rss_after // 1024} MiB"
        )
        assert max(latencies) < 2.0
        assert written > 30 * 2**20  # the pipe kept draining, in chunks (line by line it drained ~8 MiB/s)
        assert rss_after - rss_before < 200 * 1024
        assert await a.echo(6) == 6
        await actorrt.kill(a)


def test_line_splitter_caps_lines_and_keeps_memory_bounded() -> None:
    split = worker_output.LineSplitter(max_bytes=8)
    assert split.feed(b"short\nlonger than eight") == ["short"]
    assert split.feed(b" bytes" * 1000) == []  # counted, not kept
    assert split.feed(b"\n\xff\xfe\n") == ["longer t [... 6009 more bytes]", "\ufffd\ufffd"]
    assert split.feed(b"tail") == [] and split.finish() == ["tail"] and split.finish() == []


def test_forwarded_output_messages_stay_small(tmp_path: Path) -> None:
    from actorrt.v1 import master_pb2 as pb

    sent: list[pb.ActorOutput] = []

    async def long_lines() -> None:
        out = worker_output.OutputRelay(sent.append, tmp_path)
        out.lines("a1", "C", 7, ["x" * worker_output.MAX_LINE_BYTES] * 400, stderr=False)
        out.lines("a1", "C", 7, ["\u00e9\u20ac" * worker_output.MAX_LINE_BYTES] * 400, stderr=False)  # 2-3 bytes each
        out.close()

    asyncio.run(long_lines())
    sizes = [m.ByteSize() for m in sent]
    assert sum(len(m.lines) for m in sent) == 800
    assert max(sizes) < worker_output.FORWARD_MAX_BYTES + 4 * worker_output.FORWARD_MAX_LINE + 1024, sizes


async def test_a_log_answer_stays_under_the_message_cap(one_worker: ProcCluster) -> None:
    """``actorrt logs --tail`` of any size: the worker answers at most MAX_LOG_ANSWER_BYTES (the
    master takes messages of 4 MiB at most), and its session survives."""
    async with one_worker.connect(log_to_driver=False) as c:
        a = await Noisy.remote()
        for _ in range(6):
            await a.long_line(2**20)  # 64 KiB kept of each
        for _ in range(100):
            await a.long_line(60_000)  # ~6 MB in all
        out = await asyncio.to_thread(
            subprocess.run,
            [
                sys.executable,
                "-m",
                "actorrt",
                "logs",
                a.actor_id,
                "--tail",
                str(64 * 2**20),
                "--address",
                one_worker.address,
                "--token",
                one_worker.token,
            ],
            capture_output=True,
            timeout=60,
        )
        assert out.returncode == 0, out.stderr
        answered = len(out.stdout)
        assert 2**20 < answered <= worker_output.MAX_LOG_ANSWER_BYTES
        assert out.stdout.endswith(b"L" * 60_000 + b"\n")
        assert await a.echo(1) == 1
        s = await c.status()
        assert len(s.nodes) == 1 and s.nodes[0]["connected"]
        await actorrt.kill(a)
