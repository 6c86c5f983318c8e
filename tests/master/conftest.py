"""``validate_every_table``: the tests of the cluster table and its parts (``pytestmark``) have
every table and recovery they built validated when they end."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from actorrt.master.recovery import Recovery
from actorrt.master.table import ClusterTable


@pytest.fixture
def validate_every_table(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """After the test, every ClusterTable and Recovery it built must pass ``validate()`` (dask's
    ``validate_state`` idea): a test that leaves one inconsistent fails here."""
    built: list[ClusterTable | Recovery] = []

    def tracking(init: Callable[..., None]) -> Callable[..., None]:
        def tracking_init(self: ClusterTable | Recovery, *args: object, **kwargs: object) -> None:
            init(self, *args, **kwargs)
            built.append(self)

        return tracking_init

    monkeypatch.setattr(ClusterTable, "__init__", tracking(ClusterTable.__init__))
    monkeypatch.setattr(Recovery, "__init__", tracking(Recovery.__init__))
    yield
    for state in built:
        state.validate()
