"""A PARL program on actorrt: the script is PARL's, unchanged but for its imports.

    actorrt start --port 8010 --cpu_num 3      # was: xparl start --port 8010 --cpu_num 3
    python examples/parl_migration.py          # was: the same, with `import parl`

Remote objects (`@parl.remote_class`) created with `parl.connect(...)`, blocking calls,
attribute reads and writes, PARL's futures (`wait=False`), a `distributed_files` folder and
PARL's errors. `--address` points it at another master; the token comes from ACTORRT_TOKEN or
from the file `actorrt start` wrote on this machine.
"""

from __future__ import annotations

import argparse
import os
import tempfile
from typing import Any

import numpy as np

import actorrt.compat.parl as parl  # was: import parl
from actorrt.compat.parl.exceptions import RemoteError  # was: from parl.remote.exceptions import RemoteError


@parl.remote_class
class Simulator:
    """An environment stepping on the cluster: one process per object."""

    def __init__(self, seed: int) -> None:
        self.seed = seed
        self.rng = np.random.default_rng(seed)
        self.steps = 0
        with open("config/episode_length.txt") as f:  # shipped by distributed_files
            self.episode_length = int(f.read())

    def rollout(self) -> float:
        self.steps += self.episode_length
        return float(self.rng.normal(size=self.episode_length).sum())

    def pid(self) -> int:
        return os.getpid()


@parl.remote_class(wait=False)
class Evaluator:
    """Calls return FutureObjects at once; `.get()` waits for the value."""

    def evaluate(self, weights: np.ndarray) -> float:
        return float(np.abs(weights).mean())


@parl.remote_class
class Fragile:
    def divide(self, x: float) -> float:
        return 1 / x


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--address", default="localhost:8010", help="the master's host:port")
    args = parser.parse_args()
    start = os.getcwd()
    with tempfile.TemporaryDirectory(prefix="parl-migration-") as folder:
        os.chdir(folder)  # where the distributed files are written: removed at the end
        try:
            run(args.address)
        finally:
            os.chdir(start)


def run(address: str) -> None:
    os.makedirs("config")
    with open("config/episode_length.txt", "w") as f:
        f.write("100")
    parl.connect(address, distributed_files=["config"])

    simulators = [Simulator(seed) for seed in range(3)]
    returns = [sim.rollout() for sim in simulators]
    print("returns:", [round(r, 2) for r in returns])
    print("steps read remotely:", [sim.steps for sim in simulators])
    simulators[0].episode_length = 10  # a write goes to the remote object
    simulators[0].rollout()
    assert simulators[0].steps == 110
    print("processes:", sorted(sim.pid() for sim in simulators))
    del simulators  # released when garbage-collected, as in PARL: their slots are free again

    evaluators: list[Any] = [Evaluator() for _ in range(2)]  # constructed in the background
    futures = [e.evaluate(np.full(8, i + 1.0)) for i, e in enumerate(evaluators)]  # both run at once
    print("evaluations:", [f.get() for f in futures])
    del evaluators, futures

    try:
        Fragile().divide(0)
    except RemoteError as e:
        print("remote error, as PARL reports it:", " ".join(str(e).splitlines()[:2]))

    print("remote objects of this client:", parl.get_global_client().actor_num.value)
    print("all remote objects answered")


if __name__ == "__main__":
    main()
