"""Where each operation of a :class:`rl.learners.Learner`'s training runs: its :class:`Scheme`, checked
against the algorithm when the learner is built, and the presets :func:`a2c_scheme`,
:func:`impala_scheme` and :func:`off_policy_scheme`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from rl.algorithms import DQN, IMPALA, PPO
from rl.algorithms._off_policy import OffPolicyAlgorithm

__all__ = ["Scheme", "SchemeError", "a2c_scheme", "impala_scheme", "off_policy_scheme"]


class SchemeError(ValueError):
    """The scheme's parts do not fit together (or not with this algorithm)."""


@dataclass(frozen=True)
class Scheme:
    """Where each operation of training runs. Checked against the algorithm by :meth:`check`."""

    collection: Literal["local", "remote"] = "remote"
    num_collectors: int = 2
    collection_mode: Literal["sync", "async"] = "sync"
    gradients: Literal["central", "remote"] = "central"
    num_gradient_workers: int = 2
    gradient_mode: Literal["sync", "async"] = "sync"
    update: Literal["central", "decentralised"] = "central"
    broadcast_every: int = 1
    """Updates between weight broadcasts to asynchronous collectors (IMPALA's K)."""
    rollouts_in_flight: int = 2
    """Collect calls kept queued on each asynchronous collector, so it never waits for us."""
    max_queued_rollouts: int = 8
    """Rollouts waiting for the learner at most; collectors pause beyond it (memory stays flat)."""
    replay: Literal["none", "learner", "actor"] = "none"
    """``learner``: rollouts feed the learner's replay, updates sample from it (DDPG, TD3, SAC);
    ``actor``: the replay is an actor of its own, which remote collectors feed directly."""
    updates_per_step: float = 1.0
    """With a replay: updates per env step received (the update-to-data ratio)."""
    worker_timeout_s: float | None = 300.0
    """Seconds a worker may take to answer one call (a rollout, a gradient, a weight push); one
    that takes longer is hung (alive but stuck, e.g. in an environment's ``step``): it is killed
    and replaced like a dead one. None: no deadline."""

    def check(self, algorithm: Any) -> None:
        """Raise :class:`SchemeError` naming what does not fit."""
        name = type(algorithm).__name__
        if self.collection not in ("local", "remote"):
            raise SchemeError(f"collection must be 'local' or 'remote', not {self.collection!r}")
        if self.gradients not in ("central", "remote"):
            raise SchemeError(f"gradients must be 'central' or 'remote', not {self.gradients!r}")
        if self.update not in ("central", "decentralised"):
            raise SchemeError(f"update must be 'central' or 'decentralised', not {self.update!r}")
        if isinstance(algorithm, DQN):
            raise SchemeError("DQN learns from a replay buffer: use rl.train_dqn, not a rollout Learner")
        off_policy = isinstance(algorithm, OffPolicyAlgorithm)
        if self.replay not in ("none", "learner", "actor"):
            raise SchemeError(f"replay must be 'none', 'learner' or 'actor', not {self.replay!r}")
        if off_policy and self.replay == "none":
            raise SchemeError(f"{name} learns from a replay: set replay='learner' or 'actor' (see off_policy_scheme)")
        if self.replay != "none":
            if not off_policy:
                raise SchemeError(f"replay={self.replay!r} needs an off-policy algorithm (DDPG, TD3, SAC), not {name}")
            if self.replay == "actor" and self.collection != "remote":
                raise SchemeError("a replay actor is fed by remote collectors: set collection='remote'")
            if self.gradients != "central":
                raise SchemeError("with a replay the learner computes the gradients: set gradients='central'")
            if self.updates_per_step <= 0:
                raise SchemeError("updates_per_step must be > 0")
        if self.collection == "remote" and self.gradients == "central" and self.num_collectors < 1:
            raise SchemeError("remote collection needs num_collectors >= 1")
        if self.collection_mode == "async" and not isinstance(algorithm, (IMPALA, OffPolicyAlgorithm)):
            raise SchemeError(
                f"asynchronous collection feeds the learner rollouts from older policies; {name} has no "
                "off-policy correction (IMPALA's V-trace has; DDPG, TD3 and SAC learn from a replay): "
                "use collection_mode='sync'"
            )
        if self.collection_mode == "async" and self.collection == "local":
            raise SchemeError("asynchronous collection needs remote collectors (collection='remote')")
        if self.gradients == "remote":
            if self.num_gradient_workers < 1:
                raise SchemeError("remote gradients need num_gradient_workers >= 1")
            if self.collection == "remote" and self.collection_mode == "async":
                raise SchemeError("gradient workers collect their own rollouts: drop asynchronous collectors")
            if isinstance(algorithm, PPO):
                raise SchemeError(
                    "PPO takes many optimizer steps per rollout; remote gradient workers need an algorithm "
                    "with one step per rollout (A2C, PolicyGradient, IMPALA)"
                )
        if self.update == "decentralised":
            if self.gradients != "remote":
                raise SchemeError("a decentralised update happens in the gradient workers: set gradients='remote'")
            if self.gradient_mode != "sync":
                raise SchemeError(
                    "a decentralised update needs synchronous gradients: with async ones the workers' "
                    "weights would drift apart"
                )
        if self.broadcast_every < 1 or self.rollouts_in_flight < 1 or self.max_queued_rollouts < 1:
            raise SchemeError("broadcast_every, rollouts_in_flight and max_queued_rollouts must be >= 1")
        if self.worker_timeout_s is not None and not self.worker_timeout_s > 0:
            raise SchemeError(
                f"worker_timeout_s must be > 0 seconds (or None: no deadline), not {self.worker_timeout_s}"
            )


def a2c_scheme(num_collectors: int = 2) -> Scheme:
    """Synchronous A2C: broadcast weights, gather every collector's rollout, one update, repeat."""
    return Scheme(collection="remote", num_collectors=num_collectors, collection_mode="sync")


def impala_scheme(num_collectors: int = 2, broadcast_every: int = 1) -> Scheme:
    """IMPALA: collectors run ahead; the learner corrects with V-trace and broadcasts every K updates."""
    return Scheme(
        collection="remote", num_collectors=num_collectors, collection_mode="async", broadcast_every=broadcast_every
    )


def off_policy_scheme(
    num_collectors: int = 2,
    updates_per_step: float = 1.0,
    broadcast_every: int = 1,
    replay: Literal["learner", "actor"] = "learner",
) -> Scheme:
    """DDPG, TD3, SAC: collectors run ahead and feed the learner's replay; the learner keeps
    ``updates_per_step`` updates per env step received and broadcasts weights every K updates.
    ``num_collectors=0``: collect in the learner's own process instead. ``replay="actor"``: the
    replay lives in an actor of its own, which the collectors feed directly."""
    if num_collectors == 0:
        return Scheme(collection="local", replay=replay, updates_per_step=updates_per_step)
    return Scheme(
        collection="remote",
        num_collectors=num_collectors,
        collection_mode="async",
        replay=replay,
        updates_per_step=updates_per_step,
        broadcast_every=broadcast_every,
    )
