"""A network partition between real separate hosts (network namespaces on this machine).

The master, two workers and a client each live in their own namespace. One worker's link is cut:
the master detects it within its worker timeout, the client's calls on that worker fail with
ActorDiedError, nothing hangs, and the other worker keeps serving. The link heals: the worker
rejoins and takes new actors.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.nethosts import NetHosts, can_create_namespaces

pytestmark = [
    pytest.mark.timeout(180),
    pytest.mark.skipif(bool(can_create_namespaces()), reason=f"no network namespaces: {can_create_namespaces()}"),
]

TOKEN = "partition-test-token"
WORKER_TIMEOUT_S = 3

DRIVER = r"""
import asyncio, json, sys, time
import actorrt

@actorrt.remote_class
class Echo:
    def echo(self, x):
        return x

def emit(**event):
    print(json.dumps({"t": time.time(), **event}), flush=True)

async def main(address):
    async with actorrt.connect(address, token=sys.argv[2], timeout=10) as cluster:
        actors = dict(zip("ab", await asyncio.gather(Echo.remote(), Echo.remote())))
        status = await cluster.status()
        where = {k: next(x["endpoint"] for x in status.actors if x["actor_id"] == a.actor_id).rsplit(":", 1)[0]
                 for k, a in actors.items()}
        emit(event="ready", where=where)
        command = asyncio.ensure_future(asyncio.to_thread(sys.stdin.readline))

        async def pound(name, actor):  # each actor on its own: one hanging must not stop the other
            i = 0
            while not command.done():
                t0 = time.time()
                try:
                    await asyncio.wait_for(actor.echo(i), 30)
                    emit(event="call", actor=name, ok=True, latency=time.time() - t0)
                except actorrt.ActorDiedError as e:
                    emit(event="call", actor=name, ok=False, error="ActorDiedError", cause=e.cause)
                    return
                except asyncio.TimeoutError:
                    emit(event="call", actor=name, ok=False, error="hang")
                i += 1
                await asyncio.sleep(0.1)

        await asyncio.gather(*[pound(name, actor) for name, actor in actors.items()])
        fresh = await asyncio.wait_for(Echo.remote(), 30)
        assert await fresh.echo(7) == 7
        status = await cluster.status()
        emit(event="placed", where=next(x["endpoint"] for x in status.actors if x["actor_id"] == fresh.actor_id)
             .rsplit(":", 1)[0], nodes=[n["node_ip"] for n in status.nodes])

actorrt.run(main(sys.argv[1]))
"""


def _status(net: NetHosts, address: str) -> dict[str, Any]:
    out = net.run(
        "client",
        [sys.executable, "-m", "actorrt", "status", "--address", address, "--token", TOKEN, "--json"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def _wait_for_slots(net: NetHosts, address: str, slots: int, log: Path) -> None:
    """Until the cluster has ``slots`` ready slots (30 s at most; then fail with ``log``'s tail)."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            if sum(n["slots_ready"] for n in _status(net, address)["nodes"]) == slots:
                return
        except AssertionError:
            pass
        time.sleep(0.3)
    pytest.fail("the cluster did not come up: " + log.read_text()[-2000:])


def test_partitioned_worker_is_detected_and_rejoins(tmp_path: Path) -> None:
    with NetHosts(["master", "w1", "w2", "client"]) as net:
        address = f"{net.ip('master')}:8010"
        env = dict(os.environ, ACTORRT_HOME=str(tmp_path / "home"), PYTHONUNBUFFERED="1")
        logs = [open(tmp_path / f"{h}.log", "wb") for h in ("master", "w1", "w2")]
        net.popen(
            "master",
            [
                sys.executable,
                "-m",
                "actorrt",
                "start",
                "--block",
                "--host",
                net.ip("master"),
                "--port",
                "8010",
                "--cpus",
                "0",
                "--token",
                TOKEN,
                "--worker-timeout",
                str(WORKER_TIMEOUT_S),
            ],
            env=env,
            stdout=logs[0],
            stderr=logs[0],
        )
        time.sleep(1.0)
        for i, w in enumerate(("w1", "w2"), start=1):
            net.popen(
                w,
                [
                    sys.executable,
                    "-m",
                    "actorrt",
                    "connect",
                    "--block",
                    "--address",
                    address,
                    "--node-ip",
                    net.ip(w),
                    "--cpus",
                    "1",
                    "--token",
                    TOKEN,
                    "--timeout",
                    "20",
                ],
                env=env,
                stdout=logs[i],
                stderr=logs[i],
            )
        _wait_for_slots(net, address, 2, tmp_path / "w1.log")

        script = tmp_path / "driver.py"
        script.write_text(DRIVER)
        driver = net.popen(
            "client",
            [sys.executable, str(script), address, TOKEN],
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert driver.stdout is not None and driver.stdin is not None
        ready = json.loads(driver.stdout.readline())
        assert ready["event"] == "ready", ready
        cut_actor = next(k for k, ip in ready["where"].items() if ip == net.ip("w1"))
        kept_actor = "b" if cut_actor == "a" else "a"

        events = driver.stdout

        def next_event() -> dict[str, Any]:
            line = events.readline()
            assert line, "the driver died"
            return json.loads(line)

        for _ in range(6):  # healthy calls first
            assert next_event()["ok"]
        net.cut("w1")
        cut_at = time.time()
        died = None
        kept_latencies = []
        while died is None:
            event = next_event()
            assert event.get("error") != "hang", event
            if event["actor"] == cut_actor and not event["ok"]:
                died = event
            elif event["actor"] == kept_actor:
                assert event["ok"], event  # the rest of the cluster keeps serving
                kept_latencies.append(event["latency"])
        detected_s = died["t"] - cut_at
        assert died["error"] == "ActorDiedError" and "node lost" in died["cause"], died
        assert detected_s < WORKER_TIMEOUT_S + 2.0, f"detected after {detected_s:.1f}s"
        assert kept_latencies and max(kept_latencies) < 1.0

        status = _status(net, address)
        assert [n["node_ip"] for n in status["nodes"]] == [net.ip("w2")]

        net.heal("w1")
        deadline = time.monotonic() + 40  # the worker notices, backs off, and registers again
        while time.monotonic() < deadline:
            nodes = _status(net, address)["nodes"]
            if len(nodes) == 2 and all(n["slots_ready"] + n["cpus_used"] == 1 for n in nodes):
                break
            time.sleep(0.5)
        else:
            pytest.fail("w1 did not rejoin: " + (tmp_path / "w1.log").read_text()[-3000:])
        rejoined_s = time.monotonic() - (deadline - 40)

        driver.stdin.write("place\n")
        driver.stdin.flush()
        event = next_event()
        while event["event"] == "call":
            assert event["ok"], event
            event = next_event()
        assert event["event"] == "placed" and event["where"] == net.ip("w1"), event  # the only free slot
        assert driver.wait(30) == 0
        print(f"partition: detected in {detected_s:.2f}s, rejoined {rejoined_s:.1f}s after healing")
        for log in logs:
            log.close()


WILDCARD_DRIVER = r"""
import asyncio, json, sys
import actorrt

@actorrt.remote_class
class Echo:
    def echo(self, x):
        return x

async def main(address):
    async with actorrt.connect(address, token=sys.argv[2], timeout=10) as cluster:
        actors = await asyncio.gather(Echo.remote(), Echo.remote())
        answers = await asyncio.wait_for(asyncio.gather(*[a.echo(i) for i, a in enumerate(actors)]), 30)
        status = await cluster.status()
        hosts = sorted(x["endpoint"].rsplit(":", 1)[0] for x in status.actors)
        print(json.dumps({"answers": answers, "hosts": hosts}), flush=True)

actorrt.run(main(sys.argv[1]))
"""


def test_a_head_on_a_wildcard_address_and_a_worker_without_node_ip_advertise_addresses_others_reach(
    tmp_path: Path,
) -> None:
    """README's recipe, `actorrt start --host 0.0.0.0` on the head and `actorrt connect --address
    HEAD:PORT` elsewhere: the head's own worker advertised 127.0.0.1 (a client on another machine
    reached its own loopback), and a worker joining without --node-ip did too. The head now
    advertises its interface's address, a joining worker the address it reaches the master from."""
    with NetHosts(["master", "w1", "client"]) as net:
        address = f"{net.ip('master')}:8010"
        env = dict(os.environ, ACTORRT_HOME=str(tmp_path / "home"), PYTHONUNBUFFERED="1")
        logs = [open(tmp_path / f"{h}.log", "wb") for h in ("master", "w1")]
        actorrt_cli = [sys.executable, "-m", "actorrt"]
        net.popen(
            "master",
            [*actorrt_cli, "start", "--block", "--host", "0.0.0.0", "--port", "8010", "--cpus", "1", "--token", TOKEN],
            env=env,
            stdout=logs[0],
            stderr=logs[0],
        )
        time.sleep(1.0)
        net.popen(
            "w1",
            [*actorrt_cli, "connect", "--block", "--address", address, "--cpus", "1", "--token", TOKEN],
            env=env,
            stdout=logs[1],
            stderr=logs[1],
        )
        _wait_for_slots(net, address, 2, tmp_path / "master.log")
        nodes = sorted(n["node_ip"] for n in _status(net, address)["nodes"])
        assert nodes == sorted([net.ip("master"), net.ip("w1")])
        script = tmp_path / "driver.py"
        script.write_text(WILDCARD_DRIVER)
        out = net.run(
            "client", [sys.executable, str(script), address, TOKEN], env=env, capture_output=True, text=True, timeout=90
        )
        assert out.returncode == 0, out.stderr[-3000:]
        result = json.loads(out.stdout.strip().splitlines()[-1])
        assert result == {"answers": [0, 1], "hosts": nodes}
        for log in logs:
            log.close()
