"""What the cluster table's state objects share: the invariant error and read-only records.

Each part of the table (``workers``, ``placement_queue``, ``names``, ``references``,
``restarts``, ``clients``, ``deaths``) is a plain object on the master's loop: transitions are
its methods, and ``validate()`` raises ``TableInvariantError`` naming the first invariant it
finds broken. Those that keep records by id read like a dict (``Records``); only their own
transitions change them.
"""

from __future__ import annotations

from collections.abc import ItemsView, Iterator, KeysView, Mapping, ValuesView
from typing import TypeVar, overload

__all__ = ["Records", "TableInvariantError", "check"]

K = TypeVar("K")
V = TypeVar("V")
T = TypeVar("T")


class TableInvariantError(AssertionError):
    """``validate()`` found the table inconsistent: a bug in the table or its caller."""


def check(ok: bool, what: str) -> None:
    """Raises ``TableInvariantError(what)`` unless ``ok``."""
    if not ok:
        raise TableInvariantError(what)


class Records(Mapping[K, V]):
    """A state object's records by id, read like a dict (lookups as fast as a dict's: a placement
    makes several). Not changed through this interface: only by the object's transitions."""

    def __init__(self, records: dict[K, V]) -> None:
        self._records = records

    def __getitem__(self, key: K) -> V:
        return self._records[key]

    def __iter__(self) -> Iterator[K]:
        return iter(self._records)

    def __len__(self) -> int:
        return len(self._records)

    def __contains__(self, key: object) -> bool:
        return key in self._records

    @overload
    def get(self, key: K, /) -> V | None: ...

    @overload
    def get(self, key: K, default: V | T, /) -> V | T: ...

    def get(self, key: K, default: V | T | None = None, /) -> V | T | None:
        return self._records.get(key, default)

    def keys(self) -> KeysView[K]:
        return self._records.keys()

    def values(self) -> ValuesView[V]:
        return self._records.values()

    def items(self) -> ItemsView[K, V]:
        return self._records.items()
