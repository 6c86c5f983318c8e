"""The one lifecycle every process kind shares: start, close, async with, a status."""

from __future__ import annotations

import enum
from types import TracebackType
from typing import Any


class Status(enum.Enum):
    CREATED = "created"
    STARTING = "starting"
    RUNNING = "running"
    CLOSING = "closing"
    CLOSED = "closed"
    FAILED = "failed"


class Service:
    """Subclasses implement ``_start`` and ``_close``; ``_close`` must tolerate a half start."""

    status: Status = Status.CREATED

    async def start(self) -> Any:
        if self.status is not Status.CREATED:
            raise RuntimeError(f"{type(self).__name__} cannot start from status {self.status.value}")
        self.status = Status.STARTING
        try:
            await self._start()
        except BaseException:
            self.status = Status.FAILED
            await self._close()
            raise
        self.status = Status.RUNNING
        return self

    async def close(self) -> None:
        if self.status in (Status.CLOSING, Status.CLOSED, Status.CREATED):
            return
        self.status = Status.CLOSING
        try:
            await self._close()
        finally:
            self.status = Status.CLOSED

    async def __aenter__(self) -> Any:
        return await self.start()

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    async def _start(self) -> None:
        raise NotImplementedError

    async def _close(self) -> None:
        raise NotImplementedError
