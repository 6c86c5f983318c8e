"""A Learner's scheme is checked against its algorithm when the learner is built: schemes that do
not fit fail at construction, with an error that says why (rl.learners.scheme)."""

from __future__ import annotations

from typing import Any

import pytest

from rl.learners import Learner, Scheme, SchemeError, impala_scheme, off_policy_scheme
from tests.rl.learner_agents import CONFIG, PENDULUM, make_a2c, make_impala, make_ppo, make_sac, pendulum_replay


@pytest.mark.parametrize(
    "scheme, make, message",
    [
        (impala_scheme(), make_a2c, "A2C has no off-policy correction"),
        (Scheme(collection="local", collection_mode="async"), make_impala, "needs remote collectors"),
        (Scheme(gradients="remote"), make_ppo, "PPO takes many optimizer steps"),
        (Scheme(update="decentralised"), make_a2c, "set gradients='remote'"),
        (Scheme(gradients="remote", gradient_mode="async", update="decentralised"), make_a2c, "weights would drift"),
        (Scheme(gradients="remote", collection_mode="async"), make_impala, "collect their own rollouts"),
        (Scheme(collection="remote", num_collectors=0), make_a2c, "num_collectors >= 1"),
        (Scheme(worker_timeout_s=0), make_a2c, "worker_timeout_s must be > 0"),
    ],
)
def test_schemes_that_do_not_fit_fail_at_construction(scheme: Scheme, make: Any, message: str) -> None:
    with pytest.raises(SchemeError, match=message):
        Learner(make, CONFIG, scheme)


@pytest.mark.parametrize(
    "scheme, make, message",
    [
        (impala_scheme(), make_sac, "SAC learns from a replay"),
        (off_policy_scheme(2), make_a2c, "needs an off-policy algorithm"),
        (Scheme(replay="learner", gradients="remote"), make_sac, "set gradients='central'"),
        (Scheme(replay="learner", updates_per_step=0), make_sac, "updates_per_step must be > 0"),
        (Scheme(collection="local", replay="actor"), make_sac, "fed by remote collectors"),
        (Scheme(replay="remote"), make_sac, "replay must be 'none', 'learner' or 'actor', not 'remote'"),  # type: ignore[arg-type]
    ],
)
def test_off_policy_schemes_that_do_not_fit(scheme: Scheme, make: Any, message: str) -> None:
    with pytest.raises(SchemeError, match=message):
        Learner(make, PENDULUM, scheme, replay=pendulum_replay())


@pytest.mark.parametrize("where", ["learner", "actor"])
def test_off_policy_scheme_needs_a_replay(where: Any) -> None:
    with pytest.raises(SchemeError, match=f"replay='{where}' needs a replay storage"):
        Learner(make_sac, PENDULUM, off_policy_scheme(2, replay=where))
