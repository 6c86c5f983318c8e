"""``ActorOptions``: how an actor is placed and run, checked when they are given."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from actorrt.common.resources import MAX_CPUS, MAX_GPUS
from actorrt.common.text import NAME_MAX

__all__ = ["INT32_MAX", "MAX_MEMORY_MB", "NAME_MAX", "ActorOptions", "check_name", "options_of"]

INT32_MAX = 2**31 - 1  # the largest value the placement's fields carry
# The largest memory limit an actor may be given, in MB (MiB): 1 PiB, more than any node has.
# A limit past it is a mistake (1e300, or a float that overflowed), never one that could be
# reached.
MAX_MEMORY_MB = 2**30
_NAME_SHOWN = 40  # characters of a refused name an error repeats


def check_name(name: object, what: str) -> None:
    """Refuse what cannot name an actor, before anything is sent: ``options(name=)`` and
    ``get_actor`` (``what`` says which, in the error). Any thread. Raises ValueError for a
    name that is not a str, empty, or over ``NAME_MAX`` characters; the error names its length
    and repeats at most its first ``_NAME_SHOWN`` characters."""
    if isinstance(name, str) and 0 < len(name) <= NAME_MAX:
        return
    if isinstance(name, str) and name:
        got = f"a str of {len(name):,} characters ({name[:_NAME_SHOWN]!r}...)"
    else:
        got = repr(name)[:_NAME_SHOWN]
    raise ValueError(f"{what}: name must be a non-empty str of at most {NAME_MAX} characters, got {got}")


@dataclass(frozen=True)
class ActorOptions:
    """How an actor is placed and run."""

    num_cpus: int = 1
    num_gpus: int = 0
    max_memory_mb: int | None = None
    max_concurrency: int = 1
    placement_timeout: float | None = None
    max_restarts: int = 0
    name: str | None = None
    lifetime: Literal["detached"] | None = None
    scheduling: Literal["pack", "spread"] = "pack"
    node: str | None = None

    def __post_init__(self) -> None:
        for name in ("num_cpus", "num_gpus", "max_concurrency"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool):
                raise TypeError(f"remote_class: {name} must be an int, got {value!r}")
        if not 1 <= self.num_cpus <= MAX_CPUS:
            raise ValueError(f"remote_class: num_cpus must be 1..{MAX_CPUS} (no worker has more), got {self.num_cpus}")
        if not 0 <= self.num_gpus <= MAX_GPUS:
            raise ValueError(f"remote_class: num_gpus must be 0..{MAX_GPUS} (no worker has more), got {self.num_gpus}")
        if not 1 <= self.max_concurrency <= INT32_MAX:
            raise ValueError(f"remote_class: max_concurrency must be 1..{INT32_MAX}, got {self.max_concurrency}")
        memory = self.max_memory_mb
        if memory is not None and (
            not isinstance(memory, int) or isinstance(memory, bool) or not 1 <= memory <= MAX_MEMORY_MB
        ):
            raise ValueError(
                f"remote_class: max_memory_mb must be an int in 1..{MAX_MEMORY_MB} or None, got {memory!r:.60}"
            )
        if self.placement_timeout is not None and self.placement_timeout < 0:
            raise ValueError(f"remote_class: placement_timeout must be >= 0, got {self.placement_timeout}")
        if (
            not isinstance(self.max_restarts, int)
            or isinstance(self.max_restarts, bool)
            or not -1 <= self.max_restarts <= INT32_MAX
        ):
            raise ValueError(f"max_restarts must be an int in -1..{INT32_MAX} (-1: forever), got {self.max_restarts!r}")
        if self.name is not None:
            check_name(self.name, "options")
        if self.lifetime not in (None, "detached"):
            raise ValueError(f"lifetime must be None or 'detached', got {self.lifetime!r}")
        if self.scheduling not in ("pack", "spread"):
            raise ValueError(f"scheduling must be 'pack' or 'spread', got {self.scheduling!r}")
        if self.node is not None and (not isinstance(self.node, str) or not self.node):
            raise ValueError(f"node must be a worker id from status, got {self.node!r}")


def options_of(cls: type) -> ActorOptions:
    return getattr(cls, "_actorrt_options", None) or ActorOptions()
