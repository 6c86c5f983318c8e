"""The client: any process that uses a cluster (a driver script, a notebook, an actor).

- Process: the user's. ``async with connect()`` runs on the caller's loop; ``with connect()``
  runs the cluster on a background loop thread (``loop_thread``), and futures block only the
  caller's thread.
- State, plain objects with no I/O: ``ClientState`` (``state``), what the client knows of its
  placements, restarts and deaths; ``Holders`` (``holders``), who holds each actor here and what
  the master must hear of it; ``BulkLinks`` (``bulk_links``), one stream's bulk connections.
- Adapters: ``Cluster`` (``cluster``) ties the control plane (``control``: the master session,
  ``session``, and the requests that wait on it), actor creation (``creation``) and one data
  connection per actor (``connection``, over its stream, ``calls_stream``) together; ``handle``
  is what users hold, ``remote`` is ``@remote_class`` (its options in ``options``), ``future``
  the futures every call returns. ``current`` says which cluster a bare call uses, and
  ``pickling`` what pickling a payload records.
- May import: ``common``, ``transport``, and ``local`` (``connect()`` with no address starts an
  embedded master and worker in this process).
"""
