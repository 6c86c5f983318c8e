"""Hardening of the client side: ``connect(files=...)`` (folders, symlink loops, size) and a
client that stops reading its session (the master bounds what it buffers for it)."""

from __future__ import annotations

import asyncio
import gc
import logging
import os
import re
import stat
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

import pytest

import actorrt
from actorrt.client.control import Control
from tests.conftest import ProcCluster, wait_until


def tree_of(root: str) -> dict[str, tuple[str, int, bytes]]:
    """Every entry under ``root``: relative path -> (kind, permission bits, contents)."""
    tree: dict[str, tuple[str, int, bytes]] = {}
    for folder, dirs, files in os.walk(root):
        for name in dirs:
            path = os.path.join(folder, name)
            tree[os.path.relpath(path, root)] = ("dir", os.stat(path).st_mode & 0o777, b"")
        for name in files:
            path = os.path.join(folder, name)
            with open(path, "rb") as f:
                tree[os.path.relpath(path, root)] = ("file", os.stat(path).st_mode & 0o777, f.read())
    return tree


@actorrt.remote_class
class Inspector:
    """Looks at what landed in the actor's working folder."""

    def tree(self, root: str) -> dict[str, tuple[str, int, bytes]]:
        return tree_of(root)

    def read(self, path: str) -> str:
        with open(path) as f:
            return f.read()

    def run(self, path: str) -> str:
        return subprocess.run([path], capture_output=True, text=True, check=True).stdout


# ---- connect(files=[folder]) ships the folder -------------------------------------------------


async def test_folders_ship_recursively_with_modes_and_empty_folders(
    cluster: ProcCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    some = tmp_path / "some_dir"
    (some / "nested" / "deeper").mkdir(parents=True)
    (some / "empty").mkdir()
    (some / "top.txt").write_text("top")
    (some / ".hidden").write_text("hidden")
    (some / "nested" / "n.txt").write_text("nested")
    (some / "nested" / "deeper" / "d.bin").write_bytes(bytes(range(256)))
    (some / "nested" / "private.txt").write_text("mine")
    (some / "nested" / "private.txt").chmod(0o600)
    script = some / "run.sh"
    script.write_text("#!/bin/sh\necho ran\n")
    script.chmod(0o755)
    os.symlink("..", some / "nested" / "up")  # a loop back to some_dir: skipped, not followed forever
    expected = tree_of(str(some))
    del expected[os.path.join("nested", "up")]  # os.walk lists the link without following it
    assert ("dir", 0o755, b"") == expected["empty"] and expected["run.sh"][1] == 0o755
    monkeypatch.chdir(tmp_path)

    for pattern in ["some_dir", "some_dir/", str(some)]:
        async with cluster.connect(files=[pattern]) as c:
            inspector = await Inspector.remote()
            assert await inspector.tree("some_dir") == expected, pattern
            assert await inspector.run("some_dir/run.sh") == "ran\n"
            await actorrt.kill(inspector)
        assert c.closed


async def test_files_over_the_size_limit_fail_naming_the_size(cluster: ProcCluster, tmp_path: Path) -> None:
    big = tmp_path / "big"
    big.mkdir()
    for i in range(3):
        (big / f"part{i}.bin").write_bytes(b"\0" * (700 * 1024))
    started = time.monotonic()
    with pytest.raises(ValueError, match=r"the 3 matched files add up to 2\.1 MiB, over the 1\.0 MiB"):
        async with cluster.connect(files=[str(big)], max_payload_mb=1):
            pass
    assert time.monotonic() - started < 10


async def test_the_host_refuses_shipped_entries_outside_its_folder(cluster: ProcCluster) -> None:
    """What a client sends is checked again where it is written: no entry, folder or file, lands
    outside the actor's working folder."""
    from actorrt.v1 import actor_host_pb2

    name = f"actorrt-escape-{os.getpid()}-{time.time_ns()}"
    bad = [
        actor_host_pb2.ShippedFile(path=f"../{name}", data=b"x", mode=0o644),
        actor_host_pb2.ShippedFile(path=f"../{name}", mode=stat.S_IFDIR | 0o755),
        actor_host_pb2.ShippedFile(path=f"/tmp/{name}", data=b"x", mode=0o644),
    ]
    async with cluster.connect() as c:
        for entry in bad:
            c.creator.files = [actor_host_pb2.ShippedFile(path="fine.txt", data=b"ok"), entry]
            with pytest.raises(actorrt.RemoteError, match="shipped file path must be relative and inside"):
                await Inspector.remote()
    assert not os.path.lexists(f"/tmp/{name}")


# ---- symlink loops --------------------------------------------------------------------------


async def test_files_glob_over_a_symlink_loop_ships_the_real_files(
    cluster: ProcCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = tmp_path / "data"
    (data / "sub").mkdir(parents=True)
    (data / "a.txt").write_text("alpha")
    (data / "sub" / "b.txt").write_text("beta")
    os.symlink(".", data / "loop")  # data/loop/loop/loop/... until the kernel says ELOOP
    os.symlink("a.txt", data / "alias.txt")  # a link to a file: shipped as that file's contents
    bad = tmp_path / "bad"
    bad.mkdir()
    os.symlink(".", bad / "loop")
    os.symlink("nowhere", bad / "broken")
    monkeypatch.chdir(tmp_path)

    started = time.monotonic()
    async with cluster.connect(files=["data/**"]) as c:
        assert time.monotonic() - started < 30
        inspector = await Inspector.remote()
        assert await inspector.read("data/a.txt") == "alpha"
        assert await inspector.read("data/sub/b.txt") == "beta"
        assert await inspector.read("data/alias.txt") == "alpha"
        assert sorted(await inspector.tree("data")) == ["a.txt", "alias.txt", "sub", os.path.join("sub", "b.txt")]
        await actorrt.kill(inspector)
    assert c.closed

    with pytest.raises(FileNotFoundError) as failure:
        async with cluster.connect(files=["bad/*"]):
            pass
    message = str(failure.value)
    assert message == (
        "files=: 'bad/*' matches nothing to ship, only bad/broken (a broken symlink), bad/loop (a symlink loop)"
    )


# ---- a client that stops reading its session -------------------------------------------------

STALLING_CLIENT = textwrap.dedent(
    """
    import asyncio, os, sys, threading, time
    import actorrt

    @actorrt.remote_class
    class Flood:
        def flood(self, delay, seconds, exit_code):
            time.sleep(delay)
            line = "x" * 8000
            end = time.monotonic() + seconds
            while time.monotonic() < end:
                for _ in range(60):
                    print(line)
                time.sleep(0.05)
            sys.stdout.flush()
            if exit_code:
                os._exit(exit_code)

    address, token, ready = sys.argv[1:4]
    with actorrt.connect(address, token=token) as c:
        a1 = Flood.remote().result()
        a2 = Flood.remote().result()
        waiting = Flood.remote()  # no free slot until a2 exits: placed while we do not read
        time.sleep(0.5)
        a1.flood(1.5, 30, 0)
        a2.flood(1.5, 5, 3)
        with open(ready + ".tmp", "w") as f:
            f.write(a1.actor_id + " " + a2.actor_id)
        os.rename(ready + ".tmp", ready)
        # The client stops reading its session: its loop thread blocks until the test says go.
        went = threading.Event()
        c.loop.call_soon_threadsafe(lambda: (sys.stdin.readline(), went.set()))
        went.wait()
        a3 = waiting.result(60)
        cause = asyncio.run_coroutine_threadsafe(c.death_cause(a2.actor_id, 30), c.loop).result()
        # To a file: on the stdout pipe, the output thread's long actor lines may split the line.
        with open(ready + ".result", "w") as f:
            f.write(f"RESULT placed {a3.actor_id} died {a2.actor_id} {cause!r}\\n")
        actorrt.kill(a1).result()
        actorrt.kill(a3).result()
    """
)


def rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no VmRSS for {pid}")


def test_a_client_that_stops_reading_does_not_make_the_master_grow(cluster: ProcCluster, tmp_path: Path) -> None:
    master = cluster.procs[0].pid
    script, ready = tmp_path / "stall.py", tmp_path / "ready"
    script.write_text(STALLING_CLIENT)
    client = subprocess.Popen(
        [sys.executable, str(script), cluster.address, cluster.token, str(ready)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        assert wait_until(ready.exists, 60), "the client did not start its actors"
        a1, a2 = ready.read_text().split()
        base = peak = rss_bytes(master)
        stalled_until = time.monotonic() + 12
        while time.monotonic() < stalled_until:
            peak = max(peak, rss_bytes(master))
            time.sleep(0.2)
        _, err = client.communicate(b"go\n", timeout=120)
    finally:
        if client.poll() is None:
            client.kill()
            client.wait()
    drained = rss_bytes(master)
    stderr = err.decode(errors="replace")
    assert client.returncode == 0, stderr[-3000:]
    print(
        f"master RSS: base {base / 2**20:.1f} MiB, peak +{(peak - base) / 2**20:.1f} MiB, "
        f"after the drain +{(drained - base) / 2**20:.1f} MiB"
    )
    assert peak - base < 60 * 2**20, f"the master grew by {(peak - base) / 2**20:.0f} MiB"
    assert drained - base < 60 * 2**20, f"the master kept {(drained - base) / 2**20:.0f} MiB after the drain"

    # The lines that did not fit were counted, per actor, in one notice each time ...
    dropped = re.findall(
        r"^\(Flood pid=\d+ id=(\w{8})\) \[actorrt: (\d+) lines of output dropped: the client did not keep up; "
        r"'actorrt logs (\w+)' has them\]$",
        stderr,
        re.M,
    )
    assert dropped, stderr[-3000:]
    assert {full for _, _, full in dropped} <= {a1, a2} and all(full.startswith(short) for short, _, full in dropped)
    print(f"{sum(int(n) for _, n, _ in dropped)} lines dropped and counted in {len(dropped)} notices")
    # ... and the control notices sent meanwhile (a placement, a death) all arrived.
    written = Path(f"{ready}.result").read_text()
    result = re.fullmatch(r"RESULT placed (\w+) died (\w+) '(.+)'\n", written)
    assert result is not None, written
    print(result.group(0))
    assert result.group(2) == a2 and "code 3" in result.group(3)


# ---- a bug of the client's own does not leave work waiting forever -----------------------------


@actorrt.remote_class
class Talker:
    def say(self, text: str) -> str:
        print(text, flush=True)
        return text


async def test_a_notice_the_client_fails_to_handle_does_not_stop_the_ones_after_it(
    cluster: ProcCluster, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """One notice whose handling raises (here the first line of an actor's output) is logged
    with its traceback; the session reads on, so the next placement is answered."""
    handle = Control._on_notice
    failed: list[str] = []

    def fails_once(self: Control, notice: Any) -> None:
        if not failed and notice.WhichOneof("notice") == "actor_output":
            failed.append("actor_output")
            raise RuntimeError("injected: a bug handling this notice")
        handle(self, notice)

    monkeypatch.setattr(Control, "_on_notice", fails_once)
    async with cluster.connect():
        first = await Talker.remote()
        assert await first.say("hello") == "hello"
        deadline = time.monotonic() + 30
        while not failed and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        assert failed, "the actor's output never reached the client"
        second = await asyncio.wait_for(Talker.remote(), 30)  # answered by a later notice
        assert await asyncio.wait_for(second.say("again"), 30) == "again"
        await actorrt.kill(first)
        await actorrt.kill(second)
    logged = [r for r in caplog.records if "could not handle the master's actor_output notice" in r.getMessage()]
    assert logged and logged[0].exc_info is not None and "injected" in str(logged[0].exc_info[1])


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
