"""The client: any process that uses a cluster (a driver script, a notebook, an actor).

- Process: the user's. ``async with connect()`` runs on the caller's loop; ``with connect()`` runs
  the cluster on a background loop thread, and futures block only the caller's thread.
- State: ``ClientState`` (``state``), what the client knows of its placements and actors, a plain
  object with no I/O.
- Adapters: ``Cluster`` (``cluster``) ties the master session (``session``), the state and one
  data connection per actor (``handle``) together; ``remote`` is ``@remote_class``, ``future`` the
  futures every call returns.
- May import: ``common``, ``transport``, and ``local`` (``connect()`` with no address starts an
  embedded master and worker in this process).
"""
