"""The event loops actorrt's processes run on: uvloop where it is installed (an optional
dependency: every process works on asyncio's own loop too), chosen in this one place."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

try:
    import uvloop

    HAVE_UVLOOP = True
except ImportError:  # not on this platform, or not installed
    HAVE_UVLOOP = False

__all__ = ["new_event_loop", "run"]

T = TypeVar("T")


def run(main: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run(main)``, on uvloop when it is installed."""
    if not HAVE_UVLOOP:
        return asyncio.run(main)
    return uvloop.run(main)


def new_event_loop() -> asyncio.AbstractEventLoop:
    """A new event loop for a thread of its own, uvloop's when it is installed."""
    if not HAVE_UVLOOP:
        return asyncio.new_event_loop()
    return uvloop.new_event_loop()
