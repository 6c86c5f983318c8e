"""rl tests run with one torch thread, as training runs do (``rl.use_torch_threads``); importing
``rl`` itself leaves torch's settings alone. ``rl_cluster``: the learner tests' cluster."""

from collections.abc import Iterator

import pytest

import actorrt
import rl

rl.use_torch_threads(1)


@pytest.fixture(scope="module")
def rl_cluster() -> Iterator[actorrt.Cluster]:
    """An embedded cluster of two slots for a module's learner tests (the rl.learners workers preloaded)."""
    from tests.conftest import shared_embedded_cluster

    with shared_embedded_cluster(num_cpus=2, preload=["rl.learners"]) as c:
        yield c
