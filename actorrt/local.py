"""The embedded cluster: ``connect()`` with no address starts a master and one worker daemon in
this process, on the caller's loop, and stops them when the connection closes.

- May import: ``common``, ``transport``, ``master``, ``worker``.
"""

from __future__ import annotations

from actorrt.master.server import Master
from actorrt.worker.daemon import WorkerDaemon

__all__ = ["start_embedded"]


async def start_embedded(
    token: str, cpus: int | None, preload: tuple[str, ...]
) -> tuple[str, list[Master | WorkerDaemon]]:
    """Start a master on a free loopback port and a worker with ``cpus`` slots (default: all
    cores); returns the master's address and the services, to close in reverse order. On failure
    whatever started is closed again."""
    master = Master("127.0.0.1", 0, token=token)
    await master.start()
    # The daemon does not echo actors' lines here: they reach this process's terminal as
    # forwarded ActorOutput, like on a real cluster, so log_to_driver=False silences them.
    worker = WorkerDaemon(master.address, token=token, cpus=cpus, reconnect=False, preload=preload, echo_output=False)
    try:
        await worker.start()
    except BaseException:
        await master.close()
        raise
    return master.address, [master, worker]
