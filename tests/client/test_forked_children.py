"""Processes forked from a connected client (multiprocessing's ``fork`` start method) that only
compute: none may die, whatever was imported first (``grpc`` by TensorBoard, google-cloud or Ray,
or actorrt) (``actorrt/transport/grpc_fork.py``)."""

from __future__ import annotations

import pytest

from tests.conftest import ProcCluster, run_driver
from tests.fork_helpers import children_all_right

CHILDREN = 64  # before the fix, with grpc imported first, 9 to 19 of them died (SIGSEGV, SIGABRT)

FORKING_DRIVER = """
import os, sys
os.environ.pop("GRPC_ENABLE_FORK_SUPPORT", None)  # unset, as in a fresh shell
if sys.argv[3] == "grpc-first":
    import grpc  # what TensorBoard, the google-cloud libraries and Ray do on import
import json
import actorrt
from tests.fork_helpers import fork_and_wait

@actorrt.remote_class
class Counter:
    def __init__(self):
        self.n = 0
    def add(self, k):
        self.n += k
        return self.n

def squares(i):
    return sum(j * j for j in range(100 * i))

address = sys.argv[1] if sys.argv[4] == "address" else None  # else an embedded cluster
with actorrt.connect(address, token=sys.argv[2] if address else None, num_cpus=1):
    counter = Counter.remote().result()
    calls = [counter.add(1).result()]
    out = fork_and_wait(squares, squares, int(sys.argv[5]))
    calls.append(counter.add(1).result())  # the parent's connection works on
    print(json.dumps(dict(out, calls=calls)))
"""


@pytest.mark.parametrize(
    ("first", "cluster_kind"),
    [("grpc-first", "address"), ("actorrt-first", "address"), ("grpc-first", "embedded")],
)
def test_children_forked_from_a_connected_client_never_crash(
    cluster: ProcCluster, first: str, cluster_kind: str
) -> None:
    run = run_driver(cluster, FORKING_DRIVER, first, cluster_kind, str(CHILDREN), timeout=120)
    assert children_all_right(run, CHILDREN)["calls"] == [1, 2]
