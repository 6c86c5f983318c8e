"""The embedded cluster: ``connect()`` with no address starts a master and one worker daemon in
this process, on the caller's loop, and stops them when the connection closes. While it runs,
its token is recorded under its address (``home.write_cluster_token``), so that this user's
other processes on this machine (a subprocess, a notebook, ``actorrt status --address``) can
connect to it as to a cluster ``actorrt start`` started.

- May import: ``common``, ``transport``, ``master``, ``worker``.
"""

from __future__ import annotations

import logging
import os
import socket
from pathlib import Path

from actorrt.common import home
from actorrt.common.lifecycle import Service
from actorrt.master.server import Master
from actorrt.worker.daemon import WorkerDaemon

__all__ = ["TokenRecord", "start_embedded"]

log = logging.getLogger("actorrt.client")


class TokenRecord(Service):
    """The file that names an embedded cluster's token by its address while the cluster runs
    (mode 0600 under the home; see ``home.write_cluster_token``). Closed first, before the
    master stops listening: no reader finds it for a port the cluster no longer holds. Runs on
    the cluster's loop; raises nothing: a home that cannot be written costs only the finding
    (a warning says so), not the cluster."""

    def __init__(self, address: str, token: str) -> None:
        self.address = address
        self.token = token
        self.path: Path | None = None

    async def _start(self) -> None:
        try:
            self.path = home.write_cluster_token(self.address, self.token)
        except OSError as e:
            log.warning(
                "could not record the embedded cluster's token under %s (%s): other processes "
                "connecting to %s need it passed to them (token=, ACTORRT_TOKEN)",
                home.state_dir(),
                e,
                self.address,
            )

    async def _close(self) -> None:
        if self.path is not None:
            home.remove_cluster_token(self.path)


async def start_embedded(token: str, cpus: int | None, preload: tuple[str, ...]) -> tuple[str, list[Service]]:
    """Start a master on a free loopback port and a worker with ``cpus`` slots (default: all
    cores), and record the token under the master's address; returns that address and the
    services, to close in reverse order. On failure whatever started is closed again."""
    master = Master("127.0.0.1", 0, token=token)
    # Closing it ends the cluster: workers that joined from elsewhere are told why, and exit.
    master.stop_reason = (
        f"the script that ran it (pid {os.getpid()} on {socket.gethostname()}) closed its embedded cluster"
    )
    await master.start()
    # The daemon does not echo actors' lines here: they reach this process's terminal as
    # forwarded ActorOutput, like on a real cluster, so log_to_driver=False silences them.
    worker = WorkerDaemon(master.address, token=token, cpus=cpus, reconnect=False, preload=preload, echo_output=False)
    record = TokenRecord(master.address, token)
    try:
        await worker.start()
    except BaseException:
        await master.close()
        raise
    try:
        await record.start()
    except BaseException:  # cancelled as it writes
        await worker.close()
        await master.close()
        raise
    return master.address, [master, worker, record]
