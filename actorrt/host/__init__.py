"""The actor host process: one per slot, serving one actor on its own gRPC port.

- Process: ``python -m actorrt.host.server``, or forked by its daemon's fork server
  (``python -m actorrt.host.forkserver``, which imports what a host needs once and forks hosts).
- Loop: the host's single event loop; synchronous methods run inline on it. An actor that uses
  the cluster (creates actors, unpickles handles) gets a client on a loop thread of its own.
- May import: ``common``, ``transport``, ``client`` (an actor is a client), and the worker's
  ``worker.fork_server_link`` (the fork server's protocol, shared with the daemon).
"""
