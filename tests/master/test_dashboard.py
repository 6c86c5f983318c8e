"""``actorrt start --dashboard-port``: the JSON, and the page in a real headless chromium."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import socket
import struct
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest

import actorrt
from actorrt.master.dashboard import CONNECTION_S, MAX_CONNECTIONS, Sightings
from actorrt.master.dashboard_logs import DEFAULT_LINES, MAX_LINES, LogGate, LogRequest, log_json, parse_log_request
from actorrt.master.load_history import LoadHistory
from actorrt.master.records import Actor, NodeLoad
from actorrt.master.table import ClusterTable
from actorrt.transport import rpc as _rpc
from actorrt.v1 import common_pb2, master_pb2, master_pb2_grpc
from tests.cdp import Chromium, chromium_path
from tests.conftest import ProcCluster, free_port, wait_until


@actorrt.remote_class
class Ticker:
    def __init__(self) -> None:
        self.ticks = 0

    def tick(self) -> int:
        self.ticks += 1
        return self.ticks


@pytest.fixture(scope="module")
def dashboard(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ProcCluster, str]]:
    port = free_port()
    c = ProcCluster(tmp_path_factory.mktemp("actorrt-home")).start(master_args=("--dashboard-port", str(port)))
    try:
        yield c, f"http://127.0.0.1:{port}"
    finally:
        c.stop()


def _get(url: str, **headers: str) -> tuple[int, dict[str, str], bytes]:
    request = urllib.request.Request(url, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=10) as r:
            return r.status, dict(r.headers), r.read()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read()


def _status(url: str) -> dict[str, Any]:
    code, _, body = _get(url + "/api/status")
    assert code == 200
    data: dict[str, Any] = json.loads(body)
    return data


def test_api_status_has_nodes_actors_deaths_and_notes(
    dashboard: tuple[ProcCluster, str],
) -> None:
    cluster, url = dashboard
    st = _status(url)
    assert st["address"] == cluster.address and st["slots"] == {"total": 2, "used": 0, "free": 2}
    assert len(st["nodes"]) == 2
    for node in st["nodes"]:
        assert node["cpus_free"] == 1 and node["memory_bytes"] > 0 and node["actors_rss_bytes"] == 0
    assert "calls/s" in st["notes"]["calls_per_s"]

    with cluster.connect():
        t = Ticker.remote().result()
        assert t.tick().result() == 1
        assert wait_until(lambda: len(_status(url)["actors"]) == 1, 10)
        assert wait_until(lambda: int(_status(url)["actors"][0]["rss_bytes"]) > 0, 10)  # after a heartbeat
        row = _status(url)["actors"][0]
        assert row["actor_id"] == t.actor_id and row["class_name"] == "Ticker"
        assert row["age_s"] is not None and 0 <= row["age_s"] < 60
        assert row["calls_per_s"] >= 0 and row["cpu_percent"] >= 0  # measured by its daemon
        assert [c["actors"] for c in _status(url)["clients"]] == [1]
        node = next(n for n in _status(url)["nodes"] if n["worker_id"] == row["worker_id"])
        assert node["cpus_used"] == 1 and node["cpus_free"] == 0 and node["actors_rss_bytes"] > 0
        actorrt.kill(t).result()

    assert wait_until(lambda: bool(_status(url)["deaths"]), 5)  # the JSON is at most a second old
    deaths = _status(url)["deaths"]
    assert deaths[0]["actor_id"] == t.actor_id and deaths[0]["cause"] == "killed by actorrt.kill()"
    assert deaths[0]["class_name"] == "Ticker" and deaths[0]["ago_s"] is not None


def test_only_get_on_known_paths_and_loopback_names(dashboard: tuple[ProcCluster, str]) -> None:
    _, url = dashboard
    code, headers, body = _get(url + "/")
    assert code == 200 and headers["Content-Type"].startswith("text/html") and b"/dashboard.js" in body
    assert "script-src 'self'" in headers["Content-Security-Policy"]
    assert _get(url + "/dashboard.js")[0] == 200 and _get(url + "/dashboard.css")[0] == 200
    assert _get(url + "/nothing")[0] == 404
    # A page elsewhere that rebinds its own name to 127.0.0.1 sends its own name as Host.
    assert _get(url + "/api/status", Host="attacker.example")[0] == 421
    assert _get(url + "/api/status", Host="localhost:1")[0] == 200
    post = urllib.request.Request(url + "/api/status", data=b"x", method="POST")
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(post, timeout=10)
    assert refused.value.code == 405


def test_sightings_date_actors_and_deaths_once() -> None:
    table = ClusterTable()
    seen = Sightings(deaths_kept=2)
    actor = Actor("a1", "w1", 0, "e", "c1", "Ticker", 1, ())
    table.actors["a1"] = actor
    seen.sample(table, 100.0)
    seen.sample(table, 105.0)
    assert seen.first_seen == {"a1": 100.0}
    del table.actors["a1"]
    for n, actor_id in enumerate(["a1", "a2", "a3"]):
        table.record_death(Actor(actor_id, "w1", 0, "e", "c1", "Ticker", 1, ()), "killed")
        seen.sample(table, 110.0 + n)
    assert seen.first_seen == {} and dict(seen.died_at) == {"a2": 111.0, "a3": 112.0}  # at most 2 kept


@pytest.mark.skipif(
    chromium_path() is None,
    reason="Debian's chromium is not installed (apt-get install chromium; .ci/run installs it)",
)
def test_the_page_shows_an_actor_come_and_go_in_a_real_browser(
    dashboard: tuple[ProcCluster, str], tmp_path: Path
) -> None:
    cluster, url = dashboard
    with Chromium(tmp_path / "chromium") as browser:
        page = browser.page()
        page.navigate(url + "/")
        assert page.wait_for("document.querySelectorAll('#nodes tr[data-worker-id]').length") == 2
        assert page.evaluate("document.getElementById('address').textContent") == cluster.address
        page.evaluate("window.loadedOnce = true")  # gone if the page reloaded: it must refresh itself
        actor_rows = "[...document.querySelectorAll('#actors tr[data-actor-id]')].map(r => r.dataset.actorId)"
        with cluster.connect():
            t = Ticker.remote().result()
            assert page.wait_for(f"{actor_rows}.includes('{t.actor_id}')")
            cells = page.evaluate(
                f"[...document.querySelector('#actors tr[data-actor-id=\"{t.actor_id}\"]').cells].map(c => c.textContent)"
            )
            assert cells[1] == "Ticker" and cells[9] == "1"  # the driver holds it
            assert "measured by each worker daemon" in page.evaluate("document.getElementById('notes').textContent")
            page.screenshot(tmp_path / "dashboard.png", 1280, 900)
            actorrt.kill(t).result()
            page.wait_for(f"!{actor_rows}.includes('{t.actor_id}')")
            death = page.wait_for(f"document.querySelector('#deaths tr[data-actor-id=\"{t.actor_id}\"]')?.textContent")
            assert "killed by actorrt.kill()" in death and "Ticker" in death
        assert page.evaluate("window.loadedOnce") is True
    png = (tmp_path / "dashboard.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and struct.unpack("!II", png[16:24]) == (1280, 900)


# ---- live load, history, actors' output ---------------------------------------------------------


@actorrt.remote_class
class Chatty:
    def work(self, n: int) -> int:
        """Spins 10 ms (CPU time), then says so."""
        started = time.perf_counter()
        while time.perf_counter() - started < 0.01:
            pass
        print(f"step {n} done", flush=True)
        return n

    def say(self, count: int, text: str = "line") -> None:
        for n in range(1, count + 1):
            print(f"{text} {n}", flush=True)


@contextlib.contextmanager
def _kept_busy(actor: Any) -> Iterator[None]:
    """``actor.work`` called back to back on a thread while the block runs."""
    stop = threading.Event()

    def loop() -> None:
        n = 0
        while not stop.is_set():
            actor.work(n).result(30)
            n += 1

    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(30)


def _cells(page: Any, selector: str) -> list[str]:
    cells: list[str] = page.evaluate(
        f"[...(document.querySelector('{selector}')?.cells ?? [])].map(c => c.textContent)"
    )
    return cells


def _number(text: str) -> float:
    """The number a cell starts with ("12.5%", "3.20", "512 MiB / 15.6 GiB")."""
    return float(text.split()[0].rstrip("%") or 0)


@pytest.mark.skipif(chromium_path() is None, reason="Debian's chromium is not installed")
def test_the_page_shows_live_load_its_history_and_a_clicked_actors_output(
    dashboard: tuple[ProcCluster, str], tmp_path: Path
) -> None:
    """A busy actor's CPU % and calls/s, its node's CPU % and memory in use, the history line,
    and (a click on the actor) its last printed lines: in the JSON and on the page."""
    cluster, url = dashboard
    with cluster.connect(), Chromium(tmp_path / "chromium") as browser:
        busy = Chatty.remote().result()
        idle = Chatty.remote().result()
        idle.say(3, "idle").result()
        page = browser.page()
        page.navigate(url + "/")
        with _kept_busy(busy):
            row = f'#actors tr[data-actor-id="{busy.actor_id}"]'
            # actor: 0 id, 1 class, 2 name, 3 node, 4 age, 5 CPU, 6 calls/s, 7 memory
            assert page.wait_for(
                f"(c => c && parseFloat(c[5].textContent) > 0 && parseFloat(c[6].textContent) > 0)"
                f"(document.querySelector('{row}')?.cells)"
            )
            st = _status(url)
            actor = next(a for a in st["actors"] if a["actor_id"] == busy.actor_id)
            assert actor["cpu_percent"] > 0 and actor["calls_per_s"] > 0, actor
            node = next(n for n in st["nodes"] if n["worker_id"] == actor["worker_id"])
            assert node["cpu_percent"] > 0 and int(node["memory_used_bytes"]) > 0, node
            assert node["calls_per_s"] >= actor["calls_per_s"] and st["cluster"]["calls_per_s"] > 0
            # node: 6 CPU, 8 memory used / node memory
            cells = _cells(page, f'#nodes tr[data-worker-id="{actor["worker_id"]}"]')
            assert _number(cells[6]) > 0 and _number(cells[8]) > 0, cells
            assert cells[8].split(" / ")[1].endswith(("MiB", "GiB")), cells

            # the history: one point per 10 s; wait for one whose period saw the calls
            assert wait_until(lambda: any(p["calls_per_s"] > 0 for p in _status(url)["history"]["points"]), 30)
            assert page.wait_for(
                "document.querySelector('#history-calls polyline').getAttribute('points').trim().split(' ').length >= 2"
                " && document.querySelector('#history-cpu polyline').getAttribute('points').trim().split(' ').length >= 2",
                timeout=30,
            )

            # a click on the actor shows its last lines
            assert page.evaluate("document.getElementById('log-box').hidden") is True
            page.evaluate(f"document.querySelector('{row}').cells[1].click()")
            shown = page.wait_for("(t => t.includes(' done') && t)(document.getElementById('log-text').textContent)")
            last = [line for line in shown.splitlines() if line.startswith("step ")]
            assert last and all(line.endswith(" done") for line in last), shown
            assert busy.actor_id in page.evaluate("document.getElementById('log-title').textContent")
            page.screenshot(tmp_path / "dashboard.png", 1280, 900)
        # another click: the idle one's three lines, all of them
        page.evaluate(f"document.querySelector('#actors tr[data-actor-id=\"{idle.actor_id}\"]').click()")
        assert page.wait_for("document.getElementById('log-text').textContent") and page.wait_for(
            "document.getElementById('log-text').textContent == 'idle 1\\nidle 2\\nidle 3'"
        )
        assert "all 3 lines" in page.evaluate("document.getElementById('log-state').textContent")
        actorrt.kill(busy).result()
        actorrt.kill(idle).result()


def test_api_actor_log_returns_the_last_lines_and_refuses_bad_input(dashboard: tuple[ProcCluster, str]) -> None:
    cluster, url = dashboard
    with cluster.connect():
        chatty = Chatty.remote().result()
        chatty.say(50).result()
        log = f"{url}/api/actors/{chatty.actor_id}/log"
        assert wait_until(lambda: len(json.loads(_get(log + "?lines=1000")[2])["lines"]) == 50, 10)
        code, headers, body = _get(log + "?lines=5")
        assert code == 200 and headers["Content-Type"] == "application/json"
        answer = json.loads(body)
        assert answer["lines"] == [f"line {n}" for n in range(46, 51)] and answer["more"] is True
        assert answer["actor_id"] == chatty.actor_id and answer["class_name"] == "Chatty" and answer["alive"]
        assert json.loads(_get(log)[2])["lines"] == [f"line {n}" for n in range(1, 51)]  # 100 by default: all
        chatty.say(1, "\x1b]0;retitled\x07<b>bold</b>").result()  # escaped text, never markup
        assert wait_until(
            lambda: json.loads(_get(log + "?lines=1")[2])["lines"] == ["\\x1b]0;retitled\\x07<b>bold</b> 1"], 10
        )
        for bad in ("?lines=0", "?lines=1001", "?lines=-1", "?lines=abc", "?lines=", "?lines=5&lines=6", "?n=5"):
            code, _, body = _get(log + bad)
            assert code == 400 and json.loads(body)["error"], (bad, code, body)
        assert "from 1 to 1000" in json.loads(_get(log + "?lines=1001")[2])["error"]
        code, _, body = _get(f"{url}/api/actors/{'0' * 16}/log")
        assert code == 404 and "no actor" in json.loads(body)["error"]
        assert _get(f"{url}/api/actors/{'x' * 65}/log")[0] == 400
        assert _get(f"{url}/api/actors/a%2F..%2Fb/log")[0] == 400
        actorrt.kill(chatty).result()
        # a dead actor's log is still there
        assert wait_until(lambda: json.loads(_get(log + "?lines=2")[2]).get("alive") is False, 10)
        # one reader asking too often: refused with a wait, not served
        codes = [_get(log + "?lines=1") for _ in range(30)]
        refused = [(code, headers) for code, headers, _ in codes if code != 200]
        assert refused and all(code == 429 and int(headers["Retry-After"]) >= 1 for code, headers in refused)


def test_no_dashboard_logs_turns_actor_output_off(tmp_path: Path) -> None:
    port = free_port()
    cluster = ProcCluster(tmp_path / "home").start(
        workers=0, master_args=("--dashboard-port", str(port), "--no-dashboard-logs")
    )
    try:
        url = f"http://127.0.0.1:{port}"
        assert _status(url)["actor_logs"] is False
        code, _, body = _get(f"{url}/api/actors/{'0' * 16}/log?lines=5")
        assert code == 403 and "--no-dashboard-logs" in json.loads(body)["error"]
    finally:
        cluster.stop()


def test_a_heartbeat_sets_its_nodes_and_actors_load() -> None:
    table = ClusterTable()
    worker = table.workers.join(node="n1", node_ip="127.0.0.1", cpus=2, gpus=0).worker_id
    for actor_id in ("a1", "a2"):
        actor = Actor(actor_id, worker, 0, "e", "c1", "Ticker", 1, ())
        table.actors[actor_id] = actor
        table.workers[worker].actors.add(actor_id)
    table.seen(worker, 0.5, {}, NodeLoad(42.04, 123, {"a1": (97.33, 12.345), "a2": (1.0, 0.5)}))
    table.seen(worker, 0.5, {}, NodeLoad(40.0, 456, {"a1": (97.33, 12.345)}))  # a2 idle: not listed
    w = table.workers[worker]
    assert (w.cpu_percent, w.memory_used_bytes, w.calls_per_s) == (40.0, 456, 12.35)
    assert (table.actors["a1"].cpu_percent, table.actors["a1"].calls_per_s) == (97.3, 12.35)
    assert (table.actors["a2"].cpu_percent, table.actors["a2"].calls_per_s) == (0.0, 0.0)
    history = LoadHistory(period_s=10, points=3)
    for t in range(0, 50):
        history.sample(table, 1000.0 + t)
    assert [p[0] for p in history.points] == [1020.0, 1030.0, 1040.0]  # the newest 3 of 10 s each
    assert all(p[1:] == pytest.approx((40.0, 12.35)) for p in history.points)  # weighted by cpus; summed


def test_log_requests_are_parsed_bounded_and_escaped() -> None:
    assert parse_log_request("/api/status", "") is None
    assert parse_log_request("/api/actors/ab12/log", "") == LogRequest("ab12", DEFAULT_LINES)
    assert parse_log_request("/api/actors/ab12/log", "lines=7") == LogRequest("ab12", 7)
    for query in ("lines=0", f"lines={MAX_LINES + 1}", "lines=9" * 3, "lines=1e3", "x=1", "lines=1&lines=2"):
        assert isinstance(parse_log_request("/api/actors/ab12/log", query), str), query
    for actor_id in ("", "a.b", "%2e%2e", "x" * 65, "a%00"):
        assert isinstance(parse_log_request(f"/api/actors/{actor_id}/log", ""), str), actor_id
    tail = master_pb2.GetActorLogResponse(
        actor_id="ab12", class_name="C", alive=True, data=b"tail of a cut line\nb\x1b[2J\nc\n", truncated=True
    )
    assert log_json(tail, 5)["lines"] == ["b\\x1b[2J", "c"] and log_json(tail, 5)["more"] is True
    whole = master_pb2.GetActorLogResponse(actor_id="ab12", data=b"a\nb\nc")
    assert log_json(whole, 2)["lines"] == ["b", "c"] and log_json(whole, 3) == {**log_json(whole, 3), "more": False}
    assert len(log_json(master_pb2.GetActorLogResponse(data=b"x" * 10_000), 1)["lines"][0]) < 4200


def test_log_gate_limits_each_reader_all_readers_and_answers_at_once() -> None:
    gate = LogGate(reader_rate=(2.0, 3), overall_rate=(4.0, 5), at_once=2)
    assert gate.admit("r1", 0.0) is None and gate.admit("r1", 0.0) is None
    assert gate.admit("r1", 0.0) == (503, 1)  # two answers under way
    gate.done()
    gate.done()
    assert gate.admit("r1", 0.0) is None
    gate.done()
    assert gate.admit("r1", 0.0) == (429, 1)  # its burst of 3 is spent; 2 a second come back
    assert gate.admit("r2", 0.0) is None
    gate.done()
    assert gate.admit("r3", 0.0) is None
    gate.done()
    assert gate.admit("r4", 0.0) == (429, 1)  # all readers' burst of 5 is spent
    assert gate.admit("r1", 0.5) is None  # half a second: one more for r1 (and overall)
    gate.done()
    assert gate.in_use == 0


# ---- many actors, slow readers ------------------------------------------------------------------

SIM_CLASS = "Simulated" + "x" * 1200  # long class names: a 3 MB status without 6,700 actors


class SimCluster:
    """One simulated worker daemon of ``actors`` slots and one client that fills them, speaking
    the real WorkerSession and ClientSession protocols to the master (as bench/scale.py's
    simulated nodes do), in this process: no actor host runs."""

    def __init__(self, cluster: ProcCluster, actors: int) -> None:
        self.cluster = cluster
        self.actors = actors
        self.channel = grpc.aio.insecure_channel(cluster.address)
        self.stub = master_pb2_grpc.MasterStub(self.channel)
        self.tasks: list[asyncio.Task[None]] = []

    async def start(self) -> SimCluster:
        metadata = _rpc.auth_metadata(self.cluster.token)
        worker = self.stub.WorkerSession(metadata=metadata)
        await worker.write(
            master_pb2.WorkerEvent(
                register_worker=master_pb2.RegisterWorker(
                    version=_rpc.PROTOCOL_VERSION,
                    node="sim-node",
                    node_ip="127.0.0.1",
                    cpus=self.actors,
                    memory_bytes=64 << 30,
                    pid=os.getpid(),
                )
            )
        )
        registered = await worker.read()
        assert isinstance(registered, master_pb2.WorkerCommand) and registered.HasField("worker_registered")
        interval = registered.worker_registered.heartbeat_interval_s
        for slot in range(self.actors):
            ready = master_pb2.SlotReady(slot=slot, endpoint=f"127.0.0.1:{10000 + slot}")
            await worker.write(master_pb2.WorkerEvent(slot_ready=ready))
        self.tasks += [asyncio.create_task(self._drain(worker)), asyncio.create_task(self._beat(worker, interval))]
        client = self.stub.ClientSession(metadata=metadata)
        opening = master_pb2.OpenSession(
            version=_rpc.PROTOCOL_VERSION, client_id="sim-client", hostname="sim", mute_actor_output=True
        )
        await client.write(master_pb2.ClientEvent(open_session=opening))
        for n in range(1, self.actors + 1):
            place = master_pb2.PlaceActor(
                request_id=n, resources=common_pb2.Resources(num_cpus=1), class_name=SIM_CLASS, timeout_s=60
            )
            await client.write(master_pb2.ClientEvent(place_actor=place))
        placed = 0
        while placed < self.actors:
            notice = await client.read()
            assert isinstance(notice, master_pb2.ClientNotice), notice
            assert not notice.HasField("placement_failed"), notice
            placed += notice.HasField("actor_placed")
        self.tasks.append(asyncio.create_task(self._drain(client)))
        return self

    @staticmethod
    async def _drain(call: Any) -> None:
        with contextlib.suppress(grpc.RpcError, asyncio.CancelledError):
            while await call.read() is not grpc.aio.EOF:
                pass

    @staticmethod
    async def _beat(worker: Any, interval: float) -> None:
        while True:
            await asyncio.sleep(interval)
            await worker.write(master_pb2.WorkerEvent(heartbeat=master_pb2.Heartbeat(load=0.1)))

    async def close(self) -> None:
        for task in self.tasks:
            task.cancel()
        await self.channel.close(grace=None)


def _vm_rss(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no VmRSS for {pid}")


def _sockets(pid: int) -> int:
    """The process's open sockets."""
    count = 0
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        with contextlib.suppress(OSError):
            count += os.readlink(fd).startswith("socket:")
    return count


def _slow_reader(port: int) -> socket.socket:
    """A connection that asks for /api/status and does not read the answer (a 4 KiB receive
    buffer: the master cannot push it all into the kernel either)."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect(("127.0.0.1", port))
    sock.sendall(b"GET /api/status HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
    return sock


def _cut(sock: socket.socket, full: int) -> bool:
    """Whether the master ended ``sock`` before sending the whole answer (``full`` bytes)."""
    got = 0
    sock.settimeout(5)
    try:
        while chunk := sock.recv(1 << 20):
            got += len(chunk)
    except (ConnectionResetError, TimeoutError):
        pass
    return got < full


@pytest.mark.timeout(120)
async def test_slow_readers_of_a_large_status_hold_neither_memory_nor_connections(tmp_path: Path) -> None:
    """60 connections that asked for ~3 MB of /api/status and never read: each answer was built
    for its reader and held whole in the master until the peer left (``drain`` and
    ``wait_closed`` had no deadline): +265-341 MiB of master RSS, every connection still held
    after 20 s."""
    port = free_port()
    cluster = ProcCluster(tmp_path / "home").start(workers=0, master_args=("--dashboard-port", str(port)))
    sim = None
    try:
        sim = await SimCluster(cluster, 2000).start()
        url = f"http://127.0.0.1:{port}"
        master = cluster.procs[0].pid
        body = (await asyncio.to_thread(_get, url + "/api/status"))[2]
        assert len(body) > 3_000_000 and len(json.loads(body)["actors"]) == 2000
        # one build per period, shared: 20 readers at once see the same status (one build or two)
        answers = await asyncio.gather(*(asyncio.to_thread(_get, url + "/api/status") for _ in range(20)))
        assert len({json.loads(b)["generated_at"] for _, _, b in answers}) <= 2
        del answers
        rss0, sockets0 = _vm_rss(master), _sockets(master)
        started = time.monotonic()
        slow = [await asyncio.to_thread(_slow_reader, port) for _ in range(MAX_CONNECTIONS)]
        peak = rss0
        while time.monotonic() - started < 4:
            peak = max(peak, _vm_rss(master))
            await asyncio.sleep(0.1)
        assert _sockets(master) >= sockets0 + len(slow)  # all held, for now
        code, headers, _ = await asyncio.to_thread(_get, url + "/api/status")  # one more: busy
        assert code == 503 and headers["Retry-After"] == "2"
        while _sockets(master) > sockets0 and time.monotonic() - started < CONNECTION_S + 5:
            peak = max(peak, _vm_rss(master))
            await asyncio.sleep(0.2)
        held = _sockets(master) - sockets0
        print(
            f"\nmaster RSS {rss0 / 2**20:.0f} MiB, peak +{(peak - rss0) / 2**20:.1f} MiB with "
            f"{len(slow)} slow readers; {held} still held {time.monotonic() - started:.1f} s later"
        )
        assert held <= 0, f"{held} slow readers still held after {CONNECTION_S + 5:g} s"
        assert peak - rss0 < 50 * 2**20, f"the master grew {(peak - rss0) / 2**20:.0f} MiB"
        assert all(await asyncio.gather(*(asyncio.to_thread(_cut, s, len(body)) for s in slow)))
        for sock in slow:
            sock.close()
        code, _, again = await asyncio.to_thread(_get, url + "/api/status")
        assert code == 200 and len(json.loads(again)["actors"]) == 2000
    finally:
        if sim is not None:
            await sim.close()
        cluster.stop()
