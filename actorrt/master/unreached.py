"""The workers a deliberate stop of the cluster could not reach: cut off from the master as it
was stopped, they missed ``ClusterStopped`` and try to register again for as long as they run.

A master started by ``actorrt start`` keeps them in a file under its home (``unreached.json``,
0600), so that the next master started from that home answers such a worker's registration
with ``ClusterStopped`` (saying when and why its cluster was stopped) instead of taking back
its actors: the cluster they ran in was ended on purpose. A worker is known by its id, node and
pid, as its registration names them. The file keeps the newest ``KEPT`` entries of the last
``KEPT_S`` seconds. Plain synchronous functions on the master's loop; a file that cannot be
read counts as empty, and ``add`` raises OSError when it cannot write.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from actorrt.common import home

__all__ = ["KEPT", "KEPT_S", "Unreached", "add", "load"]

KEPT = 1000
KEPT_S = 30 * 24 * 3600.0


@dataclass(frozen=True)
class Unreached:
    """A worker that was listed when its cluster was stopped on purpose and never said it heard."""

    worker_id: str
    node: str
    pid: int
    address: str  # the stopped master's
    reason: str  # why it was stopped, as ClusterStopped said it
    at: float  # when, seconds since the epoch

    def is_worker(self, worker_id: str, node: str, pid: int) -> bool:
        """Whether a registration with these names comes from this worker."""
        return (worker_id, node, pid) == (self.worker_id, self.node, self.pid)

    def told(self) -> str:
        """What ``ClusterStopped.reason`` tells the worker when it comes back."""
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(self.at))
        return (
            f"its cluster (master {self.address}) was stopped on purpose at {when} while this worker "
            f"was out of reach ({self.reason}); the master now at this address is a new one"
        )


def load(path: Path) -> dict[str, Unreached]:
    """The workers ``path`` lists, by worker id: none if it is missing or unreadable."""
    try:
        rows = json.loads(path.read_text())
        found = [Unreached(**row) for row in rows]
    except (OSError, ValueError, TypeError):
        return {}
    return {u.worker_id: u for u in found}


def add(path: Path, workers: list[Unreached]) -> None:
    """Add ``workers`` to the file at ``path`` (mode 0600), keeping the newest ``KEPT`` of the
    last ``KEPT_S`` seconds. Raises OSError if it cannot be written."""
    now = time.time()
    kept = {**load(path), **{u.worker_id: u for u in workers}}
    rows = sorted((u for u in kept.values() if now - u.at < KEPT_S), key=lambda u: u.at)[-KEPT:]
    home.write_private(path, json.dumps([asdict(u) for u in rows]))
