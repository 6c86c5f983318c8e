"""Hindsight experience replay (Andrychowicz et al. 2017), ``future`` strategy.

Goal-conditioned episodes are stored whole; a sampled transition ``(o_t, a_t, o_{t+1}, g)`` has
its goal replaced, with probability ``1 - 1 / (1 + k)``, by a goal achieved later in the same
episode,

    g' = ag_{t'},   t' ~ U{t+1, ..., T}        (ag_{t'}: achieved goal after step t'-1)

and its reward recomputed by the environment's own ``compute_reward(ag_{t+1}, g')``: the agent
learns how to reach what it did reach. ``k`` (``n_sampled_goal``) is 4 in the paper. Rewards of
non-relabelled transitions are recomputed the same way, so the two kinds agree exactly.

Observations given to the agent are ``concat(observation, goal)`` (:func:`goal_obs`). An
episode's ``terminated`` flags are kept as the environment gave them (relabelling does not move
a termination); tasks such as :class:`rl.envs.PointReach` never terminate, only truncate.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import gymnasium as gym
import numpy as np

from rl.algorithms._off_policy import OffPolicyAlgorithm
from rl.bookkeeping import UpdateRatio
from rl.replay import ReplayBatch

__all__ = [
    "GoalEpisode",
    "HerReplay",
    "check_goal_env",
    "goal_obs",
    "run_goal_episode",
    "success_rate",
    "train_goal_conditioned",
]

ComputeReward = Callable[[np.ndarray, np.ndarray, Any], np.ndarray]


def goal_obs(observation: np.ndarray, goal: np.ndarray) -> np.ndarray:
    """What a goal-conditioned agent sees: ``concat(observation, goal)`` on the last axis, float32."""
    return np.concatenate([observation, goal], axis=-1).astype(np.float32)


class GoalEpisode(NamedTuple):
    """One episode of ``T`` steps of a goal environment.

    ``observations`` and ``achieved_goals`` have ``T + 1`` rows (before the first step and after
    each step); ``desired_goal`` is the episode's goal; ``actions``, ``terminated`` and
    ``truncated`` have ``T`` rows. ``success``: ``info["is_success"]`` after the last step.
    """

    observations: np.ndarray
    achieved_goals: np.ndarray
    desired_goal: np.ndarray
    actions: np.ndarray
    terminated: np.ndarray
    truncated: np.ndarray
    episode_return: float
    success: bool


def check_goal_env(env: gym.Env) -> None:
    """A goal env has Dict observations with ``observation``, ``achieved_goal`` and
    ``desired_goal``, and a ``compute_reward`` to relabel with (gymnasium-robotics' convention)."""
    space = env.observation_space
    keys = {"observation", "achieved_goal", "desired_goal"}
    if not isinstance(space, gym.spaces.Dict) or not keys <= set(space.spaces):
        raise TypeError(f"a goal-conditioned env needs Dict observations with {sorted(keys)}; this env's are {space}")
    if not callable(getattr(env.unwrapped, "compute_reward", None)):
        raise TypeError(f"a goal-conditioned env needs compute_reward(achieved, desired, info); {env} has none")


def run_goal_episode(env: gym.Env, act: Callable[[np.ndarray], np.ndarray], seed: int | None = None) -> GoalEpisode:
    """Run one episode; ``act`` maps a batch ``[1, obs + goal]`` of :func:`goal_obs` to actions ``[1, act]``."""
    check_goal_env(env)
    obs, info = env.reset(seed=seed)
    observations, achieved, actions, terms, truncs = [obs["observation"]], [obs["achieved_goal"]], [], [], []
    goal = obs["desired_goal"]
    total = 0.0
    while True:
        action = np.asarray(act(goal_obs(obs["observation"], goal)[None]))[0]
        obs, reward, terminated, truncated, info = env.step(action)
        observations.append(obs["observation"])
        achieved.append(obs["achieved_goal"])
        actions.append(action)
        terms.append(terminated)
        truncs.append(truncated)
        total += float(reward)
        if terminated or truncated:
            break
    return GoalEpisode(
        np.asarray(observations, np.float32),
        np.asarray(achieved, np.float32),
        np.asarray(goal, np.float32),
        np.asarray(actions, np.float32),
        np.asarray(terms, bool),
        np.asarray(truncs, bool),
        total,
        bool(info.get("is_success", False)),
    )


class HerReplay:
    """Whole episodes in a ring of ``capacity // max_episode_steps`` slots; ``future`` relabelling.

    ``n_sampled_goal=0`` disables relabelling (plain replay of the same episodes), which is what a
    comparison with and without HER needs. Not thread-safe.
    """

    def __init__(
        self,
        capacity: int,
        obs_dim: int,
        goal_dim: int,
        action_shape: tuple[int, ...],
        max_episode_steps: int,
        compute_reward: ComputeReward,
        n_sampled_goal: int = 4,
        seed: int | None = None,
    ) -> None:
        if n_sampled_goal < 0:
            raise ValueError(f"n_sampled_goal must be >= 0 (0: no relabelling), got {n_sampled_goal}")
        if max_episode_steps < 1:
            raise ValueError(f"max_episode_steps must be >= 1, got {max_episode_steps}")
        self.max_steps = int(max_episode_steps)
        self.num_slots = max(1, int(capacity) // self.max_steps)
        self.compute_reward = compute_reward
        self.relabel_probability = 1.0 - 1.0 / (1.0 + n_sampled_goal)
        """``1 - 1/(1+k)``: the fraction of sampled transitions whose goal is replaced."""
        steps = self.max_steps
        self.observations = np.zeros((self.num_slots, steps + 1, obs_dim), np.float32)
        self.achieved_goals = np.zeros((self.num_slots, steps + 1, goal_dim), np.float32)
        self.desired_goals = np.zeros((self.num_slots, goal_dim), np.float32)
        self.actions = np.zeros((self.num_slots, steps, *action_shape), np.float32)
        self.terminated = np.zeros((self.num_slots, steps), bool)
        self.truncated = np.zeros((self.num_slots, steps), bool)
        self.lengths = np.zeros(self.num_slots, np.int64)
        self._next = 0
        self._episodes = 0
        self.rng = np.random.default_rng(seed)

    def __len__(self) -> int:
        """Transitions stored."""
        return int(self.lengths.sum())

    def add_episode(self, episode: GoalEpisode) -> None:
        """Store an episode (overwriting the oldest when full)."""
        length = len(episode.actions)
        if not 1 <= length <= self.max_steps:
            raise ValueError(f"episode of {length} steps; this replay holds 1 to {self.max_steps}")
        expected = {  # numpy would broadcast a (T+1, 1) goal into every column, or one row into every step
            "observations": (length + 1, *self.observations.shape[2:]),
            "achieved_goals": (length + 1, *self.achieved_goals.shape[2:]),
            "desired_goal": self.desired_goals.shape[1:],
            "actions": (length, *self.actions.shape[2:]),
            "terminated": (length,),
            "truncated": (length,),
        }
        for name, shape in expected.items():
            got = np.shape(getattr(episode, name))
            if got != shape:
                raise ValueError(f"add_episode: {name} has shape {got}; this replay needs {shape} for {length} steps")
        s = self._next
        self.observations[s, : length + 1] = episode.observations
        self.achieved_goals[s, : length + 1] = episode.achieved_goals
        self.desired_goals[s] = episode.desired_goal
        self.actions[s, :length] = episode.actions
        self.terminated[s, :length] = episode.terminated
        self.truncated[s, :length] = episode.truncated
        self.lengths[s] = length
        self._next = (s + 1) % self.num_slots
        self._episodes += 1

    def sample(self, batch_size: int) -> ReplayBatch[np.ndarray]:
        """Transitions drawn uniformly over all stored steps, a fraction of them relabelled."""
        total = self.lengths.sum()
        if total == 0:
            raise ValueError("sample from an empty replay")
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        ep = self.rng.choice(self.num_slots, size=batch_size, p=self.lengths / total)
        length = self.lengths[ep]  # T of each sampled episode
        t = (self.rng.random(batch_size) * length).astype(np.int64)
        goals = self.desired_goals[ep].copy()
        relabel = self.rng.random(batch_size) < self.relabel_probability
        # future: t' uniform in {t+1, ..., T}, the achieved goal after step t'-1.
        future = t + 1 + (self.rng.random(batch_size) * (length - t)).astype(np.int64)
        goals[relabel] = self.achieved_goals[ep[relabel], future[relabel]]
        next_achieved = self.achieved_goals[ep, t + 1]
        rewards = np.asarray(self.compute_reward(next_achieved, goals, None), np.float32).reshape(batch_size)
        return ReplayBatch(
            goal_obs(self.observations[ep, t], goals),
            self.actions[ep, t],
            rewards,
            goal_obs(self.observations[ep, t + 1], goals),
            self.terminated[ep, t],
            self.truncated[ep, t],
            np.ones(batch_size, np.float32),
            np.full(batch_size, -1, np.int64),  # no slot: a relabelled goal is not a stored transition
        )


def train_goal_conditioned(
    agent: Any,
    env: gym.Env,
    replay: HerReplay,
    episodes: int,
    updates_per_step: float = 1.0,
    batch_size: int = 128,
    warmup_episodes: int = 5,
    seed: int = 0,
) -> list[GoalEpisode]:
    """Episode loop for goal tasks: act (uniformly at random for ``warmup_episodes``), store the
    episode, then ``updates_per_step`` updates per step it took. ``agent`` wraps DDPG, TD3 or SAC.
    Returns the training episodes."""
    algo = agent.algorithm
    if not isinstance(algo, OffPolicyAlgorithm):
        raise TypeError(f"train_goal_conditioned needs an agent around DDPG, TD3 or SAC, not {type(algo).__name__}")
    check_goal_env(env)
    history: list[GoalEpisode] = []
    ratio = UpdateRatio(updates_per_step)
    for i in range(episodes):
        algo.uniform_exploration = i < warmup_episodes
        episode = run_goal_episode(env, agent.sample, seed=seed + i)
        replay.add_episode(episode)
        history.append(episode)
        if i + 1 >= warmup_episodes:
            for _ in range(ratio.owed(len(episode.actions))):
                agent.learn(replay.sample(batch_size))
    algo.uniform_exploration = False
    return history


def success_rate(agent: Any, env: gym.Env, episodes: int, seed: int = 10_000) -> float:
    """Fraction of ``episodes`` (greedy actions) that end at the goal (``info["is_success"]``)."""
    return float(np.mean([run_goal_episode(env, agent.predict, seed=seed + i).success for i in range(episodes)]))
