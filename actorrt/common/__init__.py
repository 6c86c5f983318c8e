"""What every actorrt process shares, with no I/O of its own.

- Process: any (client, master, worker daemon, actor host, CLI). No event loop or thread of its
  own (``metrics_http`` serves on prometheus-client's thread).
- Holds: the error contract (``errors``), the one lifecycle every server has (``lifecycle``),
  resource bounds, the status snapshot, the home folder and token file (``home``), the daemons'
  log setup (``logs``), actor output labels, /proc facts, ``/metrics`` over HTTP, and
  ``text.printable``, which escapes every name a person is shown.
- May import: nothing of actorrt but the generated messages (``actorrt.v1``).
"""
