"""Programs written for other runtimes, running on actorrt.

- ``actorrt.compat.parl``: PARL's user API (``remote_class``, ``connect``, futures, errors).
  ``import actorrt.compat.parl as parl`` is the one line a PARL script changes.
"""
