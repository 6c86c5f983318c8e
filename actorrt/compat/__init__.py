"""Programs written for other runtimes, running on actorrt.

- ``actorrt.compat.parl``: PARL's user API (``remote_class``, ``connect``, futures, errors).
  ``import actorrt.compat.parl as parl`` is the one line a PARL script changes.
- Process: the user's (a client); ``_probe`` runs inside an actor host.
- May import: ``common``, ``transport``, ``client``, and the worker's ``worker.procs`` (to measure
  a host's memory as its daemon does).
"""
