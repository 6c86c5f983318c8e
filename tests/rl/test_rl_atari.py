"""Atari: the preprocessing factory, the convolutional actor-critic, and IMPALA on Pong."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

import rl

ale_py = pytest.importorskip("ale_py", reason="the atari extra is not installed (pip install .[atari])")

from rl.atari import AtariEnv, ConvActorCritic  # noqa: E402 - only once ale_py is known to be there

ROOT = Path(__file__).resolve().parents[2]


def test_atari_env_is_84x84_stacked_uint8() -> None:
    env = AtariEnv("ALE/Pong-v5")()
    obs, _ = env.reset(seed=0)
    assert obs.shape == (4, 84, 84) and obs.dtype == np.uint8
    obs, *_ = env.step(env.action_space.sample())
    assert obs.shape == (4, 84, 84)
    env.close()


def test_conv_actor_critic_learns_with_impala() -> None:
    env = AtariEnv("ALE/Pong-v5")()
    model = ConvActorCritic(env.observation_space, env.action_space)
    env.close()
    num_steps, num_envs = 5, 3
    obs = torch.randint(0, 255, (num_steps, num_envs, 4, 84, 84), dtype=torch.uint8)
    action, log_prob, value = model.act(obs[0])
    assert action.shape == (num_envs,) and log_prob.shape == (num_envs,) and value.shape == (num_envs,)
    lp, ent, v = model.evaluate(obs, torch.zeros(num_steps, num_envs, dtype=torch.int64))
    assert lp.shape == ent.shape == v.shape == (num_steps, num_envs)
    assert model.value(obs).shape == (num_steps, num_envs)
    algo = rl.IMPALA(model)
    batch = rl.Rollout(
        obs=obs,
        actions=torch.zeros(num_steps, num_envs, dtype=torch.int64),
        rewards=torch.ones(num_steps, num_envs),
        terminated=torch.zeros(num_steps, num_envs, dtype=torch.bool),
        truncated=torch.zeros(num_steps, num_envs, dtype=torch.bool),
        log_probs=torch.full((num_steps, num_envs), -1.79),
        values=torch.zeros(num_steps, num_envs),
        final_obs=obs,
        final_values=torch.zeros(num_steps, num_envs),
        bootstrap_obs=obs[0],
        bootstrap_value=torch.zeros(num_envs),
        episode_returns=torch.zeros(0),
        episode_lengths=torch.zeros(0),
    )
    before = [p.detach().clone() for p in model.parameters()]
    stats = algo.learn(batch)
    assert np.isfinite(stats["policy_loss"])
    assert any(not torch.equal(a, b) for a, b in zip(before, model.parameters(), strict=True))


@pytest.mark.slow
def test_impala_atari_example_runs_and_reports_frames(tmp_path: Path) -> None:
    run = subprocess.run(
        [
            sys.executable,
            str(ROOT / "examples" / "impala_atari.py"),
            "--total-steps",
            "1600",
            "--no-progress",
            "--no-tensorboard",
            "--run-dir",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    line = json.loads([ln for ln in run.stdout.splitlines() if ln.startswith("{")][-1])
    assert line["env_steps"] >= 1600 and line["updates"] > 0
    assert line["emulator_frames_per_s"] == pytest.approx(4 * line["frames_per_s"], rel=0.01)
    assert (tmp_path / "curve.png").exists() and (tmp_path / "updates.csv").exists()
