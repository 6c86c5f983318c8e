"""Checkpoints: a restored agent trains on exactly as the saved one would have; a save cut short
keeps the last good file; a checkpoint that does not fit is refused, and the agent is as it was."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch

import rl
from rl.replay import ReplayBatch
from rl.storage import Rollout, Transition

PENDULUM_OBS = gym.spaces.Box(-8, 8, (3,), np.float32)
PENDULUM_ACT = gym.spaces.Box(-2, 2, (1,), np.float32)
CARTPOLE_OBS = gym.spaces.Box(-5, 5, (4,), np.float32)
CARTPOLE_ACT = gym.spaces.Discrete(2)
HIDDEN = (8, 8)


def _replay_batch(rng: np.random.Generator, n: int = 16) -> ReplayBatch[np.ndarray]:
    f = lambda *shape: np.asarray(rng.standard_normal(shape), np.float32)  # noqa: E731
    actions = rng.uniform(-2, 2, (n, 1)).astype(np.float32)
    return ReplayBatch(
        f(n, 3), actions, f(n), f(n, 3), rng.random(n) < 0.1, np.zeros(n, bool), np.ones(n, np.float32), np.arange(n)
    )


def _transition(rng: np.random.Generator, n: int = 16) -> Transition[np.ndarray]:
    f = lambda *shape: np.asarray(rng.standard_normal(shape), np.float32)  # noqa: E731
    return Transition(f(n, 4), rng.integers(0, 2, n), f(n), f(n, 4), rng.random(n) < 0.1)


def _rollout(rng: np.random.Generator, steps: int = 8, envs: int = 2) -> Rollout[np.ndarray]:
    f = lambda *shape: np.asarray(rng.standard_normal(shape), np.float32)  # noqa: E731
    return Rollout(
        obs=f(steps, envs, 4),
        actions=rng.integers(0, 2, (steps, envs)),
        rewards=f(steps, envs),
        terminated=rng.random((steps, envs)) < 0.1,
        truncated=np.zeros((steps, envs), bool),
        log_probs=np.full((steps, envs), -0.69, np.float32),
        values=f(steps, envs),
        final_obs=f(steps, envs, 4),
        final_values=np.zeros((steps, envs), np.float32),
        bootstrap_obs=f(envs, 4),
        bootstrap_value=f(envs),
        episode_returns=np.zeros(0, np.float32),
        episode_lengths=np.zeros(0, np.int64),
    )


def _td3() -> rl.Algorithm:
    actor = rl.DeterministicActor(PENDULUM_OBS, PENDULUM_ACT, HIDDEN)
    return rl.TD3(actor, rl.TwinQCritic(PENDULUM_OBS, PENDULUM_ACT, HIDDEN))


def _sac() -> rl.Algorithm:
    actor = rl.SquashedGaussianActor(PENDULUM_OBS, PENDULUM_ACT, HIDDEN)
    return rl.SAC(actor, rl.TwinQCritic(PENDULUM_OBS, PENDULUM_ACT, HIDDEN))


def _dqn() -> rl.Algorithm:
    return rl.DQN(rl.QNetwork(CARTPOLE_OBS, CARTPOLE_ACT, HIDDEN), target_update_interval=4)


def _ppo() -> rl.Algorithm:
    return rl.PPO(rl.ActorCritic(CARTPOLE_OBS, CARTPOLE_ACT, HIDDEN), num_minibatches=4, num_epochs=2, seed=3)


def _es() -> rl.Algorithm:
    return rl.ES(rl.MLPPolicy(CARTPOLE_OBS, CARTPOLE_ACT, hidden=(8,)), rl.NoiseTable(2**14, 7), population=8)


def _learn_es(agent: rl.Agent, rng: np.random.Generator) -> None:
    es = agent.algorithm
    assert isinstance(es, rl.ES)
    offsets = es.ask()
    es.tell(offsets, rng.standard_normal(len(offsets)), rng.standard_normal(len(offsets)))


LearnStep = Callable[[rl.Agent, np.random.Generator], Any]
CASES: dict[str, tuple[Callable[[], rl.Algorithm], LearnStep]] = {
    # an odd number of updates before the save: TD3's actor steps every 2nd, DQN's target every 4th
    "td3": (_td3, lambda agent, rng: agent.learn(_replay_batch(rng))),
    "sac": (_sac, lambda agent, rng: agent.learn(_replay_batch(rng))),
    "dqn": (_dqn, lambda agent, rng: agent.learn(_transition(rng))),
    "ppo": (_ppo, lambda agent, rng: agent.learn(_rollout(rng))),
    "es": (_es, _learn_es),
}


def _flat(value: Any, prefix: str = "") -> dict[str, Any]:
    """A state dict's leaves by path (tensors, numbers, generator states)."""
    if isinstance(value, dict):
        return {k: v for key, item in value.items() for k, v in _flat(item, f"{prefix}.{key}").items()}
    if isinstance(value, (list, tuple)):
        return {k: v for i, item in enumerate(value) for k, v in _flat(item, f"{prefix}[{i}]").items()}
    return {prefix: value}


def _differences(a: rl.Algorithm, b: rl.Algorithm) -> list[str]:
    sa, sb = _flat(a.state_dict()), _flat(b.state_dict())
    assert sa.keys() == sb.keys()
    same = lambda x, y: torch.equal(x, y) if isinstance(x, torch.Tensor) else x == y  # noqa: E731
    return [k for k in sa if not same(sa[k], sb[k])]


@pytest.mark.parametrize("name", list(CASES))
def test_a_restored_agent_trains_on_exactly_as_the_saved_one(name: str, tmp_path: Path) -> None:
    build, learn = CASES[name]
    torch.manual_seed(0)
    saved = rl.Agent(build())
    torch.manual_seed(1)
    restored = rl.Agent(build())  # other initial weights
    rng = np.random.default_rng(0)
    for i in range(3):
        torch.manual_seed(100 + i)
        learn(saved, rng)
    saved.save(tmp_path / "agent.pt")
    restored.restore(tmp_path / "agent.pt")
    assert _differences(saved.algorithm, restored.algorithm) == []
    for i in range(3):
        state = rng.bit_generator.state
        torch.manual_seed(200 + i)
        learn(saved, rng)
        rng.bit_generator.state = state  # the same batch
        torch.manual_seed(200 + i)
        learn(restored, rng)
    assert _differences(saved.algorithm, restored.algorithm) == []


def test_a_checkpoint_keeps_the_counters_and_generators_training_moves() -> None:
    td3, dqn, ppo, es = _td3(), _dqn(), _ppo(), _es()
    assert td3.state_dict()["_attributes"] == {"updates": 0}
    assert dqn.state_dict()["_attributes"] == {"_updates": 0}
    assert set(ppo.state_dict()["_attributes"]) == {"_generator"}
    assert set(es.state_dict()["_attributes"]) == {"rng", "generation"}


_SAVE_KILLED = """
import sys, time, torch
sys.path.insert(0, sys.argv[1])
from rl.agent import save_checkpoint

class Slow:
    def __reduce__(self):
        print("writing", flush=True)  # the parent kills this process now
        time.sleep(60)
        return (int, (0,))

save_checkpoint({"weights": torch.zeros(1000), "slow": Slow()}, sys.argv[2])
"""


def test_a_save_cut_short_keeps_the_last_good_checkpoint(tmp_path: Path) -> None:
    path = tmp_path / "agent.pt"
    agent = rl.Agent(_td3())
    agent.save(path)
    good = path.read_bytes()
    # a save killed mid-write
    proc = subprocess.Popen(
        [sys.executable, "-c", _SAVE_KILLED, str(Path(rl.__file__).parents[1]), str(path)], stdout=subprocess.PIPE
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline() == b"writing\n"
    finally:
        proc.kill()
        proc.wait()
    assert path.read_bytes() == good  # the killed save never touched it
    rl.Agent(_td3()).restore(path)
    # a save that fails in the middle (something unpicklable) leaves neither a truncated file
    # nor its temporary file
    with pytest.raises(Exception, match="pickle"):
        rl.agent.save_checkpoint({"a": torch.zeros(3), "b": lambda: None}, path)
    assert path.read_bytes() == good
    leftovers = [n for n in os.listdir(tmp_path) if n.endswith(".tmp")]
    assert len(leftovers) == 1  # only the killed process's, which nothing could remove


def _sac_for(action_space: gym.spaces.Box, **kwargs: Any) -> rl.SAC:
    actor = rl.SquashedGaussianActor(PENDULUM_OBS, action_space, HIDDEN)
    return rl.SAC(actor, rl.TwinQCritic(PENDULUM_OBS, action_space, HIDDEN), **kwargs)


def test_a_checkpoint_that_does_not_fit_is_refused_and_changes_nothing(tmp_path: Path) -> None:
    source = rl.Agent(_sac_for(PENDULUM_ACT))
    source.learn(_replay_batch(np.random.default_rng(0)))
    state = source.algorithm.state_dict()

    def refused(state: dict[str, Any], match: str, target: rl.SAC | None = None) -> None:
        target = target or _sac_for(PENDULUM_ACT)
        before = _flat(target.state_dict())
        with pytest.raises((ValueError, RuntimeError), match=match):
            target.load_state_dict(state)
        after = _flat(target.state_dict())
        assert all(
            torch.equal(v, after[k]) if isinstance(v, torch.Tensor) else v == after[k] for k, v in before.items()
        ), "a refused checkpoint changed the agent"

    # another environment's action bounds ([-1, 1] here): it would act outside them
    refused(state, "action bounds", _sac_for(gym.spaces.Box(-1, 1, (1,), np.float32)))
    # an entry missing (the temperature's optimizer), and one this algorithm has not
    refused({k: v for k, v in state.items() if k != "alpha_optimizer"}, "lacks \\['alpha_optimizer'\\]")
    refused({**state, "extra": {}}, "holds \\['extra'\\]")
    # another optimizer: its state would load, and the first update fail far from the cause
    other = rl.TD3(
        rl.DeterministicActor(PENDULUM_OBS, PENDULUM_ACT, HIDDEN), rl.TwinQCritic(PENDULUM_OBS, PENDULUM_ACT, HIDDEN)
    )
    kinds = dict(state["_optimizers"], critic_optimizer="RMSprop")
    refused({**state, "_optimizers": kinds}, "critic_optimizer is a RMSprop's")
    refused(other.state_dict(), "this state is a TD3's")
    # the critic's shapes differ: the actor (loaded first) must not stay half-loaded
    bigger = _sac_for(PENDULUM_ACT)
    bigger.critic = rl.TwinQCritic(PENDULUM_OBS, PENDULUM_ACT, (16, 16))
    refused(bigger.state_dict() | {"_class": "SAC"}, "size mismatch")


def test_a_new_run_moves_the_earlier_runs_logs_aside_and_rows_reach_the_disk(tmp_path: Path) -> None:
    run_dir = str(tmp_path / "run")
    first = rl.TrainingLogger(run_dir, 100, tensorboard=True, progress=False)
    first.log_episodes(10, np.array([1.0, 2.0]), np.array([5, 5]))
    first.log_update(10, {"loss": 0.5})
    first.close()
    first.plot("first")
    earlier = sorted(os.listdir(run_dir))
    assert {"episodes.csv", "updates.csv", "curve.png"} <= set(earlier)
    second = rl.TrainingLogger(run_dir, 100, tensorboard=False, progress=False)
    try:
        assert second.previous is not None and os.path.dirname(second.previous) == run_dir
        assert sorted(os.listdir(second.previous)) == earlier  # the first run's files, all of them
        with open(os.path.join(second.previous, "episodes.csv")) as f:
            assert len(f.read().splitlines()) == 3  # header and two episodes, untouched
        # rows reach the file while the run goes on (at least once a second), not only at close
        second.log_episodes(20, np.array([3.0]), np.array([7]))
        time.sleep(1.1)
        second.log_update(20, {"loss": 0.25})
        with open(os.path.join(run_dir, "episodes.csv")) as f:
            assert f.read().splitlines()[1].startswith("20,")
    finally:
        second.close()
    third = rl.TrainingLogger(run_dir, 100, tensorboard=False, progress=False)
    third.close()
    assert third.previous is not None and third.previous != second.previous  # never one over another


def _stopping_training(agent: rl.Agent, after: int) -> Callable[[rl.Collector, rl.TrainingLogger], rl.TrainResult]:
    def train(collector: rl.Collector, logger: rl.TrainingLogger) -> rl.TrainResult:
        for _ in range(after):
            agent.learn(collector.collect())
        raise KeyboardInterrupt

    return train


def test_training_stopped_by_ctrl_c_saves_what_it_trained(tmp_path: Path) -> None:
    torch.manual_seed(0)
    agent = rl.Agent(rl.A2C(rl.ActorCritic(CARTPOLE_OBS, CARTPOLE_ACT, HIDDEN)))
    untrained = agent.get_weights()
    save = str(tmp_path / "agent.pt")
    run = rl.TrainingRun(run_dir=str(tmp_path / "run"), tensorboard=False, progress=False, save=save)
    config = rl.CollectorConfig(env_id="CartPole-v1", num_envs=2, num_steps=8, seed=0)
    with pytest.raises(KeyboardInterrupt):
        rl.run_training(run, agent, config, 1000, _stopping_training(agent, 3), "stopped")
    restored = rl.Agent(rl.A2C(rl.ActorCritic(CARTPOLE_OBS, CARTPOLE_ACT, HIDDEN)))
    restored.restore(save)
    weights = restored.get_weights()
    assert all(np.array_equal(weights[k], v) for k, v in agent.get_weights().items())
    assert any(not np.array_equal(weights[k], v) for k, v in untrained.items())  # trained, then saved


def test_a_run_whose_logs_cannot_be_written_leaves_no_env_process(tmp_path: Path) -> None:
    """The logger failing to start (its run_dir is a file) used to leave the async collector's env
    subprocesses running, since the collector was built first and outside the cleanup: for as
    long as the error's traceback lived (a notebook or REPL keeps the last one)."""
    import multiprocessing

    blocked = tmp_path / "not-a-dir"
    blocked.write_text("")
    agent = rl.Agent(rl.A2C(rl.ActorCritic(CARTPOLE_OBS, CARTPOLE_ACT, HIDDEN)))
    run = rl.TrainingRun(run_dir=str(blocked / "run"), tensorboard=False, progress=False)
    config = rl.CollectorConfig(env_id="CartPole-v1", num_envs=2, num_steps=8, seed=0, vectorization="async")
    before = set(multiprocessing.active_children())
    with pytest.raises(OSError) as kept:  # the traceback stays alive, as a REPL's last one does
        rl.run_training(run, agent, config, 100, _stopping_training(agent, 1), "never")
    assert set(multiprocessing.active_children()) == before
    del kept
