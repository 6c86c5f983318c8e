"""The worker daemon process (``actorrt connect``; one inside ``actorrt start``): registers its node
with the master and keeps a warm pool of actor host processes.

- Process: the worker daemon (or a client's process, for an embedded cluster). One event loop;
  host folders are removed on short-lived threads.
- State: ``HostPool`` (``host_pool``), a plain object whose transitions return effects;
  ``LoadMeter`` (``load``), the heartbeat's rates from counters.
- I/O: ``HostRunner`` (``host_runner``) runs the hosts as processes (``procs``: /proc, signals,
  folders; ``fork_server_link``: the daemon's side of its fork server) and relays their output
  (``output``) and statistics (``metrics``). ``WorkerDaemon`` (``daemon``) is the lifecycle,
  heartbeat and session with the master.
- May import: ``common``, ``transport``; never the master, client or host packages.
"""
