"""What pickling a payload records in this process, and how its local modules travel.

While a call's or a constructor's arguments are pickled, each handle in them reports itself
here (``ActorHandle.__reduce__``): the copies made (their tokens, taken back if the payload never
leaves) and, for a restartable actor's arguments, the connections it will hold. Any thread:
context variables, set around one pickling on the thread that pickles.
"""

from __future__ import annotations

from contextvars import ContextVar
from typing import Any

__all__ = ["claimed_before", "copies_made", "handles_pickled", "in_actor_host"]

handles_pickled: ContextVar[list[Any] | None] = ContextVar("actorrt_handles_pickled", default=None)
"""A list while a restartable actor's constructor arguments are pickled: the connections of the
handles in them (its creator holds those actors as long as it keeps the arguments)."""

copies_made: ContextVar[list[tuple[str, str]] | None] = ContextVar("actorrt_copies_made", default=None)
"""A list while a call's arguments or an actor's constructor arguments are pickled: (actor id,
token) of each handle copy made, taken back if the payload never leaves this process. In an
actor host, also for the life of each Calls stream (``host.calls.CallStream``): the copies its
replies carry, named in them (``Reply.copies``)."""

claimed_before: ContextVar[bool] = ContextVar("actorrt_claimed_before", default=False)
"""True while an actor host unpickles the arguments of a restart's constructor: the handles in
them hold the actor again, but their copies were claimed by its first construction, once."""

in_actor_host = False
"""True in an actor host's process once it hosts an actor: its own local modules stay pickled by
reference (registering them by value would send its replies' classes by value too)."""
