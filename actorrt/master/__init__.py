"""The master process (``actorrt start``): the cluster's only fixed address, control plane only.

- Process: the master (or a client's process, for an embedded cluster). Everything runs on one
  event loop; metrics are collected on prometheus-client's HTTP thread from snapshots.
- State: ``ClusterTable`` (``table``) lists the live actors and composes one plain state object
  per index (``workers``, ``placement_queue``, ``names``, ``references``, ``restarts``,
  ``clients``, ``deaths``; their shared ``records`` and ``state``): injected clock, no I/O.
- Recovery: ``Recovery`` (``recovery``), what the master does with workers that register again
  with their live actors and clients that confirm theirs (a restarted master): events in, effects
  out, with the table's clock; no I/O.
- Adapter: ``MasterServicer`` (``servicer``) turns protobuf into calls on the table and recovery;
  ``Outgoing`` (``outgoing``) turns their answers into messages on session streams; ``output``
  forwards actor output and log reads; ``status`` builds the cluster status answer;
  ``heartbeats`` sizes the heartbeat interval to the cluster; ``dashboard`` serves the web status
  page (``dashboard_page``: its HTML and script; ``dashboard_logs``: actors' output on it;
  ``load_history``: its ten minutes of cluster CPU % and calls/s); ``server`` (``Master``) runs the gRPC server and its periodic sweep.
- May import: ``common``, ``transport``; never the worker, client or host packages.
"""
