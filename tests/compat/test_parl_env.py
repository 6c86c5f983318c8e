"""``actorrt.compat.parl.env``: PARL's gym wrappers on gymnasium environments, against PARL's
documented behaviour: ``CompatWrapper`` (old gym's API), ``ActionMappingWrapper``,
``VectorEnv``, ``wrap_deepmind`` (on a small game with lives, and on Pong through ale-py) and
``wrap_rms``."""

from __future__ import annotations

from typing import Any

import gymnasium
import numpy as np
import pytest
from gymnasium.envs.registration import EnvSpec

from actorrt.compat.parl import _gym as gym
from actorrt.compat.parl.env import ActionMappingWrapper, CompatWrapper, VectorEnv
from actorrt.compat.parl.env.atari_wrappers import MonitorEnv, get_wrapper_by_cls, wrap_deepmind
from actorrt.compat.parl.env.compat_wrappers import is_gym_version_ge
from actorrt.compat.parl.env.mujoco_wrappers import VecNormalizeEnv, get_ob_rms, wrap_rms


class Counter(gymnasium.Env[Any, Any]):
    """Observation: the step count in the episode; terminates after ``length`` steps."""

    def __init__(self, length: int = 1000) -> None:
        self.length = length
        self.observation_space = gymnasium.spaces.Box(0, np.inf, (1,), np.float32)
        self.action_space = gymnasium.spaces.Discrete(2)
        self.t = 0
        self.seeds: list[int | None] = []

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        super().reset(seed=seed)
        self.seeds.append(seed)
        self.t = 0
        return np.array([0.0], np.float32), {}

    def step(self, action: int) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        self.t += 1
        return np.array([self.t], np.float32), 1.0, self.t >= self.length, False, {}


def test_compat_wrapper_gives_old_gyms_api() -> None:
    base = Counter(length=3)
    env = CompatWrapper(gymnasium.wrappers.TimeLimit(base, max_episode_steps=5))
    assert env._max_episode_steps == 5
    obs = env.reset()
    assert obs.tolist() == [0.0]
    assert [env.step(0)[2] for _ in range(3)] == [False, False, True]  # terminated at 3
    env.reset()
    dones = []
    base.length = 100
    for _ in range(5):
        obs, _reward, done, info = env.step(0)
        dones.append(done)
    assert dones == [False] * 4 + [True] and info["TimeLimit.truncated"] is True  # the time limit
    assert env._elapsed_steps == 5 and env.count_ep_step == 0


def test_compat_wrapper_restarts_its_step_count_at_each_reset() -> None:
    """An episode that ended early does not shorten the next one (the time limit is per episode)."""
    base = Counter(length=2)
    env = CompatWrapper(gymnasium.wrappers.TimeLimit(base, max_episode_steps=4))
    env.reset()
    env.step(0)
    env.step(0)  # terminated after 2 of 4
    env.reset()
    base.length = 100
    assert [env.step(0)[2] for _ in range(4)] == [False, False, False, True]


def test_seed_seeds_the_next_reset_through_the_wrappers_above() -> None:
    class Doubled(gym.RewardWrapper):
        def reward(self, reward: float) -> float:
            return 2 * reward

    base = Counter()
    env = Doubled(CompatWrapper(base))  # a wrapper above CompatWrapper
    env.seed(11)  # forwarded down to CompatWrapper.seed
    env.reset()
    env.reset()
    assert base.seeds == [11, None]
    assert env.step(0)[1:3] == (2.0, False)  # old API through it
    assert is_gym_version_ge("0.26.0") and is_gym_version_ge("0.22.0") and not is_gym_version_ge("0.27.0")


def test_gym_wrappers_forward_public_names_only() -> None:
    env = CompatWrapper(Counter())
    outer = gym.Wrapper(env)
    assert outer.count_ep_step == 0  # CompatWrapper's, from above
    with pytest.raises(AttributeError, match="has no attribute '_private'"):
        _ = outer._private
    assert isinstance(gymnasium.wrappers.TimeLimit(Counter(), 3), gym.Wrapper)
    assert not isinstance(Counter(), gym.Wrapper) and issubclass(gymnasium.wrappers.TimeLimit, gym.Wrapper)


class Recorder(gymnasium.Env[np.ndarray, np.ndarray]):
    def __init__(self, low: list[float], high: list[float]) -> None:
        self.action_space = gymnasium.spaces.Box(np.array(low, np.float32), np.array(high, np.float32))
        self.observation_space = gymnasium.spaces.Box(-1, 1, (1,), np.float32)
        self.actions: list[list[float]] = []

    def step(self, action: np.ndarray) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        self.actions.append(np.asarray(action).tolist())
        return np.zeros(1, np.float32), 0.0, False, False, {}


def test_action_mapping_maps_minus_one_one_onto_the_box() -> None:
    base = Recorder([-2.0, 0.0], [2.0, 10.0])
    env = ActionMappingWrapper(base)
    for action in ([-1.0, -1.0], [0.0, 0.0], [1.0, 0.5], [1.0005, -1.0005]):
        env.step(np.array(action))
    np.testing.assert_allclose(np.array(base.actions), np.array([[-2, 0], [0, 5], [2, 7.5], [2, 0]]), atol=1e-5)
    with pytest.raises(ValueError, match=r"should be in range \[-1.0, 1.0\]"):
        env.step(np.array([1.5, 0.0]))
    with pytest.raises(TypeError, match="must be a Box"):
        ActionMappingWrapper(Counter())


def test_vector_env_resets_each_env_when_it_is_done() -> None:
    envs = [CompatWrapper(Counter(length=n)) for n in (2, 3)]
    vector = VectorEnv(envs)
    assert [o.tolist() for o in vector.reset()] == [[0.0], [0.0]]
    obs, rewards, dones, _ = vector.step([0, 0])
    assert [o.tolist() for o in obs] == [[1.0], [1.0]] and rewards == [1.0, 1.0] and dones == [False, False]
    obs, _, dones, _ = vector.step([0, 0])
    assert dones == [True, False] and [o.tolist() for o in obs] == [[0.0], [2.0]]  # the first one reset
    with pytest.raises(ValueError, match="1 actions for 2 environments"):
        vector.step([0])


class Game(gymnasium.Env[Any, Any]):
    """An Atari-like game: RGB frames, 3 lives (one lost every 40 frames), FIRE, reward 1 for
    action 2; the frame shows the frame number."""

    def __init__(self) -> None:
        self.observation_space = gymnasium.spaces.Box(0, 255, (210, 160, 3), np.uint8)
        self.action_space = gymnasium.spaces.Discrete(4)
        self.spec = EnvSpec("GameNoFrameskip-v4")
        self.frames = 0
        self.ale = self
        self.resets = 0

    def get_action_meanings(self) -> list[str]:
        return ["NOOP", "FIRE", "RIGHT", "LEFT"]

    def lives(self) -> int:
        return max(0, 3 - self.frames // 40)

    def frame(self) -> np.ndarray:
        return np.full((210, 160, 3), self.frames % 256, np.uint8)

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        super().reset(seed=seed)
        self.frames = 0
        self.resets += 1
        return self.frame(), {}

    def step(self, action: int) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        self.frames += 1
        return self.frame(), float(action == 2), self.lives() == 0, False, {}


def test_wrap_deepmind_ends_episodes_at_lost_lives_and_monitors_whole_games() -> None:
    game = Game()
    env = wrap_deepmind(game, dim=42, obs_format="NCHW")
    noop = get_wrapper_by_cls(env, gym.Wrapper)
    assert noop is env
    names = []
    current: Any = env
    while isinstance(current, gym.Wrapper):
        names.append(type(current).__name__)
        current = current.env
    assert names == [
        "FrameStack",
        "ClipRewardEnv",
        "WarpFrame",
        "FireResetEnv",
        "EpisodicLifeEnv",
        "MaxAndSkipEnv",
        "NoopResetEnv",
        "MonitorEnv",
        "CompatWrapper",
    ]
    from actorrt.compat.parl.env.atari_wrappers import NoopResetEnv

    noops = get_wrapper_by_cls(env, NoopResetEnv)
    assert noops is not None
    noops.override_num_noops = 1
    monitor = get_wrapper_by_cls(env, MonitorEnv)
    assert monitor is not None
    obs = env.reset()  # 1 no-op frame, then FIRE and action 2 (4 frames each)
    assert obs.shape == (4, 42, 42) and obs.dtype == np.uint8 and env.observation_space.shape == (4, 42, 42)
    assert game.frames == 9 and obs[-1, 0, 0] == 9  # the last frame, gray
    lengths, rewards = [], []
    for _ in range(3):  # an episode per life
        steps, done = 0, False
        while not done:
            obs, reward, done, _info = env.step(2)  # 4 frames a step
            rewards.append(reward)
            steps += 1
        lengths.append(steps)
        env.reset()
    assert lengths == [8, 7, 7] and set(rewards) == {1.0}  # 4 frames' rewards clipped to 1
    assert game.resets == 2  # the game reset at the start and after its last life only
    # the whole game, raw: 120 frames, of which the no-op, FIRE at each start (3 x 4) and the no-op
    # step past each lost life (2 x 4) got no reward
    assert list(monitor.next_episode_results()) == [(120.0 - 1 - 12 - 8, 120)]
    assert list(monitor.next_episode_results()) == []


def test_wrap_deepmind_on_pong_through_ale_py() -> None:
    pong = gym.make("PongNoFrameskip-v4")
    env = wrap_deepmind(pong, dim=84)
    env.seed(1)
    first = env.reset()
    assert first.shape == (84, 84, 4)
    obs, reward, done, _info = env.step(0)
    assert obs.shape == (84, 84, 4) and reward in (-1.0, 0.0, 1.0) and done is False
    again = wrap_deepmind(gym.make("PongNoFrameskip-v4"), dim=84)
    again.seed(1)  # the same no-ops: the same first frames
    np.testing.assert_array_equal(again.reset(), first)


def test_wrap_rms_normalises_observations_and_scales_rewards() -> None:
    env = wrap_rms(gym.make("Pendulum-v1"), gamma=0.99)
    env.seed(0)
    obs = env.reset()
    assert obs.dtype == np.float32 and np.all(np.abs(obs) <= 10)
    total = 0
    done = False
    while not done:
        obs, reward, done, info = env.step(np.array([0.1]))
        assert abs(reward) <= 10
        total += 1
    assert info["bad_transition"] is True and info["episode"]["l"] == total == 200
    rms = get_ob_rms(env)
    assert rms is not None and float(rms.count) == pytest.approx(201 + 1e-4)
    np.testing.assert_allclose(rms.mean.numpy(), np.zeros(3), atol=2)

    test_env = wrap_rms(gym.make("Pendulum-v1"), None, test=True, ob_rms=rms)
    normalizer = get_wrapper_by_cls(test_env, VecNormalizeEnv)
    assert normalizer is not None and normalizer.ret_rms is None and not normalizer.training
    test_env.reset()
    _, raw_reward, _, _ = test_env.step(np.array([0.0]))
    assert float(rms.count) == pytest.approx(201 + 1e-4)  # the test env does not update them
    assert raw_reward <= 0  # Pendulum's own reward, not scaled
