"""Hardening of the worker daemon, with real processes: actor output of any shape, a worker
refused by its master, memory limits over an actor's process tree, slot folders of a killed
daemon, placement on warm hosts that just died, and a worker that joins a busy cluster.

Every test starts its own master and worker daemons (real CLI processes on 127.0.0.1) and stops
them by PID; the leak checks of ``conftest`` apply.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import actorrt
from actorrt.worker import output as worker_output
from tests.conftest import ProcCluster, host_pids, wait_until

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def one_worker(tmp_path: Path) -> Iterator[ProcCluster]:
    c = ProcCluster(tmp_path / "home").start(workers=1, cpus_per_worker=2)
    yield c
    c.stop()


def _rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


# ---- 1. actor output of any shape never blocks the actor -------------------------------------


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


# ---- 17. a worker that joins a busy cluster stays up ---------------------------------------------


@actorrt.remote_class
class Echo:
    def echo(self, x: int) -> int:
        return x

    def pid(self) -> int:
        return os.getpid()


def test_a_worker_joining_a_busy_cluster_stays_up(tmp_path: Path) -> None:
    cluster = ProcCluster(tmp_path / "home").start(workers=1, cpus_per_worker=1)
    try:
        with cluster.connect(log_to_driver=False) as c:
            first = Echo.remote().result(30)
            waiting = [Echo.remote() for _ in range(3)]  # queued: no free slot
            assert wait_until(lambda: c.status().result(10).placements_waiting == 3, 10)
            timeout_s = 2
            joined = cluster.spawn(
                "connect",
                "--address",
                cluster.address,
                "--cpus",
                "3",
                "--token",
                cluster.token,
                "--timeout",
                str(timeout_s),
            )
            actors = [f.result(30) for f in waiting]  # placed while the new worker's hosts warm up
            time.sleep(2 * timeout_s + 1.5)  # past the old readiness deadline
            assert joined.poll() is None, (cluster.home / "proc-2.log").read_text()
            assert [a.echo(i).result(10) for i, a in enumerate([first, *actors])] == [0, 1, 2, 3]
            status = c.status().result(10)
            assert len(status.nodes) == 2 and len(status.actors) == 4
            for a in [first, *actors]:
                actorrt.kill(a).result(15)
    finally:
        cluster.stop()


# ---- 5. a worker refused by its (restarted) master stops its hosts and exits ----------------------


async def test_a_worker_refused_by_a_restarted_master_stops_its_hosts_and_exits(tmp_path: Path) -> None:
    cluster = ProcCluster(tmp_path / "home").start(workers=1, cpus_per_worker=2)
    checked = False
    try:
        worker = cluster.procs[1]
        async with cluster.connect(log_to_driver=False) as c:
            a = await Echo.remote()
            host = await a.pid()
            endpoint = (await c.status()).actors[0]["endpoint"]
            hosts = {pid for pid, ppid in host_pids().items() if ppid == worker.pid}
            assert host in hosts and len(hosts) == 2
            master = cluster.procs[0]
            master.kill()
            master.wait()
            port = cluster.address.rsplit(":", 1)[1]
            cluster.spawn(
                "start",
                "--port",
                port,
                "--cpus",
                "0",
                "--token",
                "a-new-token-" + "x" * 20,
                "--worker-timeout",
                "3",
                "--client-grace",
                "2",
            )
            t0 = time.monotonic()
            returncode = await asyncio.to_thread(worker.wait, 20)
            exited_s = time.monotonic() - t0
            log_text = (cluster.home / "proc-1.log").read_text()
            print(f"\nrefused worker: exited {exited_s:.3f}s after the new master started (code {returncode})")
            assert returncode != 0, log_text
            assert re.search(r"refused.*stopping this worker and its 2 actor hosts", log_text), log_text
            assert "actorrt connect: " in log_text and "refused" in log_text.rsplit("actorrt connect: ", 1)[1]
            assert not hosts & set(host_pids())
            with pytest.raises(actorrt.ActorRTError):
                await asyncio.wait_for(a.echo(1), 10)
            ip, host_port = endpoint.rsplit(":", 1)
            with pytest.raises(OSError):
                await asyncio.wait_for(asyncio.open_connection(ip, int(host_port)), 5)
            checked = True
    except actorrt.ActorRTError:
        assert checked  # only closing the client against the new master (which refuses it) may complain
    finally:
        cluster.stop()


# ---- 9. max_memory_mb counts the actor's child processes -----------------------------------------


@actorrt.remote_class
class Parent:
    def start_hog(self, mb: int) -> int:
        """A child process that holds ``mb`` MiB, touched, and then sleeps; its pid."""
        code = f"import time; b = bytearray({mb} * 2**20); b[::4096] = b'x' * len(b[::4096]); time.sleep(600)"
        return subprocess.Popen([sys.executable, "-c", code]).pid

    def echo(self, x: int) -> int:
        return x


def _gone(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] == "Z"
    except OSError:
        return True


async def test_memory_limit_counts_the_actors_children(one_worker: ProcCluster) -> None:
    async with one_worker.connect(log_to_driver=False) as c:
        a = await Parent.options(max_memory_mb=200).remote()
        child = await a.start_hog(400)
        t0 = time.monotonic()
        over = r"memory limit exceeded: \d+ MB used, max_memory_mb=200 \(over the actor's 2 processes\)"
        with pytest.raises(actorrt.ActorDiedError, match=over) as info:
            while time.monotonic() - t0 < 20:
                await a.echo(1)
                await asyncio.sleep(0.1)
        stopped_s = time.monotonic() - t0
        print(f"\nchild over the limit: actor stopped {stopped_s:.3f}s after the child started: {info.value}")
        assert time.monotonic() - t0 < 10
        assert wait_until(lambda: _gone(child), 5), "the child outlived its actor"
        assert await asyncio.wait_for(_slots_free(c), 10)


@actorrt.remote_class
class Forker:
    def fork_sharing(self, mb: int, children: int) -> list[int]:
        """Hold ``mb`` MiB, touched, then fork ``children`` processes that share it (copy on
        write, never written) and sleep; their pids."""
        self.block = bytearray(mb * 2**20)
        self.block[::4096] = b"x" * len(self.block[::4096])
        ctx = multiprocessing.get_context("fork")
        self.children = [ctx.Process(target=time.sleep, args=(600,), daemon=True) for _ in range(children)]
        for child in self.children:
            child.start()
        return [child.pid for child in self.children if child.pid is not None]

    def echo(self, x: int) -> int:
        return x


async def test_memory_shared_copy_on_write_by_an_actors_children_counts_once(one_worker: ProcCluster) -> None:
    """max_memory_mb added the RSS of the actor's processes: 150 MiB that the actor's three
    forked children share with it (never written) counted four times, 600 MiB against a limit
    of 350, and the actor was killed. The limit is judged on the proportional set size."""
    async with one_worker.connect(log_to_driver=False) as c:
        a = await Forker.options(max_memory_mb=350).remote()
        children = await a.fork_sharing(150, 3)
        assert len(children) == 3
        await asyncio.sleep(2.0)  # ten checks of the limit
        assert await a.echo(1) == 1, "killed for memory its children share"
        rss = next(int(x["rss_bytes"]) for x in (await c.status()).actors if x["actor_id"] == a.actor_id)
        print(f"\nRSS over the actor's 4 processes: {rss / 2**20:.0f} MiB (limit 350 MiB): alive")
        assert rss > 350 * 2**20  # the RSS alone would have been over it
        await c.kill(a)
        assert wait_until(lambda: all(_gone(pid) for pid in children), 10)


async def _slots_free(c: actorrt.Cluster) -> bool:
    while (await c.status()).slots_used:
        await asyncio.sleep(0.05)
    return True


# ---- 12. a SIGKILLed worker daemon's slot folders are removed ------------------------------------


@actorrt.remote_class
class FileReader:
    def read(self, path: str) -> str:
        with open(path) as f:
            return f.read()

    def pid(self) -> int:
        return os.getpid()


async def test_a_killed_daemons_slot_folders_are_removed_by_the_next_daemon(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "secret.txt").write_text("shipped")
    monkeypatch.chdir(tmp_path)
    # The daemons' folders in a temp dir of this test's own: a daemon that another test starts
    # meanwhile (the other pytest worker's) would remove the killed one's folders from /tmp too.
    (tmp_path / "tmp").mkdir()
    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))
    cluster = ProcCluster(tmp_path / "home").start(workers=1, cpus_per_worker=2)
    try:
        daemon = cluster.procs[1]
        async with cluster.connect(log_to_driver=False, files=["data/*.txt"]):
            a = await FileReader.remote()
            assert await a.read("data/secret.txt") == "shipped"
            host = await a.pid()
            hosts = {pid for pid, ppid in host_pids().items() if ppid == daemon.pid}
            folders = {Path(os.readlink(f"/proc/{pid}/cwd")) for pid in hosts}
            assert len(folders) == 2 and all(f.is_dir() and tmp_path / "tmp" in f.parents for f in folders)
            assert (Path(os.readlink(f"/proc/{host}/cwd")) / "data" / "secret.txt").exists()
            daemon.kill()
            daemon.wait()
            assert wait_until(lambda: not hosts & set(host_pids()), 10)
            assert all(f.is_dir() for f in folders)  # nobody cleaned up after the SIGKILL...
            t0 = time.monotonic()
            await asyncio.to_thread(
                cluster.spawn, "connect", "--address", cluster.address, "--cpus", "1", "--token", cluster.token
            )
            assert wait_until(lambda: not any(f.exists() for f in folders), 10), folders  # ...until now
            print(f"\nkilled daemon's slot folders removed {time.monotonic() - t0:.3f}s after a new daemon started")
            newcomer = {pid for pid, ppid in host_pids().items() if ppid == cluster.procs[-1].pid}
            assert newcomer and all(Path(os.readlink(f"/proc/{pid}/cwd")).is_dir() for pid in newcomer)
            with pytest.raises(actorrt.ActorDiedError):
                await asyncio.wait_for(a.read("data/secret.txt"), 10)
    finally:
        cluster.stop()


# ---- 16. placement on a warm host that just died is retried ---------------------------------------


def test_table_a_lost_slot_is_not_placed_on_until_it_is_ready_again() -> None:
    from actorrt.master.records import Request
    from actorrt.master.table import ClusterTable

    t = ClusterTable()
    w = t.workers.join(node="n1", node_ip="127.0.0.1", cpus=2, gpus=0)
    t.clients.open("c1", "host", 1)
    t.slot_ready(w.worker_id, 0, "127.0.0.1:9000")
    t.slot_ready(w.worker_id, 1, "127.0.0.1:9001")
    assert t.workers.lost(w.worker_id, 0) and not t.workers.lost(w.worker_id, 0)  # the second: not listed
    assert not t.workers.lost("no-such-worker", 1)
    p = t.request(Request("c1", 1))
    assert p is not None and p.slot == 1 and p.endpoint == "127.0.0.1:9001"
    assert t.request(Request("c1", 2)) is None  # one cpu free, but no live host: it waits
    assert t.workers.lost(w.worker_id, 1) is False and len(t.queue) == 1
    placed = t.slot_ready(w.worker_id, 0, "127.0.0.1:9100")  # the respawned host
    assert [(x.request.request_id, x.slot, x.endpoint) for x in placed] == [(2, 0, "127.0.0.1:9100")]


def _worker_hosts(cluster: ProcCluster) -> set[int]:
    daemons = {p.pid for p in cluster.procs[1:]}
    return {pid for pid, ppid in host_pids().items() if ppid in daemons}


async def test_placement_right_after_the_warm_hosts_died_is_retried(tmp_path: Path) -> None:
    cluster = ProcCluster(tmp_path / "home").start(workers=2, cpus_per_worker=2)
    try:
        async with cluster.connect(log_to_driver=False):
            took = []
            for round_ in range(6):
                assert await asyncio.to_thread(wait_until, lambda: len(_worker_hosts(cluster)) == 4, 15)
                for pid in _worker_hosts(cluster):
                    os.kill(pid, signal.SIGKILL)
                t0 = time.monotonic()
                # a named, restartable one too: its name must be free again for the next attempt
                named = Echo.options(name=f"echo-{round_}", max_restarts=1)
                actors = await asyncio.wait_for(asyncio.gather(named.remote(), Echo.remote()), 30)
                took.append(time.monotonic() - t0)
                assert [await a.echo(round_) for a in actors] == [round_, round_]
                for a in actors:
                    await actorrt.kill(a)
            print(
                f"\nplacement after SIGKILL of every warm host: 2 actors each round in max {max(took):.3f}s "
                f"(rounds: {', '.join(f'{x:.2f}' for x in took)})"
            )
        master_log = (cluster.home / "proc-0.log").read_text()
        assert re.search(r"the warm host of slot \d exited \(killed by signal 9", master_log)  # SlotLost arrived
    finally:
        cluster.stop()


@actorrt.remote_class
class Fails:
    def __init__(self, counter: str, how: str) -> None:
        with open(counter, "a") as f:
            f.write("ran\n")
        if how == "raise":
            raise ValueError("bad config")
        os._exit(3)  # the host dies while constructing


async def test_a_constructor_that_ran_is_never_placed_again(one_worker: ProcCluster, tmp_path: Path) -> None:
    async with one_worker.connect(log_to_driver=False):
        raised, died = tmp_path / "raised", tmp_path / "died"
        with pytest.raises(actorrt.RemoteError, match="bad config"):
            await asyncio.wait_for(Fails.remote(str(raised), "raise"), 30)
        with pytest.raises(actorrt.ActorDiedError):
            await asyncio.wait_for(Fails.remote(str(died), "exit"), 30)
        assert raised.read_text() == "ran\n" and died.read_text() == "ran\n"


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


SLOW_PRELOAD = """
import fcntl, os, time
_lock = open(os.environ["SLOW_PRELOAD_LOCK"], "a")
try:
    fcntl.flock(_lock, fcntl.LOCK_EX | fcntl.LOCK_NB)  # the first host to get here starts at once
except OSError:
    time.sleep(60)  # the others take longer than the worker's start timeout
"""


def test_a_worker_whose_hosts_start_slowly_serves_with_those_that_started(tmp_path: Path) -> None:
    cluster = ProcCluster(tmp_path / "home").start(workers=0)
    try:
        (tmp_path / "slow_preload.py").write_text(SLOW_PRELOAD)
        cluster.env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(tmp_path), cluster.env.get("PYTHONPATH")]))
        cluster.env["SLOW_PRELOAD_LOCK"] = str(tmp_path / "lock")
        # Hosts started each as a new interpreter, each importing the preload: a fork server
        # would import it once, and its hosts would all start at once.
        cluster.env["ACTORRT_FORK_SERVER"] = "0"
        timeout_s = 2
        worker = cluster.spawn(
            "connect",
            "--address",
            cluster.address,
            "--cpus",
            "2",
            "--token",
            cluster.token,
            "--timeout",
            str(timeout_s),
            "--preload",
            "slow_preload",
        )
        log_text = (cluster.home / "proc-1.log").read_text()
        assert worker.poll() is None, log_text
        assert "1 of 2 actor hosts did not start in time; serving with the others meanwhile" in log_text
        with cluster.connect(log_to_driver=False):
            a = Echo.remote().result(30)
            assert a.echo(7).result(10) == 7
            actorrt.kill(a).result(15)
    finally:
        cluster.stop()


# ---- what an actor started ends with its daemon; hosts that print before they are ready ------


@actorrt.remote_class
class Spawner:
    def start_sleeper(self) -> int:
        """A child process of the actor's (as a multiprocessing pool or a Popen would be)."""
        return subprocess.Popen(["sleep", "300"]).pid


@pytest.mark.parametrize("how", ["SIGTERM", "SIGKILL"])
async def test_the_children_of_actors_end_with_their_daemon(tmp_path: Path, how: str) -> None:
    """A daemon stopping (SIGTERM: ``actorrt stop``, a refusal, a closing embedded cluster)
    cancelled the tasks that would have ended each actor's process group; one SIGKILLed left
    its hosts to exit alone. Either way what the actors had started ran on, orphaned (code
    sent under a token the master may have revoked)."""
    cluster = ProcCluster(tmp_path / "home").start(workers=1, cpus_per_worker=1)
    children: list[int] = []
    try:
        daemon = cluster.procs[1]
        async with cluster.connect(log_to_driver=False):
            s = await Spawner.remote()
            children.append(await s.start_sleeper())
            assert not _gone(children[0])
            daemon.send_signal(getattr(signal, how))
            await asyncio.to_thread(daemon.wait, 20)
            assert wait_until(lambda: _gone(children[0]), 10), f"the actor's child {children[0]} outlived its daemon"
    except actorrt.ActorRTError:
        pass  # closing the client after its actor's node went may complain
    finally:
        for pid in children:
            if not _gone(pid):
                os.kill(pid, signal.SIGKILL)
        cluster.stop()


async def test_hosts_that_print_before_their_ready_line_still_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Hosts started as new interpreters (ACTORRT_FORK_SERVER=0, or after the fork server
    failed) whose preloaded module printed on import (a banner) failed to start: the banner was
    read as their ready line, and every slot retried every 5 s, forever."""
    banner = "print('Hello from the noisy banner')\nprint('second line')\nprint('=' * 100_000)  # a progress bar\n"
    (tmp_path / "noisy_banner.py").write_text(banner)
    monkeypatch.setenv("ACTORRT_FORK_SERVER", "0")
    monkeypatch.setenv("PYTHONPATH", f"{tmp_path}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    cluster = ProcCluster(tmp_path / "home").start(
        workers=1, cpus_per_worker=1, worker_args=("--preload", "noisy_banner")
    )
    try:
        async with cluster.connect(log_to_driver=False, placement_timeout=30) as c:
            e = await Echo.remote()
            assert await e.echo(5) == 5
            await c.kill(e)
        log_text = (cluster.home / "proc-1.log").read_text()
        assert "printed before it was ready: Hello from the noisy banner" in log_text, log_text[-2000:]
        assert "printed a line over 64 KiB before it was ready" in log_text
    finally:
        cluster.stop()


@actorrt.remote_class
class Orphaner:
    def orphan(self, n: int) -> list[int]:
        """``n`` processes whose parent ends at once (each is re-parented to the PID namespace's
        init) and that end 3 s later; their pids as the namespace sees them."""
        out = [
            subprocess.run(["sh", "-c", "sleep 3 >/dev/null 2>&1 & echo $!"], check=True, capture_output=True)
            for _ in range(n)
        ]
        return [int(p.stdout) for p in out]

    def parents(self, pids: list[int]) -> list[int]:
        return [int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1]) for pid in pids]

    def gone(self, pids: list[int]) -> bool:
        """Whether none of ``pids`` exists any more, not even as a zombie (it was reaped)."""
        return not any(Path(f"/proc/{pid}").exists() for pid in pids)


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("unshare"), reason="needs root and unshare(1)")
def test_a_daemon_that_is_pid_1_reaps_the_orphans_of_its_actors(tmp_path: Path) -> None:
    """A worker daemon that is a container's entry point (our Dockerfile's, in a Kubernetes pod)
    is PID 1: what an actor started and left (a simulator launched through a shell) is
    re-parented to it, and stayed a zombie once it ended, one more per launch. Here the daemon
    runs as PID 1 of a PID namespace of its own."""
    cluster = ProcCluster(tmp_path / "home").start(workers=0)
    # Its own home: inside its namespace the daemon's pid, which it records, is 1.
    env = dict(cluster.env, ACTORRT_HOME=str(tmp_path / "ns-home"))
    argv = ["unshare", "--pid", "--fork", "--mount-proc", "--kill-child", sys.executable, "-m", "actorrt"]
    argv += ["connect", "--address", cluster.address, "--token", cluster.token, "--cpus", "1", "--block"]
    with open(tmp_path / "ns-worker.log", "wb") as out:
        unshare = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, env=env)
    daemon = 0
    try:
        assert wait_until(lambda: bool(_children(unshare.pid)), 10)
        daemon = _children(unshare.pid)[0]
        with cluster.connect(log_to_driver=False, placement_timeout=60):
            a = Orphaner.remote().result(60)
            orphans = a.orphan(5).result(30)
            assert a.parents(orphans).result(10) == [1] * 5  # re-parented to the daemon
            assert wait_until(lambda: a.gone(orphans).result(10), 10), a.parents(orphans).result(10)
            actorrt.kill(a).result(15)
        assert "running as PID 1" in (tmp_path / "ns-worker.log").read_text()
    finally:
        if daemon:
            os.kill(daemon, signal.SIGTERM)
        try:
            unshare.wait(15)
        except subprocess.TimeoutExpired:
            unshare.kill()  # --kill-child: the daemon goes too
            unshare.wait()
        cluster.stop()


def _children(pid: int) -> list[int]:
    try:
        return [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


@actorrt.remote_class
class Quitter:
    def quit_saying(self, n: int) -> None:
        sys.exit("why " * n)


async def test_a_huge_sys_exit_message_keeps_the_exit_cause(one_worker: ProcCluster) -> None:
    """The cause of a ``sys.exit(<message>)`` travels to the daemon as one line of a pipe read
    64 KiB at most: a longer message broke that reader and the cause became "exited with code 1"."""
    async with one_worker.connect(log_to_driver=False):
        q = await Quitter.remote()
        with pytest.raises(
            actorrt.ActorDiedError,
            match=r"Quitter.quit_saying called sys.exit\('why why .*\.\.\. \(80002 characters\)\): the actor exited with code 1",
        ):
            await q.quit_saying(20_000)


def test_a_daemon_removes_only_the_folders_of_dead_daemons_of_its_own_pid_namespace(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A daemon in a pid namespace of its own (a container sharing the temp dir; the PID-1 test
    above in CI) saw the other daemons' pids as dead and removed their hosts' folders: every
    host of theirs then failed to start. Owner files now name their pid namespace."""
    from actorrt.worker import procs as _host_procs

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    mine = Path(_host_procs.make_workdirs())
    assert len(mine.joinpath("owner").read_text().split()) == 3
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    here = os.readlink("/proc/self/ns/pid")
    folders = {}
    for name, owner in {
        "dead-here": f"{dead.pid} 123 {here}",
        "dead-before-namespaces-were-named": f"{dead.pid} 123",
        "elsewhere": f"{dead.pid} 123 pid:[1]",
    }.items():
        folders[name] = tmp_path / f"actorrt-worker-{name}"
        folders[name].mkdir()
        (folders[name] / "owner").write_text(owner + "\n")
    removed = _host_procs.remove_dead_workdirs()
    assert sorted(Path(p).name for p in removed) == [
        "actorrt-worker-dead-before-namespaces-were-named",
        "actorrt-worker-dead-here",
    ]
    assert folders["elsewhere"].exists() and mine.exists()
