"""A real worker daemon checks its HostPool after every transition (``ACTORRT_VALIDATE=1``, set
for every test by ``conftest``) and fails loudly on a violation: logged as an error, and its
``close()`` raises it; a host that fails to start leaves nothing behind. An in-process master
and daemon on 127.0.0.1."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
from pathlib import Path

import pytest

import actorrt
from actorrt.master.server import Master
from actorrt.worker import host_runner as _host_runner
from actorrt.worker.daemon import WorkerDaemon
from actorrt.worker.host_pool import HostState, PoolStateError

pytestmark = pytest.mark.timeout(60)


@actorrt.remote_class
class Echo:
    def echo(self, x: int) -> int:
        return x


async def _until(predicate: object, timeout: float = 15.0) -> bool:
    deadline = asyncio.get_running_loop().time() + timeout
    while not predicate():  # type: ignore[operator]
        if asyncio.get_running_loop().time() > deadline:
            return False
        await asyncio.sleep(0.02)
    return True


async def test_a_daemons_actors_come_and_go_with_every_transition_checked() -> None:
    assert os.environ.get("ACTORRT_VALIDATE") == "1"
    master = await Master("127.0.0.1", 0, token="t").start()
    daemon = WorkerDaemon(master.address, token="t", cpus=2, reconnect=False, wait_ready=True, echo_output=False)
    try:
        await daemon.start()
        assert daemon.pool.validate_each and daemon.pool.counts()[HostState.READY] == 2
        async with actorrt.connect(master.address, token="t", log_to_driver=False):
            a = await Echo.remote()
            assert await a.echo(1) == 1
            assert daemon.pool.counts()[HostState.BUSY] == 1
            await actorrt.kill(a)
            assert await _until(lambda: daemon.pool.counts()[HostState.READY] == 2)
        assert daemon.pool.violation is None
    finally:
        await daemon.close()  # raises a violation, had there been one
        await master.close()


async def test_a_violation_is_logged_and_raised_by_close(caplog: pytest.LogCaptureFixture) -> None:
    master = await Master("127.0.0.1", 0, token="t").start()
    daemon = WorkerDaemon(master.address, token="t", cpus=1, reconnect=False, wait_ready=True, echo_output=False)
    try:
        await daemon.start()
        host = daemon.pool.hosts[0]
        host.stop_cause = "a bug left this behind"  # a warm host has no stop cause
        with caplog.at_level(logging.ERROR, logger="actorrt.worker"):
            os.kill(host.pid, signal.SIGKILL)  # its exit is the next transition
            assert await _until(lambda: daemon.pool.violation is not None)
        assert any("has stop cause 'a bug left this behind'" in r.getMessage() for r in caplog.records)
    finally:
        with pytest.raises(PoolStateError, match="a bug left this behind"):
            await daemon.close()
        await master.close()


BAD_FIRST_LINE = """
import os, time
try:
    os.close(os.open(os.environ["BAD_FIRST_LINE_LOCK"], os.O_CREAT | os.O_EXCL))
    print("not the ready line", flush=True)  # the first host only: it prints, then hangs
    time.sleep(60)
except FileExistsError:
    pass
"""


async def test_a_host_that_fails_to_start_is_killed_and_its_folder_removed_before_the_retry(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    (tmp_path / "bad_first_line.py").write_text(BAD_FIRST_LINE)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(tmp_path), os.environ.get("PYTHONPATH")])))
    monkeypatch.setenv("BAD_FIRST_LINE_LOCK", str(tmp_path / "lock"))
    monkeypatch.setenv("ACTORRT_FORK_SERVER", "0")  # each host imports the preload, so the first can fail alone
    monkeypatch.setattr(_host_runner, "HOST_READY_TIMEOUT_S", 3.0)
    master = await Master("127.0.0.1", 0, token="t").start()
    daemon = WorkerDaemon(
        master.address,
        token="t",
        cpus=1,
        reconnect=False,
        wait_ready=True,
        echo_output=False,
        preload=("bad_first_line",),
    )
    try:
        with caplog.at_level(logging.ERROR, logger="actorrt.worker"):
            await daemon.start()
        assert any(
            "actor host 0 failed to start: no ready line from actor host within 3 s (last line: 'not the ready line')"
            in r.getMessage()
            for r in caplog.records
        )
        assert daemon.pool.hosts[0].state is HostState.READY and daemon.pool.hosts[0].failures == 0
        folders = sorted(p.name.split("-")[0] for p in Path(daemon.hosts._workdirs).iterdir())
        assert folders == ["owner", "slot0"]  # the failed host's folder is gone
    finally:
        await daemon.close()
        await master.close()
