"""Distributed learners on a real embedded cluster, on-policy: every scheme runs, workers that
die are replaced, rollouts collected as a run ends are carried to the next, checkpoints resume.
The off-policy schemes are tests/rl/test_rl_learners_off_policy.py; each loop alone, driven by
its events, tests/rl/test_rl_learner_loops.py."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import actorrt
import rl
from rl.learners import Learner, Scheme, a2c_scheme, impala_scheme
from rl.learners.loops import AsyncCollection
from rl.learners.workers import WorkerFailedError
from rl.metrics import LearnerMetrics
from tests.rl.faulty_envs import FailingSetWeights, OneProcessOnly, dying_cartpole
from tests.rl.learner_agents import (
    CONFIG,
    make_a2c,
    make_impala,
    make_normalized_a2c,
    make_normalized_impala,
    on,
)


def _run(cluster: actorrt.Cluster, make: Any, scheme: Scheme, steps: int, tmp_path: Path) -> Any:
    metrics = LearnerMetrics("test")

    async def go() -> Any:
        logger = rl.TrainingLogger(str(tmp_path / "run"), steps, tensorboard=False, progress=False)
        try:
            async with Learner(make, CONFIG, scheme, logger=logger, metrics=metrics) as learner:
                result = await learner.train(steps)
                weights = []
                if scheme.gradients == "remote":
                    assert learner._pool is not None
                    weights = [await h.get_weights() for h in learner._pool.handles]
                return result, learner.agent.get_weights(), weights
        finally:
            logger.close()

    result, central, remote = on(cluster, go())
    assert result.env_steps >= steps and result.updates > 0 and result.frames_per_s > 0
    assert (tmp_path / "run" / "updates.csv").read_text().count("\n") > 1
    sample = metrics.registry.get_sample_value  # exported as Prometheus metrics too
    assert sample("actorrt_rl_env_frames_total", {"learner": "test"}) == result.env_steps
    assert sample("actorrt_rl_learner_updates_total", {"learner": "test"}) == result.updates
    assert sample("actorrt_rl_weight_lag", {"learner": "test"}) is not None
    return result, central, remote


@pytest.mark.parametrize(
    "name, make, scheme",
    [
        ("impala: async remote collection", make_impala, impala_scheme(2)),
        ("impala with a normaliser: async remote collection", make_normalized_impala, impala_scheme(2)),
        ("a2c: sync remote collection", make_a2c, a2c_scheme(2)),
        ("local collection", make_a2c, Scheme(collection="local")),
        ("sync gradient workers, central update", make_a2c, Scheme(gradients="remote", num_gradient_workers=2)),
        (
            "async gradient workers (A3C)",
            make_a2c,
            Scheme(gradients="remote", num_gradient_workers=2, gradient_mode="async"),
        ),
    ],
)
def test_every_scheme_trains(rl_cluster: actorrt.Cluster, tmp_path: Path, name: str, make: Any, scheme: Scheme) -> None:
    result, _, _ = _run(rl_cluster, make, scheme, 3000, tmp_path)
    if scheme.collection_mode == "sync" and scheme.gradients == "central":
        assert result.mean_weight_lag == 0  # synchronous: always the newest weights


def test_decentralised_update_keeps_every_copy_equal(rl_cluster: actorrt.Cluster, tmp_path: Path) -> None:
    scheme = Scheme(gradients="remote", num_gradient_workers=2, update="decentralised")
    _, central, remote = _run(rl_cluster, make_a2c, scheme, 2000, tmp_path)
    for weights in remote:  # no weight was ever broadcast, yet all copies agree
        for k in central:
            np.testing.assert_allclose(weights[k], central[k], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(
    "scheme",
    [
        Scheme(gradients="remote", num_gradient_workers=2),
        Scheme(gradients="remote", num_gradient_workers=2, gradient_mode="async"),
        Scheme(gradients="remote", num_gradient_workers=2, update="decentralised"),
    ],
    ids=["sync central", "async central", "decentralised"],
)
def test_gradient_workers_statistics_reach_the_learner_and_every_copy(
    rl_cluster: actorrt.Cluster, scheme: Scheme
) -> None:
    """A normaliser's statistics grow in the gradient workers, which learn from the rollouts: the
    learner merges what each took in (it used to keep its initial statistics and broadcast them,
    wiping the workers' every update), and every copy ends up with the same statistics."""

    async def go() -> tuple[int, dict[str, np.ndarray], list[dict[str, np.ndarray]]]:
        async with Learner(make_normalized_a2c, CONFIG, scheme) as learner:
            assert learner._pool is not None
            await learner.train(1280)
            if scheme.update == "central":  # the newest weights to every copy, as the next round would
                for h in learner._pool.handles:
                    await h.set_weights(learner.agent.get_weights(), learner.version)
            remote = [await h.get_weights() for h in learner._pool.handles]
            return learner.env_steps, learner.agent.get_weights(), remote

    env_steps, central, remote = on(rl_cluster, go())
    # every env step the workers learned from, once: observations and discounted returns alike
    assert central["obs_rms.count"] == env_steps and central["ret_rms.count"] == env_steps
    assert 0 < central["ret_rms.var"] != 1.0 and not np.allclose(central["obs_rms.mean"], 0.0)
    for weights in remote:
        for k in ("obs_rms.mean", "obs_rms.var", "obs_rms.count", "ret_rms.mean", "ret_rms.var", "ret_rms.count"):
            np.testing.assert_allclose(weights[k], central[k], rtol=1e-9)


def test_a_replaced_worker_of_a_decentralised_update_stays_equal_to_the_others(rl_cluster: actorrt.Cluster) -> None:
    """The replacement gets the learner's optimizer state too: from then on the same averaged
    gradients move every copy alike (with fresh Adam moments it would drift away for good)."""
    scheme = Scheme(gradients="remote", num_gradient_workers=2, update="decentralised")

    async def go() -> tuple[int, dict[str, np.ndarray], list[dict[str, np.ndarray]]]:
        async with Learner(make_a2c, CONFIG, scheme) as learner:
            assert learner._pool is not None
            await learner.train(640)
            os.kill(await learner._pool.handles[0].pid(), signal.SIGKILL)
            await learner.train(learner.env_steps + 1280)
            remote = [await h.get_weights() for h in learner._pool.handles]
            return learner.replaced, learner.agent.get_weights(), remote

    replaced, central, remote = on(rl_cluster, go())
    assert replaced == 1
    for weights in remote:
        for k in central:
            np.testing.assert_allclose(weights[k], central[k], rtol=1e-5, atol=1e-6)


def test_a_killed_collector_is_replaced_and_training_goes_on(rl_cluster: actorrt.Cluster, tmp_path: Path) -> None:
    async def go() -> Any:
        async with Learner(make_impala, CONFIG, impala_scheme(2)) as learner:
            assert learner._pool is not None
            pid = await learner._pool.handles[0].pid()
            training = asyncio.ensure_future(learner.train(20_000))
            while learner.updates < 3:
                await asyncio.sleep(0.05)
            os.kill(pid, signal.SIGKILL)
            return await training

    result = on(rl_cluster, go())
    assert result.replaced_workers == 1 and result.env_steps >= 20_000


@pytest.mark.parametrize("kind", ["a2c", "impala"])
def test_a_hung_collector_is_killed_and_replaced(rl_cluster: actorrt.Cluster, kind: str) -> None:
    """A collector that stays alive but never answers (stuck in an environment's step; here its
    process is stopped with SIGSTOP) used to hold a synchronous scheme forever, and an
    asynchronous one went on without its share for good. Past ``worker_timeout_s`` it is
    killed as hung and replaced like a dead one. (IMPALA's other collector may reach the step
    count alone first: then the hung one is killed while ``train`` finishes its calls, and
    replaced by the next ``train``.)"""
    steps = 4_000

    async def go() -> tuple[Any, list[str]]:
        scheme = replace(a2c_scheme(2) if kind == "a2c" else impala_scheme(2), worker_timeout_s=2.0)
        make = make_a2c if kind == "a2c" else make_impala
        async with Learner(make, CONFIG, scheme) as learner:
            assert learner._pool is not None
            hung = learner._pool.handles[0]
            pid = await hung.pid()
            training = asyncio.ensure_future(learner.train(steps))
            while learner.updates < 3:
                await asyncio.sleep(0.05)
            os.kill(pid, signal.SIGSTOP)
            try:
                result = await asyncio.wait_for(training, 90)
                if kind == "impala" and not learner.replaced:
                    result = await asyncio.wait_for(learner.train(learner.env_steps + 1_000), 90)
            finally:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            return result, [h.actor_id for h in learner._pool.handles] + [hung.actor_id]

    result, ids = on(rl_cluster, go())
    assert result.replaced_workers == 1 and result.env_steps >= steps
    assert ids[-1] not in ids[:-1]  # the hung one was replaced
    status = rl_cluster.status().result()
    assert status.slots_used == 0, status.actors


def test_rollouts_collected_as_train_ends_are_carried_to_the_next_train(rl_cluster: actorrt.Cluster) -> None:
    """Asynchronous collectors keep rollouts queued and in flight; when ``train`` reached its step
    count they were dropped (never learned from, their env steps not counted): a run trained in
    many short calls lost up to collectors x rollouts_in_flight + max_queued_rollouts rollouts
    per call. They are finished, kept, and learned from first by the next ``train``."""

    async def go() -> tuple[int, int, int, int]:
        async with Learner(make_impala, CONFIG, impala_scheme(2)) as learner:
            assert learner._pool is not None
            for k in range(1, 4):
                await learner.train(600 * k)
            collected = sum(await asyncio.gather(*[h.env_steps() for h in learner._pool.handles]))
            assert isinstance(learner._loop, AsyncCollection)
            carried = sum(r.num_steps for r, _, _ in learner._loop.pumps.carried)
            counted = learner.env_steps
            await learner.train(learner.env_steps + 1)  # learns from the carried ones first
            return collected, counted + carried, carried, learner.replaced

    collected, accounted, carried, replaced = on(rl_cluster, go())
    assert replaced == 0 and collected == accounted
    assert carried > 0  # the collectors were busy when train ended: the test saw what it tests


def test_a_collector_that_dies_every_time_ends_training_with_a_clear_error(rl_cluster: actorrt.Cluster) -> None:
    """A crash loop (here an env that kills its process at its first step) is not replaced
    forever: after three replacements that each died before delivering a rollout, train raises."""

    async def go() -> tuple[BaseException, int]:
        async with Learner(make_impala, CONFIG, impala_scheme(1), env_fn=dying_cartpole) as learner:
            with pytest.raises(WorkerFailedError) as caught:
                await asyncio.wait_for(learner.train(10_000), 60)
            return caught.value, learner.replaced

    error, replaced = on(rl_cluster, go())
    assert str(error).startswith(
        "RemoteCollector 0 died 4 times in a row without delivering a result; not replacing it again (last: "
    ), error
    assert replaced == 3
    status = rl_cluster.status().result()
    assert status.slots_used == 0, status.actors


def test_a_start_that_fails_half_way_stops_the_collectors_it_started(
    rl_cluster: actorrt.Cluster, tmp_path: Path
) -> None:
    """One of two collectors cannot be built: start raises its error, and the one that was built
    is stopped with it (its slot is free when the error arrives)."""
    env_fn = OneProcessOnly(str(tmp_path / "owner"))

    async def go() -> None:
        learner = Learner(make_impala, CONFIG, impala_scheme(2), env_fn=env_fn)
        with pytest.raises(actorrt.RemoteError, match="may not build an env here"):
            await learner.start()

    on(rl_cluster, go())
    status = rl_cluster.status().result()
    assert status.slots_used == 0, status.actors


def test_a_learner_is_started_once_and_trained_by_one_caller_at_a_time(rl_cluster: actorrt.Cluster) -> None:
    async def go() -> None:
        learner = Learner(make_a2c, CONFIG, Scheme(collection="local"))
        with pytest.raises(RuntimeError, match=r"start the Learner first: `async with Learner"):
            await learner.train(100)
        async with learner:
            with pytest.raises(RuntimeError, match="was started already: a Learner starts once"):
                await learner.start()
            training = asyncio.ensure_future(learner.train(1_000_000))
            await asyncio.sleep(0.2)
            with pytest.raises(RuntimeError, match="train\\(\\) is already running on this Learner"):
                await learner.train(100)
            with pytest.raises(RuntimeError, match="restore\\(\\) while train\\(\\) runs"):
                learner.restore("unused.pt")
            training.cancel()
            with pytest.raises(asyncio.CancelledError):
                await training
            await learner.train(learner.env_steps + 64)  # after a cancelled one, the next goes on
        with pytest.raises(RuntimeError, match="this Learner is closed"):
            await learner.train(100)

    on(rl_cluster, go())


def test_checkpoints_resume_a_run(rl_cluster: actorrt.Cluster, tmp_path: Path) -> None:
    path = str(tmp_path / "ckpt.pt")

    async def first() -> tuple[int, dict[str, np.ndarray]]:
        async with Learner(make_impala, CONFIG, impala_scheme(1)) as learner:
            await learner.train(2000)
            await learner.save(path)
            return learner.env_steps, learner.agent.get_weights()

    async def second() -> tuple[int, dict[str, np.ndarray], int]:
        learner = Learner(make_impala, CONFIG, impala_scheme(1))
        learner.restore(path)
        restored = learner.agent.get_weights()
        async with learner:
            steps_before = learner.env_steps
            await learner.train(steps_before + 1000)
            return steps_before, restored, learner.env_steps

    steps, weights = on(rl_cluster, first())
    steps_before, restored, steps_after = on(rl_cluster, second())
    assert steps_before == steps and steps_after >= steps + 1000
    for k in weights:
        np.testing.assert_array_equal(restored[k], weights[k])


def test_a_decentralised_update_restored_starts_every_worker_with_the_learners_optimizer(
    rl_cluster: actorrt.Cluster, tmp_path: Path
) -> None:
    """The workers apply the averaged gradients with their own optimizers: started from a
    checkpoint they were given the weights only (fresh Adam moments), and drifted away from the
    learner's copy, the one that is saved, with every step."""
    scheme = Scheme(gradients="remote", num_gradient_workers=2, update="decentralised")
    path = str(tmp_path / "a2c.pt")

    async def first() -> None:
        async with Learner(make_a2c, CONFIG, scheme) as learner:
            await learner.train(640)
            await learner.save(path)

    async def second(restore_inside: bool) -> tuple[dict[str, np.ndarray], list[dict[str, np.ndarray]]]:
        learner = Learner(make_a2c, CONFIG, scheme)
        if not restore_inside:
            learner.restore(path)
        async with learner:
            assert learner._pool is not None
            if restore_inside:
                await learner.train(320)
                learner.restore(path)
            await learner.train(learner.env_steps + 640)
            return learner.agent.get_weights(), [await h.get_weights() for h in learner._pool.handles]

    on(rl_cluster, first())
    for restore_inside in (False, True):
        central, remote = on(rl_cluster, second(restore_inside))
        for weights in remote:
            for k in central:
                np.testing.assert_allclose(weights[k], central[k], rtol=1e-5, atol=1e-6)


def test_an_async_gradient_worker_that_fails_to_take_its_weights_ends_training(rl_cluster: actorrt.Cluster) -> None:
    """A3C sends each worker its new weights without waiting; a send that failed (other than a
    death) was dropped, and the worker went on computing gradients on weights it never took."""

    async def go() -> None:
        async with Learner(
            FailingSetWeights(after=3), CONFIG, Scheme(gradients="remote", gradient_mode="async")
        ) as learner:
            with pytest.raises(actorrt.RemoteError, match="set_weights broke on call 4"):
                await asyncio.wait_for(learner.train(1_000_000), 60)

    on(rl_cluster, go())
