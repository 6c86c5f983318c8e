"""What every distributed training script shares: its common config fields and its main.

An example defines ``Config(DistributedRun)`` (its own defaults and extra fields), a picklable
``MakeAgent(config)`` and a scheme, then calls :func:`main`: it parses the command line, runs
the learner on an embedded cluster (or ``--address``), shows the live line (frames/s, return,
weight lag), writes TensorBoard scalars, CSV logs and a PNG curve, prints the final JSON line
and exits 0 when solved.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

import actorrt
from rl.collector import CollectorConfig
from rl.config import parse_config, use_torch_threads, user_errors
from rl.learners.learner import Learner
from rl.learners.progress import LearnerResult
from rl.learners.scheme import Scheme
from rl.logger import TrainingLogger
from rl.metrics import LearnerMetrics
from rl.trainer import TrainingRun

__all__ = ["DistributedRun", "main", "run"]


@dataclass
class DistributedRun(TrainingRun):
    """Options every distributed training script takes (beyond :class:`rl.TrainingRun`'s)."""

    env_id: str = "CartPole-v1"
    """gymnasium environment id."""
    seed: int = 0
    """Seed for torch and the environments (worker i adds its own offset)."""
    total_steps: int = 1_000_000
    """Environment steps to train for (a run stops at the first rollout that reaches them)."""
    num_collectors: int = 2
    """Remote collector actors."""
    num_envs: int = 8
    """Environments per collector."""
    num_steps: int = 16
    """Steps per environment per rollout (rollout length T)."""
    lr: float = 1e-3
    """Learning rate."""
    gamma: float = 0.99
    """Discount factor."""
    run_dir: str = "runs/distributed"
    """Where TensorBoard events, CSV logs and the PNG curve go."""
    address: str | None = None
    """Master HOST:PORT of a running cluster; default: an embedded cluster."""
    metrics_port: int = 0
    """Serve the learner's Prometheus metrics (actorrt_rl_*) on this port; 0: off."""
    save: str | None = None
    """Save a learner checkpoint here at the end: models, optimizers, counters and the replay."""
    restore: str | None = None
    """Resume from a learner checkpoint (this script's --save): its env steps, updates and replay go on."""


async def run(
    config: DistributedRun,
    make_agent: Callable[[], Any],
    scheme: Scheme,
    algo: str,
    *,
    env_fn: Callable[[], Any] | None = None,
    preload: tuple[str, ...] = ("rl.learners",),
    learner_options: dict[str, Any] | None = None,
) -> tuple[dict[str, Any], LearnerResult]:
    """Train on a cluster; the final JSON line's fields and the result.

    ``learner_options``: more keyword arguments for :class:`Learner` (an off-policy scheme's
    ``replay``, ``batch_size``, ``learning_starts``; ``window``)."""
    use_torch_threads()
    torch.manual_seed(config.seed)
    collector_config = CollectorConfig(config.env_id, config.num_envs, config.num_steps, config.seed)
    logger = TrainingLogger(
        config.run_dir, config.total_steps, tensorboard=config.tensorboard, progress=config.progress
    )
    actors = config.num_collectors + (1 if scheme.replay == "actor" else 0)
    slots = max(os.cpu_count() or 1, actors)  # embedded: a slot per actor the scheme starts
    try:
        async with actorrt.connect(config.address, num_cpus=slots, preload=list(preload)):
            metrics = LearnerMetrics(algo.lower())
            server = metrics.serve(config.metrics_port) if config.metrics_port else None
            learner = Learner(
                make_agent,
                collector_config,
                scheme,
                logger=logger,
                metrics=metrics,
                env_fn=env_fn,
                **(learner_options or {}),
            )
            if config.restore:
                learner.restore(config.restore)
            try:
                async with learner:
                    try:
                        result = await learner.train(config.total_steps, config.solved_return, config.stop_when_solved)
                    except (asyncio.CancelledError, KeyboardInterrupt):  # Ctrl-C: asyncio.run cancels us
                        if config.save:  # what was trained is kept, as rl.run_training keeps it
                            await learner.save(config.save)
                            logger.note(f"stopped: the learner as trained so far is saved in {config.save}")
                        raise
                    if config.save:
                        await learner.save(config.save)
            finally:
                if server is not None:
                    server.stop()
    finally:
        logger.close()
    where = f"{scheme.num_collectors} remote collectors" if scheme.collection == "remote" else "local"
    logger.plot(f"{algo} on {config.env_id} ({where})", config.solved_return)
    return {"env": config.env_id, "algo": algo, **result.json_fields()}, result


def main(
    config_cls: type[DistributedRun],
    make_agent: Callable[[Any], Callable[[], Any]],
    scheme: Callable[[Any], Scheme],
    algo: str,
    *,
    env_fn: Callable[[Any], Callable[[], Any] | None] = lambda config: None,
    preload: tuple[str, ...] = ("rl.learners",),
    extra: Callable[[Any, LearnerResult], dict[str, Any]] = lambda config, result: {},
    learner_options: Callable[[Any], dict[str, Any]] = lambda config: {},
) -> None:
    """Parse ``config_cls`` from the command line, train, print the JSON line, exit 0 if solved
    (an error: one line, exit 2; see :func:`rl.config.user_errors`)."""
    config = parse_config(config_cls, description=sys.modules["__main__"].__doc__)
    with user_errors():
        line, result = actorrt.run(
            run(
                config,
                make_agent(config),
                scheme(config),
                algo,
                env_fn=env_fn(config),
                preload=preload,
                learner_options=learner_options(config),
            )
        )
        line.update(extra(config, result))
    print(json.dumps(line), flush=True)
    sys.exit(0 if line["solved"] else 1)
