"""PARL programs fork: children of a process connected with ``parl.connect`` that compute, or
create remote objects of their own (through a relay client process, ``_relay``), never die,
whether ``grpc`` or actorrt was imported first (``actorrt/transport/grpc_fork.py``)."""

from __future__ import annotations

import pytest

from tests.conftest import ProcCluster, run_driver
from tests.fork_helpers import children_all_right

CHILDREN = 64  # before the fix, with grpc imported first, 12 to 18 of them died by SIGSEGV

PARL_FORKING_DRIVER = """
import os, sys
os.environ.pop("GRPC_ENABLE_FORK_SUPPORT", None)  # unset, as in a fresh shell
if sys.argv[3] == "grpc-first":
    import grpc  # what TensorBoard, the google-cloud libraries and Ray do on import
import json
from actorrt.compat import parl
from tests.fork_helpers import fork_and_wait

@parl.remote_class
class Adder:
    def add(self, a, b):
        return a + b

def cubes(i):
    return sum(j * j * j for j in range(100 * i))

def work(i):
    # The first child creates a remote object of its own (its client is a relay process); the
    # others only compute.
    return Adder().add(i, 1000) if i == 0 else cubes(i)

parl.connect(sys.argv[1], token=sys.argv[2])
adder = Adder()
calls = [adder.add(1, 2)]
out = fork_and_wait(work, lambda i: 1000 if i == 0 else cubes(i), int(sys.argv[4]))
calls.append(adder.add(3, 4))  # the parent's client works on
print(json.dumps(dict(out, calls=calls)))
"""


@pytest.mark.parametrize("first", ["grpc-first", "actorrt-first"])
def test_children_forked_from_a_parl_client_never_crash(cluster: ProcCluster, first: str) -> None:
    run = run_driver(cluster, PARL_FORKING_DRIVER, first, str(CHILDREN), timeout=120)
    assert children_all_right(run, CHILDREN)["calls"] == [3, 7]
