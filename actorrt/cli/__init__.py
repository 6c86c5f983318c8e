"""The ``actorrt`` command line: ``start``, ``connect``, ``status``, ``logs``, ``stop``.

- Process: the CLI's (``python -m actorrt``); ``start``/``connect`` then become the master's or a
  worker daemon's process, on one event loop.
- ``main`` parses arguments and runs the daemons; ``ops`` holds the operations commands (metrics
  endpoints, status, logs). Every failure the user can cause prints one line, no traceback.
- May import: everything below it: ``common``, ``transport``, ``master``, ``worker``, ``local``,
  ``client``.
"""
