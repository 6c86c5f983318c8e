"""``actorrt start --dashboard-port``: the JSON, and the page in a real headless chromium."""

from __future__ import annotations

import json
import struct
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import actorrt
from actorrt.master.dashboard import Sightings
from actorrt.master.records import Actor
from actorrt.master.table import ClusterTable
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


def test_api_status_has_nodes_actors_deaths_and_says_what_it_does_not_know(
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
        assert row["calls_per_s"] is None  # not known to the master: said, not faked
        assert [c["actors"] for c in _status(url)["clients"]] == [1]
        node = next(n for n in _status(url)["nodes"] if n["worker_id"] == row["worker_id"])
        assert node["cpus_used"] == 1 and node["cpus_free"] == 0 and node["actors_rss_bytes"] > 0
        actorrt.kill(t).result()

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
            assert cells[1] == "Ticker" and cells[7] == "n/a" and cells[8] == "1"  # the driver holds it
            assert page.evaluate("document.getElementById('notes').textContent").count("not known to the master")
            page.screenshot(tmp_path / "dashboard.png", 1280, 900)
            actorrt.kill(t).result()
            page.wait_for(f"!{actor_rows}.includes('{t.actor_id}')")
            death = page.wait_for(f"document.querySelector('#deaths tr[data-actor-id=\"{t.actor_id}\"]')?.textContent")
            assert "killed by actorrt.kill()" in death and "Ticker" in death
        assert page.evaluate("window.loadedOnce") is True
    png = (tmp_path / "dashboard.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and struct.unpack("!II", png[16:24]) == (1280, 900)
