"""Large buffers through /dev/shm: both ways, writable, and never a file left behind."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

import actorrt
from actorrt.transport import shm as _shm
from tests.conftest import ProcCluster, shm_files_left, wait_until

pytestmark = pytest.mark.skipif(not _shm.available(), reason="no writable /dev/shm")
MIB = 2**20


@pytest.fixture
def no_shm_leak() -> Iterator[None]:
    before = set(os.listdir(_shm.SHM_DIR))
    yield
    assert wait_until(lambda: not shm_files_left(before), 10), f"leaked shared-memory files: {shm_files_left(before)}"


@actorrt.remote_class
class Store:
    def __init__(self) -> None:
        self.kept: np.ndarray | None = None

    def bump(self, x: np.ndarray) -> np.ndarray:
        x[0] += 1  # arrives writable
        return x

    def keep(self, x: np.ndarray) -> int:
        self.kept = x
        return int(x.nbytes)

    def kept_sum(self) -> int:
        assert self.kept is not None
        return int(self.kept.sum())

    def make(self, n: int) -> np.ndarray:
        return np.ones(n, dtype=np.uint8)

    def make_after(self, n: int, s: float) -> np.ndarray:
        time.sleep(s)
        return np.ones(n, dtype=np.uint8)

    def fail_with(self, x: np.ndarray) -> None:
        raise ValueError(f"no thanks ({x.nbytes} bytes)")

    def sleep(self, s: float) -> None:
        time.sleep(s)

    def pid(self) -> int:
        return os.getpid()

    def die(self) -> None:
        os._exit(3)


# ---- the module alone -------------------------------------------------------------------------


def test_written_files_are_private_and_foreign_names_refused() -> None:
    name = _shm.write(memoryview(b"x" * 100))
    path = Path(_shm.SHM_DIR) / name
    try:
        assert path.stat().st_mode & 0o777 == 0o600
    finally:
        _shm.unlink([name])
    assert not path.exists()
    with pytest.raises(ValueError):
        _shm.map_pooled("../../etc/passwd", 10, lambda n: None)


def test_probe_is_checked_by_content_and_name() -> None:
    probe = _shm.make_probe()
    assert probe is not None
    try:
        assert _shm.check_probe(probe)
    finally:
        _shm.unlink([probe])
    assert not _shm.check_probe(probe)
    assert not _shm.check_probe("")
    assert not _shm.check_probe("/etc/passwd")
    other = _shm.write(memoryview(b"not a probe"))
    try:
        assert not _shm.check_probe(other)
    finally:
        _shm.unlink([other])


def test_pool_reuses_a_segment_once_its_receiver_lets_go() -> None:
    pool = _shm.Pool()
    released: list[str] = []
    try:
        data = np.arange(2 * MIB, dtype=np.uint8)
        name = pool.put(data.data)
        view = _shm.map_pooled(name, data.nbytes, released.append)
        arr = np.frombuffer(view, dtype=np.uint8)
        del view
        assert (arr == data).all()
        arr[0] = 42  # writable
        assert pool.put(data.data) != name  # still in use: a second segment
        assert not released
        del arr
        assert released == [name]
        pool.release(released)
        assert pool.put(data.data) == name  # reused
    finally:
        names = pool.names()
        pool.close()
    assert names and not any((Path(_shm.SHM_DIR) / n).exists() for n in names)
    with pytest.raises(OSError):
        pool.put(data.data)


# ---- on a cluster -----------------------------------------------------------------------------


async def test_large_arrays_travel_through_shared_memory_both_ways(cluster: ProcCluster, no_shm_leak: None) -> None:
    async with cluster.connect():
        s = await Store.remote()
        assert s._conn.shm, "client and host share /dev/shm here: the probe should have said so"
        x = np.arange(4 * MIB // 8, dtype=np.int64)
        y = await s.bump(x)
        assert y[0] == 1 and (y[1:] == x[1:]).all() and y.flags.writeable
        y[1] = -1  # the value we got is ours
        assert await s.keep(np.ones(3 * MIB, dtype=np.uint8)) == 3 * MIB
        assert await s.kept_sum() == 3 * MIB  # the actor kept a mapped array alive past the call
        many = await asyncio.gather(*(s.make(2 * MIB) for _ in range(20)))
        assert all(int(m.sum()) == 2 * MIB for m in many)
        small = await s.bump(np.zeros(10, dtype=np.uint8))  # below the threshold: inline
        assert small[0] == 1
        del many, y
        x = np.ones(4 * MIB, dtype=np.uint8)
        for _ in range(20):  # segments come back and are reused: the pool does not grow
            assert await s.keep(x) == 4 * MIB
            await s.make(4 * MIB)
        mine = [n for n in os.listdir(_shm.SHM_DIR) if n.startswith(f"{_shm.PREFIX}{os.getpid()}-")]
        assert len(mine) <= 6, mine
        await actorrt.kill(s)


async def test_replies_of_cancelled_calls_give_their_segments_back(cluster: ProcCluster, no_shm_leak: None) -> None:
    """A reply nobody waited for any more (a timeout, a cancel) was never mapped, so its segment
    was never named back: the host kept it busy and made a new one for each, until the stream
    ended (a long-lived actor and a caller with timeouts filled /dev/shm)."""
    async with cluster.connect():
        s = await Store.remote()
        host = await s.pid()
        for _ in range(6):
            with pytest.raises(TimeoutError):
                await asyncio.wait_for(s.make_after(4 * MIB, 0.2), 0.02)
            await s.sleep(0.3)  # its reply has come (calls are answered in order)
        segments = [n for n in os.listdir(_shm.SHM_DIR) if n.startswith(f"{_shm.PREFIX}{host}-")]
        assert len(segments) <= 2, segments  # the one reply segment, reused (6 without the fix)
        assert int((await s.make(4 * MIB)).sum()) == 4 * MIB
        await actorrt.kill(s)


async def test_failed_calls_leave_no_file(cluster: ProcCluster, no_shm_leak: None) -> None:
    async with cluster.connect(max_payload_mb=2) as c:
        s = await Store.remote()
        with pytest.raises(actorrt.RemoteError, match="no thanks"):
            await s.fail_with(np.ones(2 * MIB - 4096, dtype=np.uint8))
        with pytest.raises(actorrt.SerializationError, match="over the limit"):
            s.keep(np.ones(3 * MIB, dtype=np.uint8))
        with pytest.raises(actorrt.RemoteError, match="over the limit"):
            await s.make(3 * MIB)
        assert await s.keep(np.ones(MIB, dtype=np.uint8)) == MIB
        await c.kill(s)


ATTEMPTS = 20


async def test_an_actor_dying_with_large_calls_in_flight_leaves_no_file(
    cluster: ProcCluster, no_shm_leak: None
) -> None:
    async with cluster.connect():
        s = await Store.remote()
        blocked = s.sleep(5.0)
        queued = [s.keep(np.ones(2 * MIB, dtype=np.uint8)) for _ in range(5)]
        await asyncio.sleep(0.3)
        await actorrt.kill(s)
        for fut in [blocked, *queued]:
            with pytest.raises(actorrt.ActorDiedError):
                await fut

        # While the host sleeps, make() and die() queue up and reach it in one batch. make()'s
        # reply is written to /dev/shm, but the host exits before the batch's replies leave (a
        # batch's replies leave early only when its calls took over 2 ms, hence the warm-up and
        # the retries: on an idle 2-core machine about one try in three sees it): its daemon
        # removes the file.
        for _ in range(ATTEMPTS):
            s = await Store.remote()
            await s.make(_shm.THRESHOLD)  # the host's pool has a segment to reuse
            busy = s.sleep(0.3)
            made, died = s.make(_shm.THRESHOLD), s.die()
            await busy
            with pytest.raises(actorrt.ActorDiedError):
                await died
            try:
                await made
            except actorrt.ActorDiedError:
                break
        else:
            pytest.fail(f"make()'s reply left before the host died, {ATTEMPTS} times")


_CLIENT = """
import sys, time, numpy as np, actorrt
from tests.transport.test_shm import Store

async def main():
    async with actorrt.connect(sys.argv[1], token=sys.argv[2]):
        s = await Store.remote()
        for _ in range(3):
            await s.keep(np.ones(2 * 2**20, dtype=np.uint8))
        print("sent", flush=True)
        time.sleep(60)

actorrt.run(main())
"""


def test_a_client_killed_with_segments_out_leaves_no_file(cluster: ProcCluster, no_shm_leak: None) -> None:
    import subprocess
    import sys

    proc = subprocess.Popen(
        [sys.executable, "-c", _CLIENT, cluster.address, cluster.token],
        stdout=subprocess.PIPE,
        cwd=Path(__file__).resolve().parents[2],
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == b"sent"
        pid = proc.pid
        assert any(n.startswith(f"{_shm.PREFIX}{pid}-") for n in os.listdir(_shm.SHM_DIR))
    finally:
        proc.kill()
        proc.wait()
    # The host unlinks the segments of its client when the stream breaks; the actor goes after
    # the client grace period.
    assert wait_until(lambda: not cluster.status()["actors"], 20)


async def test_an_embedded_cluster_closing_with_segments_out_leaves_no_file(no_shm_leak: None) -> None:
    async with actorrt.connect(num_cpus=1):
        s = await Store.remote()
        held = await s.make(2 * MIB)  # a host segment still mapped here when the cluster closes
        assert await s.keep(np.ones(2 * MIB, dtype=np.uint8)) == 2 * MIB  # and one of ours there
    assert int(held.sum()) == 2 * MIB  # our map outlives the files


async def test_a_worker_daemon_killed_with_segments_out_leaves_no_file(tmp_path: Path, no_shm_leak: None) -> None:
    import signal

    c = ProcCluster(tmp_path / "home").start(workers=1)
    try:
        async with c.connect():
            s = await Store.remote()
            held = await s.make(2 * MIB)  # a host segment mapped here
            host_pid = await s.pid()
            c.procs[1].send_signal(signal.SIGKILL)  # the worker daemon: its host exits on stdin EOF
            c.procs[1].wait()
            assert wait_until(lambda: not Path(f"/proc/{host_pid}").exists(), 10)
            assert int(held.sum()) == 2 * MIB
    finally:
        c.stop()


def test_exchange_releases_on_the_loop_and_leaves_nothing_when_closed() -> None:
    """One stream's shared memory alone: segments we map are named back from any thread, via the
    loop; closing unlinks our pool and the peer's segments we saw."""
    import asyncio
    import threading

    from actorrt.v1.common_pb2 import SharedBuffer

    async def main() -> None:
        sent: list[str] = []
        peer = _shm.Pool()
        name = peer.put(np.ones(MIB, np.uint8).data)
        ours = _shm.Exchange(asyncio.get_running_loop(), sent.append)
        own = ours.pool.put(np.zeros(MIB, np.uint8).data)
        ours.saw([SharedBuffer(index=0, name=name, size=MIB)])
        threading.Thread(target=ours.on_release, args=(name,)).start()
        for _ in range(100):
            if sent:
                break
            await asyncio.sleep(0.01)
        assert sent == [name]
        ours.peer_released([own])  # the peer let go of ours: reusable, still there
        assert (Path(_shm.SHM_DIR) / own).exists()
        ours.close()
        assert not (Path(_shm.SHM_DIR) / own).exists() and not (Path(_shm.SHM_DIR) / name).exists()
        ours.on_release("ignored-after-close")
        await asyncio.sleep(0.01)
        assert sent == [name]
        peer.close()

    asyncio.run(main())


_QUEUEING_CLIENT = """
import sys, time, numpy as np, actorrt
@actorrt.remote_class
class Slow:
    def nap(self, s):
        time.sleep(s)
    def take(self, x):
        return x.nbytes
with actorrt.connect(sys.argv[1], token=sys.argv[2]) as c:
    s = Slow.remote().result()
    s.nap(3)  # the host reads nothing more while this runs
    pending = [s.take(np.ones(4 << 20, dtype=np.uint8)) for _ in range(48)]
    time.sleep(0.5)
    print("queued", flush=True)
    time.sleep(60)
"""


@pytest.mark.timeout(90)
def test_a_client_killed_with_large_calls_queued_leaves_no_shared_memory(cluster: ProcCluster, tmp_path: Path) -> None:
    """48 calls of 4 MiB each are written into the client's /dev/shm segments, most never read by
    the busy host; the client is SIGKILLed. Its segments are gone within seconds of the host
    seeing its stream end (they stayed forever before)."""
    import signal
    import subprocess
    import sys
    import time

    from tests.conftest import wait_until

    script = tmp_path / "client.py"
    script.write_text(_QUEUEING_CLIENT)
    proc = subprocess.Popen(
        [sys.executable, str(script), cluster.address, cluster.token], stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "queued"

        def files() -> list[Path]:
            return list(Path("/dev/shm").glob(f"actorrt-{proc.pid}-*"))

        assert len(files()) >= 40, "the client should have its calls' segments written"
        killed = time.monotonic()
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        assert wait_until(lambda: not files(), 20), f"{len(files())} segments of the dead client left"
        print(f"segments gone {time.monotonic() - killed:.1f}s after the kill")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_probe_owner_and_alive_tell_a_dead_client_from_a_live_one() -> None:
    import subprocess
    import sys

    from actorrt.transport import shm as _shm

    probe = _shm.make_probe()
    assert probe is not None
    try:
        assert _shm.probe_owner(probe) == os.getpid()
    finally:
        _shm.unlink([probe])
    other = _shm.write(memoryview(b"actorrt shared memory probe pid:[1]"))  # another pid namespace
    try:
        assert _shm.check_probe(other) and _shm.probe_owner(other) is None
    finally:
        _shm.unlink([other])
    assert _shm.alive(os.getpid())
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    from tests.conftest import wait_until

    assert wait_until(lambda: not _shm.alive(child.pid), 10)  # a zombie is gone already
    child.wait()
    assert not _shm.alive(child.pid)
