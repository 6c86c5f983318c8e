"""Actor output on the owning client's terminal, per-actor log files, ``actorrt logs``,
``actorrt status`` (table, --json, --watch) and the daemons' structured log lines."""

from __future__ import annotations

import asyncio
import io
import json
import logging
import os
import re
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from actorrt.client import output as client_output
from actorrt.common import logs as _logs
from actorrt.v1 import master_pb2 as pb
from actorrt.worker import output as worker_output
from tests.conftest import ProcCluster, actorrt_cli, wait_until

SCRIPT = textwrap.dedent(
    """
    import sys, time
    import actorrt

    @actorrt.remote_class
    class Talker:
        def __init__(self):
            print("constructed")

        def say(self, x):
            print("hello", x)
            print("warning", x, file=sys.stderr)
            return x

        def burst(self, n):
            for i in range(n):
                print("line", i)

    address = sys.argv[1] or None
    token = sys.argv[2] or None
    log_to_driver = sys.argv[3] == "1"
    with actorrt.connect(address, token=token, log_to_driver=log_to_driver, num_cpus=1) as c:
        t = Talker.remote().result()
        t.say(1).result()
        print("ACTOR", t.actor_id, flush=True)
        time.sleep(1.0)  # the lines travel asynchronously (worker -> master -> client)
    """
)


def run_script(tmp_path: Path, address: str, token: str, log_to_driver: bool) -> subprocess.CompletedProcess[str]:
    path = tmp_path / "talk.py"
    path.write_text(SCRIPT)
    return subprocess.run(
        [sys.executable, str(path), address, token, "1" if log_to_driver else "0"],
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_actor_output_reaches_the_owning_client(cluster: ProcCluster, tmp_path: Path) -> None:
    out = run_script(tmp_path, cluster.address, cluster.token, True)
    assert out.returncode == 0, out.stderr
    found = re.search(r"ACTOR (\w+)", out.stdout)
    assert found is not None, out.stdout
    actor_id = found.group(1)
    label = re.escape(f" id={actor_id[:8]})")
    assert re.search(r"^\(Talker pid=\d+" + label + " constructed$", out.stdout, re.M), out.stdout
    assert re.search(r"^\(Talker pid=\d+" + label + " hello 1$", out.stdout, re.M), out.stdout
    assert re.search(r"^\(Talker pid=\d+" + label + " warning 1$", out.stderr, re.M), out.stderr

    # ... and the worker kept it in the actor's log file, which `actorrt logs` reads (dead now)
    def logged() -> bool:
        got = actorrt_cli("logs", actor_id[:10], "--address", cluster.address, "--token", cluster.token)
        return got.returncode == 0 and "dead" in got.stderr

    assert wait_until(logged, 10)
    got = actorrt_cli("logs", actor_id, "--address", cluster.address, "--token", cluster.token)
    assert got.stdout.splitlines() == ["constructed", "hello 1", "warning 1"]
    assert f"== actor {actor_id} (Talker)" in got.stderr and "dead" in got.stderr


def test_log_to_driver_false_keeps_the_terminal_quiet(cluster: ProcCluster, tmp_path: Path) -> None:
    out = run_script(tmp_path, cluster.address, cluster.token, False)
    assert out.returncode == 0, out.stderr
    assert "hello" not in out.stdout and "warning" not in out.stderr and "(Talker" not in out.stdout + out.stderr
    found = re.search(r"ACTOR (\w+)", out.stdout)
    assert found is not None, out.stdout
    actor_id = found.group(1)
    got = actorrt_cli("logs", actor_id, "--address", cluster.address, "--token", cluster.token)
    assert got.returncode == 0 and "hello 1" in got.stdout  # still in its log file


def test_embedded_cluster_prints_each_line_once(tmp_path: Path, fresh_home: Path) -> None:
    out = run_script(tmp_path, "", "", True)
    assert out.returncode == 0, out.stderr
    assert len(re.findall(r"^\(Talker pid=\d+ id=\w{8}\) hello 1$", out.stdout, re.M)) == 1, out.stdout
    quiet = run_script(tmp_path, "", "", False)
    assert quiet.returncode == 0 and "hello" not in quiet.stdout and "(Talker" not in quiet.stderr


async def test_logs_of_a_live_actor_and_bad_ids(cluster: ProcCluster) -> None:
    import actorrt

    @actorrt.remote_class
    class Chatty:
        def say(self, text: str) -> None:
            print(text)

    async with cluster.connect(log_to_driver=False):
        a = await Chatty.remote()
        await a.say("first line")
        cli = ["--address", cluster.address, "--token", cluster.token]

        def has_line() -> bool:
            got = actorrt_cli("logs", a.actor_id, *cli)
            return got.returncode == 0 and got.stdout == "first line\n"

        assert await asyncio.to_thread(wait_until, has_line, 30)  # each try starts the CLI: ~2 s on a loaded machine
        got = await asyncio.to_thread(actorrt_cli, "logs", a.actor_id, *cli)
        assert "alive" in got.stderr
        missing = await asyncio.to_thread(actorrt_cli, "logs", "ffffffffffff", *cli)
        assert missing.returncode == 1 and "no actor 'ffffffffffff'" in missing.stderr
        assert missing.stderr.strip().count("\n") == 0 and "Traceback" not in missing.stderr
        await actorrt.kill(a)


# ---- the pieces, without processes ---------------------------------------------------------------


def test_log_files_rotate_and_the_tail_spans_rotations(tmp_path: Path) -> None:
    async def write() -> None:
        out = worker_output.OutputRelay(lambda msg: None, tmp_path, max_bytes=1000, backups=2, forward=False)
        for i in range(400):
            out.line("a1", "C", 1, f"line {i:04d}", stderr=False)
        out.actor_ended("a1")

    asyncio.run(write())
    files = sorted(p.name for p in tmp_path.iterdir())
    assert files == ["a1.log", "a1.log.1", "a1.log.2"]
    found, data, truncated = worker_output.read_log_tail(tmp_path, "a1", 100_000)
    lines = data.decode().splitlines()
    assert found and not truncated and lines[0] != "line 0000"  # the oldest rotated away; the rest is whole
    assert lines[-1] == "line 0399" and lines == [f"line {i:04d}" for i in range(400 - len(lines), 400)]
    found, data, truncated = worker_output.read_log_tail(tmp_path, "a1", 30)
    assert truncated and data.decode().endswith("line 0399\n") and len(data) == 30
    assert worker_output.read_log_tail(tmp_path, "nope") == (False, b"", False)


def test_pruning_never_removes_a_live_actors_log_of_another_daemon(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every worker daemon of an ACTORRT_HOME (embedded clusters too) keeps its actors' logs in
    one folder, and each prunes it to the newest MAX_ACTOR_LOGS: it kept only its own live
    actors' logs, so a quiet actor of a long-running daemon lost its log (`actorrt logs` said it
    printed nothing) once other daemons' actors had written enough newer ones. A live actor's
    log is held (flock) by its daemon, and no prune removes a held one. (Two relays here, as two
    daemons: flock locks conflict between file descriptions, in one process as in two.)"""
    monkeypatch.setattr(worker_output, "MAX_ACTOR_LOGS", 3)

    async def run() -> None:
        quiet_daemon = worker_output.OutputRelay(lambda msg: None, tmp_path, forward=False)
        busy_daemon = worker_output.OutputRelay(lambda msg: None, tmp_path, forward=False)
        quiet_daemon.line("quiet", "C", 1, "hello", stderr=False)
        os.utime(tmp_path / "quiet.log", (1, 1))  # the oldest file there
        for i in range(6):
            busy_daemon.line(f"busy{i}", "C", 1, "x", stderr=False)
            busy_daemon.actor_ended(f"busy{i}")
        assert worker_output.read_log_tail(tmp_path, "quiet")[1] == b"hello\n"
        assert len(list(tmp_path.glob("busy*.log"))) == 3  # the older ones went, as before
        quiet_daemon.actor_ended("quiet")
        busy_daemon.line("last", "C", 1, "x", stderr=False)  # now it is an old, ended actor's log
        assert not (tmp_path / "quiet.log").exists() and not list(tmp_path.glob("quiet*"))
        busy_daemon.close()

    asyncio.run(run())
    assert not list(tmp_path.glob("*.lock"))


def test_forwarding_is_batched_and_rate_limited(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(worker_output, "FORWARD_BURST", 10)
    sent: list[pb.ActorOutput] = []

    async def burst() -> None:
        out = worker_output.OutputRelay(sent.append, tmp_path)
        for i in range(50):
            out.line("a1", "C", 7, f"l{i}", stderr=i % 2 == 1)
        await asyncio.sleep(worker_output.FLUSH_AFTER_S * 3)
        out.close()

    asyncio.run(burst())
    lines = [ln for msg in sent for ln in msg.lines]
    assert [ln.text for ln in lines[:10]] == [f"l{i}" for i in range(10)]
    assert lines[1].stderr and not lines[0].stderr
    assert "lines not forwarded" in lines[-1].text and "actorrt logs a1" in lines[-1].text
    assert all(msg.pid == 7 and msg.class_name == "C" for msg in sent)
    assert len((tmp_path / "a1.log").read_text().splitlines()) == 50  # the file keeps everything


def test_client_prints_forwarded_lines_with_the_prefix() -> None:
    out, err = io.StringIO(), io.StringIO()
    msg = pb.ActorOutput(
        actor_id="0123456789abcdef",
        class_name="Counter",
        pid=42,
        lines=[pb.OutputLine(text="hi"), pb.OutputLine(text="bad", stderr=True)],
    )
    client_output.print_actor_output(msg, out, err)
    assert out.getvalue() == "(Counter pid=42 id=01234567) hi\n"
    assert err.getvalue() == "(Counter pid=42 id=01234567) bad\n"
    # Both streams on one terminal: the actor's order between them is kept.
    both, texts = io.StringIO(), ["a", "warn 1", "b", "warn 2", "warn 3", "c"]
    lines = [pb.OutputLine(text=t, stderr=t.startswith("warn")) for t in texts]
    client_output.print_actor_output(
        pb.ActorOutput(actor_id="0123456789abcdef", class_name="C", pid=1, lines=lines), both, both
    )
    assert [line.split(") ")[1] for line in both.getvalue().splitlines()] == texts


def test_printed_lines_bypass_the_programs_text_wrapper_and_survive_its_encoding() -> None:
    """sys.stdout is a TextIOWrapper, not thread-safe: the printer's thread writes encoded lines
    to its binary buffer instead, leaving what the program's own thread has pending alone, and a
    character the terminal cannot encode is escaped rather than costing the whole batch."""
    raw = io.BytesIO()
    out = io.TextIOWrapper(io.BufferedWriter(raw), encoding="ascii")
    out.write("the program's half-written line")  # pending in the wrapper, not yet flushed
    msg = pb.ActorOutput(
        actor_id="0123456789abcdef", class_name="C", pid=1, lines=[pb.OutputLine(text="d\u00e9j\u00e0 vu")]
    )
    client_output.print_actor_output(msg, out, io.StringIO())
    assert raw.getvalue() == b"(C pid=1 id=01234567) d\\xe9j\\xe0 vu\n"
    out.write(" ends\n")
    out.flush()
    assert raw.getvalue().endswith(b"vu\nthe program's half-written line ends\n")


@pytest.mark.parametrize("fmt", ["text", "json"])
def test_daemon_log_lines_carry_ids(fmt: str) -> None:
    stream = io.StringIO()
    _logs.configure_logging("info", fmt, stream)
    try:
        logging.getLogger("actorrt.test").info(
            "actor %s died", "ab12", extra=_logs.ids(actor_id="ab12", worker_id="w1", cause="killed by signal 9")
        )
        logging.getLogger("actorrt.test").debug("hidden")
    finally:
        logging.getLogger().handlers.clear()
    line = stream.getvalue()
    assert line.count("\n") == 1 and "hidden" not in line
    if fmt == "json":
        event = json.loads(line)
        assert event["msg"] == "actor ab12 died" and event["actor_id"] == "ab12" and event["worker_id"] == "w1"
        assert event["level"] == "info" and event["logger"] == "actorrt.test"
    else:
        assert re.match(
            r"^\d{4}-\d\d-\d\dT[\d:.]+Z INFO actorrt.test actor ab12 died worker_id=w1 actor_id=ab12 "
            r'cause="killed by signal 9"$',
            line.strip(),
        ), line


# ---- actorrt status ------------------------------------------------------------------------------


async def test_status_table_json_and_watch(cluster: ProcCluster) -> None:
    import actorrt

    @actorrt.remote_class
    class Idle:
        pass

    async with cluster.connect() as c:
        a = await Idle.remote()
        cli = ["--address", cluster.address, "--token", cluster.token]
        table = await asyncio.to_thread(actorrt_cli, "status", *cli)
        assert table.returncode == 0, table.stderr
        text = table.stdout
        assert "slots 1/2 used (1 free)" in text and "clients 1 (1 connected)" in text and " up " in text
        assert re.search(r"\.Idle +1$", text, re.M)  # actors by class (a local class: its qualname)
        assert a.actor_id in text and "CLIENT" in text and c.client_id in text
        data = json.loads((await asyncio.to_thread(actorrt_cli, "status", "--json", *cli)).stdout)
        assert data["slots"]["used"] == 1 and data["actors"][0]["class_name"].endswith("Idle") and data["uptime_s"] >= 0

        # Ctrl-C, as a terminal sends it. A shell starts background jobs with SIGINT ignored and
        # children inherit that (Python then keeps it ignored), so the child turns it back on.
        ctrl_c_on = (
            "import runpy, signal, sys; signal.signal(signal.SIGINT, signal.default_int_handler); "
            "sys.argv[0] = 'actorrt'; runpy.run_module('actorrt', run_name='__main__', alter_sys=True)"
        )
        watch = subprocess.Popen(
            [sys.executable, "-c", ctrl_c_on, "status", "--watch", "--interval", "0.2", *cli],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            await asyncio.sleep(2.5)
        finally:
            watch.send_signal(signal.SIGINT)
            try:
                stdout, stderr = watch.communicate(timeout=10)
            except subprocess.TimeoutExpired:
                watch.kill()
                stdout, stderr = watch.communicate()
        assert watch.returncode == 0, stderr
        assert stdout.count(f"cluster {cluster.address}") >= 2 and "Ctrl-C to stop" in stdout
        assert "Traceback" not in stderr
        await actorrt.kill(a)


BLOCKED_TERMINAL = textwrap.dedent(
    """
    import os, sys, time
    import actorrt

    @actorrt.remote_class
    class Talker:
        def burst(self, n):
            for i in range(n):
                print("line", i, "x" * 200)
        def ping(self):
            return "pong"

    # This process's stdout: a pipe nobody reads, so printing there blocks once it is full.
    read_end, write_end = os.pipe()
    blocked = os.fdopen(write_end, "w")
    report = sys.stdout
    sys.stdout = blocked
    with actorrt.connect(sys.argv[1], token=sys.argv[2]) as c:
        t = Talker.remote().result()
        t.burst(5000).result()  # ~1 MB of output forwarded here; the pipe holds 64 KiB
        time.sleep(1.0)
        started = time.monotonic()
        for _ in range(20):
            assert t.ping().result(timeout=10) == "pong"
        print("PINGS", round(time.monotonic() - started, 3), file=report, flush=True)
        actorrt.kill(t).result()
    print("CLOSED", file=report, flush=True)
    os._exit(0)  # the blocked stdout would hold the interpreter's own exit
    """
)


def test_a_terminal_that_blocks_does_not_hold_the_calls(cluster: ProcCluster, tmp_path: Path) -> None:
    path = tmp_path / "blocked.py"
    path.write_text(BLOCKED_TERMINAL)
    out = subprocess.run(
        [sys.executable, str(path), cluster.address, cluster.token], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr[-3000:]
    found = re.search(r"PINGS ([\d.]+)", out.stdout)
    assert found is not None, (out.stdout, out.stderr[-3000:])
    assert float(found.group(1)) < 5.0  # answered while the printer thread is stuck
    assert "CLOSED" in out.stdout  # closing waits for the printer 1 s at most
