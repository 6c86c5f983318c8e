"""Programs written for other runtimes, running on actorrt.

- ``actorrt.compat.parl``: PARL's user API (``remote_class``, ``connect``, futures, errors).
  ``import actorrt.compat.parl as parl`` is the one line a PARL script changes.
  ``python -m actorrt.compat.parl SCRIPT.py`` runs a PARL script unchanged (``parl._runner``),
  with PARL's ``parl.utils`` and ``parl.env`` (on ``rl``, torch and gymnasium: imported only
  when a script asks for them, never by the runtime).
- Process: the user's (a client); ``_probe`` and ``parl._hooks.install_in_host`` run inside an
  actor host.
- May import: ``common``, ``transport``, ``client``, and the worker's ``worker.procs`` (to measure
  a host's memory as its daemon does).
"""
