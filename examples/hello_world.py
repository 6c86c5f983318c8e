"""Hello World on actorrt: an actor placed on the embedded local cluster, called asynchronously.

python examples/hello_world.py                  # embedded cluster
python examples/hello_world.py --address H:P    # a running cluster (actorrt start)
"""

from __future__ import annotations

import argparse
import asyncio

import actorrt


@actorrt.remote_class
class Counter:
    def __init__(self, start: int = 0) -> None:
        self.n = start

    def add(self, k: int) -> int:
        self.n += k
        return self.n

    def hello(self, name: str) -> str:
        return f"Hello, {name}! (counter at {self.n})"


async def main(address: str | None) -> None:
    async with actorrt.connect(address) as cluster:
        c = await Counter.remote(5)  # placed on a free slot, constructed remotely
        assert await c.add(1) == 6
        futures = [c.add(1) for _ in range(1000)]  # each call is sent now; futures are awaitable
        assert (await asyncio.gather(*futures))[-1] == 1006
        print(await c.hello("world"))
        print("n read remotely:", await c.n)
        print(await cluster.status())  # nodes, slots (free/used), actors, clients
        await actorrt.kill(c)  # frees the slot


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--address", default=None, help="master host:port (default: embedded cluster)")
    actorrt.run(main(parser.parse_args().address))
