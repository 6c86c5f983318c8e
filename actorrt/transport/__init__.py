"""How bytes travel between actorrt processes.

- Process: both ends of every connection: client and actor host on a Calls stream, master and
  worker daemon on their sessions, host and daemon on the statistics pipe. Functions run on the
  caller's thread or event loop; the bulk channel reads and accepts on threads of its own.
- Holds: gRPC channels, servers, TLS and the token check (``rpc``: the one place where a
  ``grpc.RpcError`` becomes an actorrt error), addresses, pickling and the payload codec, large
  messages in chunks (``wire``), shared memory (``shm``), the bulk TCP side channel (``bulk``), the
  batching writer of one stream (``outbox``), the host -> daemon statistics pipe; gRPC's fork
  support, off in every process from the moment ``actorrt`` is imported (``grpc_fork``).
- May import: ``common``.
"""
