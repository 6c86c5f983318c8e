"""The master judges its workers' silence only by time it was running: a master whose loop was
blocked (an embedded one shares its loop with the user's script) keeps its workers. A real
in-process master, worker daemon and client on 127.0.0.1, as ``actorrt.connect()`` with no
address starts them."""

from __future__ import annotations

import time

import pytest

import actorrt
from actorrt._master import Master
from actorrt._worker import WorkerDaemon

pytestmark = pytest.mark.timeout(90)


@actorrt.remote_class
class Echo:
    def echo(self, x: int) -> int:
        return x


async def test_a_loop_blocked_past_the_worker_timeout_keeps_the_embedded_worker(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A script that blocks its loop (building a model, importing torch's compiler: seconds, more
    on a loaded machine) blocks its embedded master and worker too. The master's next sweep used to
    find no heartbeat for the whole block and drop the worker, and every actor asked for after it
    waited out the placement timeout (the demo hung 5 minutes under load)."""
    master = await Master("127.0.0.1", 0, token="t", worker_timeout_s=2.0).start()
    daemon = WorkerDaemon(master.address, token="t", cpus=2, reconnect=False, wait_ready=True, echo_output=False)
    try:
        await daemon.start()
        async with actorrt.connect(master.address, token="t", log_to_driver=False, placement_timeout=15.0):
            before = await Echo.remote()
            assert await before.echo(1) == 1
            time.sleep(5.0)  # the whole cluster's loop: no heartbeat sent, none read, no sweep
            after = await Echo.remote()
            assert await after.echo(2) == 2
            assert await before.echo(3) == 3
            assert list(master.table.workers) == [daemon.worker_id]
        assert any("the master did not run for" in r.getMessage() for r in caplog.records)
    finally:
        await daemon.close()
        await master.close()
