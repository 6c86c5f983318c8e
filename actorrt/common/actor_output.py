"""How actor output is labelled wherever it is shown: by the worker daemon in its logs, by the
master in the notices it adds, by the client on the user's terminal, by ``actorrt logs``."""

from __future__ import annotations

from actorrt.common.text import printable

__all__ = ["DEFAULT_TAIL_BYTES", "NOTICE_PREFIX", "prefix"]

# Bytes of an actor's log that ``actorrt logs`` (the master's ReadActorLog) shows unless told.
DEFAULT_TAIL_BYTES = 2**20

# How the master's own lines in an actor's output begin (a count of lines it dropped).
NOTICE_PREFIX = "[actorrt:"


def prefix(class_name: str, actor_id: str, pid: int) -> str:
    """``(Counter pid=4242 id=3f2a9c1b)``: how an actor's lines are labelled everywhere (the
    class name escaped: ``common.text.printable``)."""
    return f"({printable(class_name or 'actor')} pid={pid} id={printable(actor_id[:8])})"
