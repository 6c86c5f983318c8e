"""The answer to ``GetClusterStatus`` (``actorrt status``, the dashboard): every node, actor and
client of the cluster table, as one message. Read on the master's loop; builds, never changes."""

from __future__ import annotations

from actorrt.master.table import ClusterTable
from actorrt.transport import rpc as _rpc
from actorrt.v1 import master_pb2 as pb

__all__ = ["cluster_status"]


def cluster_status(table: ClusterTable, *, address: str, uptime_s: float) -> pb.GetClusterStatusResponse:
    """The status of the cluster ``table`` lists, from the master at ``address``."""
    resp = pb.GetClusterStatusResponse(
        version=_rpc.PROTOCOL_VERSION,
        address=address,
        uptime_s=uptime_s,
        placements_waiting=len(table.queue),
    )
    # Built with add(): about 3x faster than constructing each row (20,000 actors: ~0.1 s).
    add_node = resp.nodes.add
    for w in table.workers.values():
        add_node(
            worker_id=w.worker_id,
            node=w.node,
            node_ip=w.node_ip,
            cpus=w.cpus,
            cpus_used=w.cpus - w.cpus_free,
            gpus=w.gpus,
            gpus_used=w.gpus - len(w.gpus_free),
            slots_ready=len(w.ready),
            load=w.load,
            pid=w.pid,
            connected=w.connected,
            cpu_percent=w.cpu_percent,
            memory_used_bytes=w.memory_used_bytes,
            calls_per_s=w.calls_per_s,
        )
    node_of = {w.worker_id: w.node for w in table.workers.values()}
    add_actor = resp.actors.add
    for a in table.actors.values():
        row = add_actor(
            actor_id=a.actor_id,
            class_name=a.class_name,
            worker_id=a.worker_id,
            node=node_of.get(a.worker_id, ""),
            slot=max(a.slot, 0),  # a restarting actor has none (-1): `restarting` says so
            client_id=a.client_id,
            endpoint=a.endpoint,
            rss_bytes=a.rss_bytes,
            name=a.name,
            detached=a.detached,
            restarts=a.restarts,
            max_restarts=a.max_restarts,
            holders=table.refs.count(a.actor_id),
            restarting=a.restarting,
            cpu_percent=a.cpu_percent,
            calls_per_s=a.calls_per_s,
        )
        res = row.resources
        res.num_cpus, res.num_gpus, res.max_memory_mb = a.num_cpus, a.num_gpus, a.max_memory_mb
    add_client = resp.clients.add
    for c in table.clients.values():
        add_client(client_id=c.client_id, hostname=c.hostname, pid=c.pid, actors=len(c.actors), connected=c.connected)
    return resp
