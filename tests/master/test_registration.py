"""The master's side of a worker's registration: counts no machine could have are refused,
whatever the worker claims."""

from __future__ import annotations

import asyncio
from typing import Any

import grpc
import pytest

from actorrt.transport import rpc as _rpc
from actorrt.v1 import master_pb2, master_pb2_grpc
from tests.conftest import ProcCluster


@pytest.mark.parametrize("field", ["gpus", "cpus"])
async def test_master_refuses_register_worker_with_absurd_counts(cluster: ProcCluster, field: str) -> None:
    counts: dict[str, Any] = {"cpus": 1, "gpus": 0, field: 10**7}
    async with grpc.aio.insecure_channel(cluster.address) as ch:
        call = master_pb2_grpc.MasterStub(ch).WorkerSession(metadata=_rpc.auth_metadata(cluster.token))
        await call.write(
            master_pb2.WorkerEvent(
                register_worker=master_pb2.RegisterWorker(
                    version=_rpc.PROTOCOL_VERSION, node="absurd", node_ip="127.0.0.1", **counts
                )
            )
        )
        with pytest.raises(grpc.RpcError) as info:
            await call.read()
        assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert f"RegisterWorker.{field}" in (info.value.details() or "")
    status = await asyncio.to_thread(cluster.status)
    assert len(status["nodes"]) == 2 and all(n["node"] != "absurd" for n in status["nodes"])
