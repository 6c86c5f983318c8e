"""Processes forked from a connected client (multiprocessing's ``fork`` start method) that only
compute: none may die, whatever was imported first (``grpc`` by TensorBoard, google-cloud or Ray,
or actorrt); and where gRPC's fork support can no longer be turned off, ``connect`` says so
instead of leaving the children to crash (``actorrt/transport/grpc_fork.py``)."""

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


LATCHED_DRIVER = """
import os, sys
os.environ.pop("GRPC_ENABLE_FORK_SUPPORT", None)
if sys.argv[3] == "explicit":
    os.environ["GRPC_ENABLE_FORK_SUPPORT"] = "true"  # the user's own choice, before grpc is imported
import grpc
channel = grpc.insecure_channel("127.0.0.1:9")  # gRPC initialised, its fork support latched, before actorrt
if sys.argv[3] != "live-channel":
    channel.close()
import actorrt
try:
    actorrt.connect(sys.argv[1], token=sys.argv[2])
    print("connect was not refused")
except actorrt.ClusterConnectionError as e:
    print("refused:", e)
os.environ["ACTORRT_ALLOW_GRPC_FORK_SUPPORT"] = "1"
with actorrt.connect(sys.argv[1], token=sys.argv[2]) as c:
    print("connected anyway:", c.address == sys.argv[1])
"""


@pytest.mark.parametrize("how", ["closed-channel", "live-channel", "explicit"])
def test_connect_refuses_where_grpc_fork_support_can_no_longer_be_turned_off(cluster: ProcCluster, how: str) -> None:
    """Its fork handlers would crash the children of a connected process: no configuration turns
    them off once gRPC started with them, so connect says what to change instead."""
    run = run_driver(cluster, LATCHED_DRIVER, how)
    assert run.returncode == 0, run.stderr
    refused, connected = run.stdout.strip().splitlines()[-2:]
    assert refused.startswith("refused: connect: gRPC's fork support is on in this process (")
    reason = "GRPC_ENABLE_FORK_SUPPORT=true in the environment" if how == "explicit" else "gRPC was set up before"
    assert reason in refused
    assert "GRPC_ENABLE_FORK_SUPPORT=false" in refused and "ACTORRT_ALLOW_GRPC_FORK_SUPPORT=1" in refused
    assert connected == "connected anyway: True"
