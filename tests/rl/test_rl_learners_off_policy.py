"""Distributed learners on a real embedded cluster, off-policy (DDPG, TD3, SAC): collectors feed
the learner's replay or a replay actor, the update-to-data ratio holds, the warm-up ends in every
collector, prioritised replay gets its priorities, and checkpoints keep (or refill) the replay."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

import actorrt
import rl
import rl.learners.pool
from rl.collector import env_spaces
from rl.learners import Learner, Scheme, off_policy_scheme
from rl.metrics import LearnerMetrics
from tests.rl.faulty_envs import SlowReplacement
from tests.rl.learner_agents import (
    PENDULUM,
    make_sac,
    make_td3,
    on,
    pendulum_replay,
    prioritised_replay,
)


def _sac_learner(where: Any = "learner", replay: rl.UniformReplay | None = None, **options: Any) -> Learner:
    """SAC on Pendulum: one remote collector feeds the learner's replay (or, ``where="actor"``, a
    replay actor), 0.25 updates per env step on batches of 32 after a warm-up of 256 env steps."""
    settings: dict[str, Any] = {"batch_size": 32, "learning_starts": 256, **options}
    scheme = off_policy_scheme(1, updates_per_step=0.25, replay=where)
    return Learner(make_sac, PENDULUM, scheme, replay=pendulum_replay() if replay is None else replay, **settings)


async def _train_and_save(path: str, steps: int, replay: bool = True) -> int:
    """A :func:`_sac_learner` run of ``steps`` env steps, saved to ``path`` (with its replay or
    not); the env steps it took."""
    async with _sac_learner() as learner:
        await learner.train(steps)
        await learner.save(path, replay=replay)
        return learner.env_steps


@pytest.mark.parametrize(
    "scheme",
    [
        off_policy_scheme(2, updates_per_step=0.5, broadcast_every=40),
        off_policy_scheme(0, updates_per_step=0.5),
        Scheme(num_collectors=2, collection_mode="sync", replay="learner", updates_per_step=0.5),
        off_policy_scheme(1, updates_per_step=0.5, broadcast_every=40, replay="actor"),
    ],
    ids=["async remote", "local", "sync remote", "replay actor"],
)
def test_off_policy_learner_keeps_its_update_to_data_ratio(rl_cluster: actorrt.Cluster, scheme: Scheme) -> None:
    metrics = LearnerMetrics("offpolicy")

    async def go() -> Any:
        replay = pendulum_replay()
        async with Learner(
            make_sac, PENDULUM, scheme, replay=replay, batch_size=32, learning_starts=256, metrics=metrics
        ) as learner:
            result = await learner.train(1500)
            algorithm = learner.agent.algorithm
            assert isinstance(algorithm, rl.SAC)
            if scheme.replay == "actor":
                assert len(replay) == 0  # the collectors fed the actor's copy, never this one
                stored = await learner.replay_actor.size()
            else:
                stored = len(replay)
            return result, stored, learner.version, algorithm.uniform_exploration

    result, stored, version, uniform = on(rl_cluster, go())
    if scheme.replay == "actor":
        # Collectors run ahead: rollouts queued for the learner (or in flight) are already stored.
        ahead = (scheme.rollouts_in_flight + scheme.max_queued_rollouts) * 32
        assert result.env_steps <= stored <= result.env_steps + ahead and result.env_steps >= 1500
    else:
        assert stored == result.env_steps >= 1500
    # 0.5 updates per env step from the rollout that crossed learning_starts (32 steps each).
    assert 0.5 * (result.env_steps - 256 - 32) <= result.updates <= 0.5 * (result.env_steps - 256 + 32)
    assert not uniform
    assert (
        metrics.registry.get_sample_value("actorrt_rl_learner_updates_total", {"learner": "offpolicy"})
        == result.updates
    )
    if scheme.collection == "remote" and scheme.collection_mode == "async":
        # 16 updates per 32-step rollout: a broadcast every third rollout (48 >= 40 updates).
        assert result.updates // 48 - 1 <= version <= result.updates // 40


def test_off_policy_collectors_warm_up_uniformly_then_follow_the_policy(rl_cluster: actorrt.Cluster) -> None:
    """Actions of the warm-up cover [-2, 2] evenly and independently; afterwards they come from
    TD3's policy (deterministic plus noise of std 0.2), so an environment's consecutive actions
    are close to each other (a collector runs at most 10 rollouts, 320 rows, ahead of the
    learner, so few later rows can still be warm-up ones).

    Rows are a rollout's ``[T, B]`` flattened, so with 2 environments row ``i + 2`` is the step
    after row ``i`` in the same environment. Independent uniform actions on [-2, 2] are 4/3
    apart on average. (The later actions' distance to the uniform distribution was checked
    before; with a young policy spread over the range it came out as low as 0.147 against a
    bar of 0.15.)"""

    async def go() -> Any:
        replay = pendulum_replay()
        async with Learner(
            make_td3,
            PENDULUM,
            off_policy_scheme(1, updates_per_step=0.1),
            replay=replay,
            batch_size=32,
            learning_starts=512,
        ) as learner:
            await learner.train(512)
            warm = replay.actions[: len(replay)].copy()
            await learner.train(3000)
            return warm, replay.actions[512 : len(replay)].copy()

    def ks_to_uniform(a: np.ndarray) -> float:  # max |ECDF - CDF of U(-2, 2)|
        x = np.sort(a.ravel())
        return float(np.max(np.abs(np.arange(1, len(x) + 1) / len(x) - (x + 2) / 4)))

    def step_to_step(a: np.ndarray) -> float:  # mean |a_{t+1} - a_t| within an environment
        return float(np.mean(np.abs(a[2:] - a[:-2])))

    warm, later = on(rl_cluster, go())
    assert len(warm) == 512 and len(later) > 1000
    assert ks_to_uniform(warm) < 0.08, ks_to_uniform(warm)  # 1% critical value for n = 512: 0.072
    assert step_to_step(warm) > 1.1, step_to_step(warm)
    assert step_to_step(later) < 0.7, step_to_step(later)


async def _train_killing_a_collector(learner: Learner, total_steps: int) -> Any:
    """``learner.train(total_steps)``, with collector 0 SIGKILLed once 10 updates were taken."""
    assert learner._pool is not None
    pid = await learner._pool.handles[0].pid()
    training = asyncio.ensure_future(learner.train(total_steps))
    while learner.updates < 10:
        await asyncio.sleep(0.05)
    os.kill(pid, signal.SIGKILL)
    return await training


def test_a_killed_off_policy_collector_is_replaced(rl_cluster: actorrt.Cluster) -> None:
    async def go() -> Any:
        async with Learner(
            make_sac,
            PENDULUM,
            off_policy_scheme(2, updates_per_step=0.25),
            replay=pendulum_replay(),
            batch_size=32,
            learning_starts=256,
        ) as learner:
            return await _train_killing_a_collector(learner, 4000)

    result = on(rl_cluster, go())
    assert result.replaced_workers == 1 and result.env_steps >= 4000


# -- off-policy: a replay actor, fed by the collectors directly --------------------------------------


@pytest.mark.parametrize("where", ["learner", "actor"])
def test_prioritised_replay_gets_the_priorities_and_beta_wherever_it_is(
    rl_cluster: actorrt.Cluster, where: Any
) -> None:
    """Prioritised replay in the learner or in its own actor: the TD errors of the updates set the
    priorities there, beta is annealed towards 1 (as rl.train_off_policy does), and a collector
    SIGKILLed mid-run is replaced by one that feeds the same replay."""

    async def go() -> Any:
        replay = prioritised_replay()
        async with _sac_learner(where, replay) as learner:
            result = await _train_killing_a_collector(learner, 3000)
            if where == "actor":
                replay = await actorrt.get_attr(learner.replay_actor, "replay")
            return result, replay

    result, stored = on(rl_cluster, go())
    assert result.replaced_workers == 1 and result.env_steps >= 3000
    # Every counted step reached the replay (and, for the actor, the rollouts collectors ran ahead with).
    ahead = (Scheme().rollouts_in_flight + Scheme().max_queued_rollouts + 1) * 32 if where == "actor" else 0
    assert len(stored) == stored.total_added and result.env_steps <= len(stored) <= result.env_steps + ahead
    priorities = stored.tree[np.arange(len(stored))]
    # New transitions enter at the largest priority so far; the ones learned from got |TD error| + eps.
    assert len(np.unique(priorities)) > result.updates, "the learner's TD errors never reached the replay"
    # Annealed linearly from 0.4 to 1 over the 3000 steps: at the last update's rollout, ~0.98.
    assert 0.95 <= stored.beta <= 1.0, stored.beta


def test_a_dead_replay_actor_ends_training_with_an_error_that_names_it(rl_cluster: actorrt.Cluster) -> None:
    """Its transitions are gone: training stops with ReplayLostError (no collector is 'replaced'
    for it), and closing the learner frees every slot."""

    async def go() -> Any:
        async with _sac_learner("actor") as learner:
            assert learner.replay_actor is not None
            training = asyncio.ensure_future(learner.train(100_000))
            while learner.updates < 10:
                await asyncio.sleep(0.05)
            await actorrt.kill(learner.replay_actor)
            with pytest.raises(Exception, match="the replay actor died") as caught:
                await asyncio.wait_for(training, 60)
            return caught.value, learner.replaced

    error, replaced = on(rl_cluster, go())
    assert replaced == 0, "a collector was replaced for the replay actor's death"
    assert "ReplayLostError" in type(error).__name__ + str(error)
    status = rl_cluster.status().result()
    assert status.slots_used == 0, status.actors


def test_a_replay_actor_keeps_the_priority_of_a_slot_overwritten_since_it_was_sampled() -> None:
    """The class itself, in this process: TD errors for rows sampled before a collector wrote
    over their slots must not replace the new transitions' (maximal) priorities."""
    from rl.learners.workers import ReplayActor

    replay = rl.PrioritizedReplay(8, (3,), (1,), seed=0)
    server = ReplayActor(replay)
    step = rl.Collector(rl.CollectorConfig("Pendulum-v1", num_envs=1, num_steps=8, seed=0), make_sac())
    try:
        server.add_rollout(step.collect())  # fills all 8 slots
        batch, stamps = server.sample(8, 1)
        server.add_rollout(step.collect())  # a collector wraps the ring: every slot is new
    finally:
        step.close()
    server.update_priorities(batch.indices, np.full(len(batch.indices), 0.001), stamps)
    tree = replay.tree
    np.testing.assert_array_equal(tree[np.arange(8)], np.ones(8))  # untouched: still the entry priority
    batch, stamps = server.sample(8, 1)
    server.update_priorities(batch.indices, np.full(len(batch.indices), 0.001), stamps)
    assert tree[np.unique(batch.indices)].max() < 0.1  # fresh rows take their TD errors


def test_off_policy_training_returns_with_nothing_left_to_add_to_the_replay_actor(
    rl_cluster: actorrt.Cluster, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Collect calls still queued on a collector when ``train`` reaches its step count finish
    before it returns: nothing is added to the replay actor afterwards, so a checkpoint saved
    next holds all this run will ever put there (and no collector works on for the learner).
    The wait is bounded: past it ``train`` returns anyway, says so, and the next one goes on."""
    scheme = off_policy_scheme(1, updates_per_step=0.25, replay="actor")  # with the replay actor: 2 slots
    options: dict[str, Any] = {"batch_size": 32, "learning_starts": 10_000}  # no update: the learner waits on rollouts

    async def go() -> list[int]:
        async with Learner(make_sac, PENDULUM, scheme, replay=pendulum_replay(), **options) as learner:
            sizes = []
            for total in (256, 512):
                await learner.train(total)
                assert learner.replay_actor is not None
                sizes.append(await learner.replay_actor.size())  # not queued behind the collector's calls
                await asyncio.sleep(0.5)
                sizes.append(await learner.replay_actor.size())
            monkeypatch.setattr(rl.learners.pool, "SETTLE_S", 0.0)
            with caplog.at_level(logging.WARNING, logger="rl.learner"):
                await learner.train(768)
            await learner.train(1024)
            sizes.append(learner.env_steps)
            return sizes

    sizes = on(rl_cluster, go())
    assert sizes[0] == sizes[1] and sizes[2] == sizes[3], sizes
    assert sizes[2] >= 512 and sizes[4] >= 1024, sizes
    said = [r.getMessage() for r in caplog.records if r.name == "rl.learner"]
    assert said and set(said) == {"1 of 1 collectors were still busy 0s after training stopped"}, said


# -- off-policy checkpoints --------------------------------------------------------------------------


@pytest.mark.parametrize("where", ["learner", "actor"])
def test_off_policy_checkpoints_keep_the_replay(rl_cluster: actorrt.Cluster, tmp_path: Path, where: Any) -> None:
    """The replay is part of the run: a restored learner has every transition (taken from the
    replay actor when one held them) and takes updates again with its first rollout."""
    path = str(tmp_path / "sac.pt")

    async def first() -> tuple[int, np.ndarray]:
        async with _sac_learner(where) as learner:
            await learner.train(1000)
            await learner.save(path)
            held = await actorrt.get_attr(learner.replay_actor, "replay") if where == "actor" else learner.replay
            assert held is not None
            if where == "actor":  # its replay lives in the actor: a restore now could not replace it
                for replay in (True, False):
                    await learner.save(path + ".again", replay=replay)
                    with pytest.raises(RuntimeError, match="replay actor is running"):
                        learner.restore(path + ".again")
            return learner.updates, held.obs[: len(held)].copy()

    async def second() -> tuple[int, np.ndarray, int]:
        learner = _sac_learner(where)
        learner.restore(path)
        assert learner.replay is not None
        restored = learner.replay.obs[: len(learner.replay)].copy()
        async with learner:
            updates_before = learner.updates
            await learner.train(learner.env_steps + 64)
            return updates_before, restored, learner.updates

    updates, held = on(rl_cluster, first())
    updates_before, restored, updates_after = on(rl_cluster, second())
    assert updates_before == updates
    np.testing.assert_array_equal(restored, held)  # the actor's copy held more than the learner counted
    assert updates_after >= updates + 16  # 0.25 per env step from the first rollout on


def test_an_off_policy_checkpoint_without_its_replay_refills_it_before_learning(
    rl_cluster: actorrt.Cluster, tmp_path: Path
) -> None:
    """``save(replay=False)``: the restored run acts with its policy (no uniform warm-up) for
    ``learning_starts`` env steps and takes no update until then, rather than fitting the critics
    to the first few rollouts."""
    path = str(tmp_path / "sac.pt")

    async def second() -> tuple[int, int, int, int, int]:
        learner = _sac_learner()
        learner.restore(path)
        restored_updates = learner.updates
        async with learner:
            start = learner.env_steps
            await learner.train(start + 192)
            refilling = learner.updates
            await learner.train(start + 512)
            assert learner.replay is not None
            return start, restored_updates, refilling, learner.updates, len(learner.replay)

    steps = on(rl_cluster, _train_and_save(path, 1000, replay=False))
    start, restored_updates, refilling, updates_after, held = on(rl_cluster, second())
    assert start == steps
    assert held >= 512  # an empty replay, refilled with what the second run collected
    # No update before the replay held learning_starts transitions again; then 0.25 per step.
    assert refilling == restored_updates > 0
    assert updates_after - refilling >= 0.25 * (512 - 256 - 32)


def test_restoring_a_checkpoint_without_its_replay_between_train_calls_empties_the_replay(
    rl_cluster: actorrt.Cluster, tmp_path: Path
) -> None:
    """Between two ``train`` calls too: the learner's replay used to keep the transitions of the
    run the checkpoint was not saved from, and the next updates sampled them."""
    path = str(tmp_path / "sac.pt")

    async def go() -> tuple[int, int, int]:
        async with _sac_learner() as learner:
            await learner.train(600)
            await learner.save(path, replay=False)
            await learner.train(1000)
            learner.restore(path)
            assert learner.replay is not None
            emptied = len(learner.replay)
            updates, start = learner.updates, learner.env_steps
            await learner.train(start + 192)  # refilling: no update on a replay of a few rollouts
            return emptied, updates, learner.updates

    emptied, updates, after_refill = on(rl_cluster, go())
    assert emptied == 0 and after_refill == updates


def test_restoring_a_replay_into_a_learner_with_another_replay_is_an_error(
    rl_cluster: actorrt.Cluster, tmp_path: Path
) -> None:
    path = str(tmp_path / "sac.pt")

    async def first() -> None:
        async with Learner(
            make_sac, PENDULUM, off_policy_scheme(1), replay=pendulum_replay(), learning_starts=64
        ) as learner:
            await learner.train(128)
            await learner.save(path)

    on(rl_cluster, first())
    obs, act = env_spaces(PENDULUM)
    assert obs.shape is not None and act.shape is not None
    other = Learner(make_sac, PENDULUM, off_policy_scheme(1), replay=rl.UniformReplay(1000, obs.shape, act.shape))
    with pytest.raises(
        ValueError, match="UniformReplay of capacity 50000; this learner has a UniformReplay of capacity 1000"
    ):
        other.restore(path)


def test_restoring_after_start_reaches_the_collectors(rl_cluster: actorrt.Cluster, tmp_path: Path) -> None:
    """``restore`` inside ``async with``: the collectors were told to act uniformly at random when
    the learner started at 0 env steps, and only the warm-up's end (never reached again) would have
    told them otherwise: SAC trained on random actions for the rest of the run. Now the next
    ``train`` gives them the restored weights and warm-up."""
    path = str(tmp_path / "sac.pt")

    async def second() -> tuple[bool, int, int]:
        async with _sac_learner() as learner:
            assert learner._pool is not None
            handle = learner._pool.handles[0]
            learner.restore(path)
            restored_version = learner.version
            await learner.train(learner.env_steps + 32)
            collector = await actorrt.get_attr(handle, "collector")
            return (
                collector.agent.algorithm.uniform_exploration,
                await actorrt.get_attr(handle, "version"),
                restored_version,
            )

    on(rl_cluster, _train_and_save(path, 600))
    uniform, version, restored_version = on(rl_cluster, second())
    assert not uniform
    assert restored_version > 0 and version >= restored_version  # the restored weights, or later ones


def test_save_after_close_refuses_a_replay_the_replay_actor_held(rl_cluster: actorrt.Cluster, tmp_path: Path) -> None:
    """``close`` stops the replay actor: a save after it wrote the learner's empty starting replay
    beside the run's env step count, and a restore then learned from nothing."""
    path = str(tmp_path / "sac.pt")

    async def go() -> None:
        learner = Learner(
            make_sac, PENDULUM, off_policy_scheme(1, replay="actor"), replay=pendulum_replay(), learning_starts=64
        )
        async with learner:
            await learner.train(128)
        with pytest.raises(RuntimeError, match=r"save\(\) after close\(\) with replay='actor'"):
            await learner.save(path)
        await learner.save(path, replay=False)  # the models and counters still can be

    on(rl_cluster, go())
    assert "replay" not in torch.load(path, weights_only=False)


def test_a_replacement_set_up_when_training_stops_is_set_up_whole(rl_cluster: actorrt.Cluster, tmp_path: Path) -> None:
    """Training stopped (here cancelled) while a dead collector's replacement was being set up:
    the pump's cancellation cut the set-up short, and the replacement stayed in the pool with its
    starting weights and, with a replay actor, nothing to feed: its rollouts then went into the
    learner's stale copy of the replay. Now the set-up finishes before ``train`` returns."""
    marker = str(tmp_path / "slow")
    make_agent = SlowReplacement(marker, seconds=3.0)

    async def go() -> tuple[Any, int]:
        learner = Learner(
            make_agent, PENDULUM, off_policy_scheme(1, replay="actor"), replay=pendulum_replay(), learning_starts=64
        )
        async with learner:
            assert learner._pool is not None
            await learner.train(256)
            open(marker, "w").close()  # workers started from now on are slow to take their weights
            os.kill(await learner._pool.handles[0].pid(), signal.SIGKILL)
            training = asyncio.ensure_future(learner.train(10**9))
            while not os.path.exists(marker + ".setting"):  # the replacement is taking its weights
                assert not training.done(), training.result()
                await asyncio.sleep(0.05)
            training.cancel()
            with pytest.raises(asyncio.CancelledError):
                await training
            replacement = learner._pool.handles[0]
            return await actorrt.get_attr(replacement, "replay"), await actorrt.get_attr(replacement, "version")

    replay, version = on(rl_cluster, go())
    assert replay is not None and version >= 0


def test_a_collector_dead_when_a_restore_is_pushed_is_replaced(rl_cluster: actorrt.Cluster, tmp_path: Path) -> None:
    """The push of a restored state at the next ``train`` meets a collector that died since:
    it is replaced (and given that state), as a death in training is; it used to end ``train``
    with ``ActorDiedError`` and leave the next ``train`` without the push."""
    path = str(tmp_path / "sac.pt")

    async def go() -> tuple[int, bool]:
        async with _sac_learner() as learner:
            assert learner._pool is not None
            await learner.train(600)
            await learner.save(path)
            os.kill(await learner._pool.handles[0].pid(), signal.SIGKILL)
            learner.restore(path)
            await learner.train(learner.env_steps + 64)
            collector = await actorrt.get_attr(learner._pool.handles[0], "collector")
            return learner.replaced, collector.agent.algorithm.uniform_exploration

    replaced, uniform = on(rl_cluster, go())
    assert replaced == 1 and not uniform
