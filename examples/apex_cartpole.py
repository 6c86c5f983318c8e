"""Ape-X style DQN on CartPole-v1: collectors push experience straight into a replay actor.

Three kinds of actors, wired by name rather than by the driver:

- ``Replay`` (named ``replay``): a ring buffer of transitions. Collectors ``add`` to it
  directly; the learner ``sample``s from it.
- ``ParameterServer`` (named ``params``): the latest weights and their version. The learner
  ``push``es; collectors ``pull`` when a newer version exists.
- ``Collector`` (several): steps its own environments epsilon-greedily (collector ``i`` of
  ``N`` explores with ``eps_i = 0.4 ** (1 + 7 i / (N - 1))``, as in Ape-X), finds the other two
  with ``actorrt.get_actor`` and calls them from inside its own methods.

This process is the learner: double DQN on batches sampled from the replay actor, at a fixed
ratio of updates to environment steps (it hands out collection work only as fast as it learns).
Transitions never pass through it, and collectors never wait for it.

    python examples/apex_cartpole.py                        # embedded cluster on this machine
    python examples/apex_cartpole.py --address HOST:PORT    # a running cluster (actorrt start)

"Solved": the mean return of the last 10 episodes of the least-exploring collector (nearly
greedy) reaches --solved-return (475). Exits 0 when solved, 1 when not.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass

import gymnasium as gym
import numpy as np
import torch

import actorrt
import rl
from rl.bookkeeping import ReturnWindow


@dataclass
class Config(rl.TrainingRun):
    """Train Ape-X style DQN on CartPole-v1 with collectors feeding a replay actor."""

    env_id: str = "CartPole-v1"
    """gymnasium environment id (discrete actions)."""
    seed: int = 0
    """Seed for torch, the environments and the replay sampling."""
    total_steps: int = 300_000
    """Environment steps to train for, all collectors together (it stops at the first batch that reaches them)."""
    num_collectors: int = 2
    """Collector actors (at least 1)."""
    num_envs: int = 4
    """Environments per collector."""
    steps_per_task: int = 64
    """Steps per environment in one collection task (each task pushes its transitions once)."""
    update_ratio: float = 0.25
    """Learner updates per environment step."""
    batch_size: int = 64
    """Transitions per update."""
    updates_per_sample: int = 8
    """Updates done on one sample call's transitions (fewer round trips to the replay actor)."""
    buffer_size: int = 100_000
    """Replay capacity."""
    learning_starts: int = 1000
    """Transitions in the replay before the first update."""
    lr: float = 1e-3
    """Adam learning rate."""
    gamma: float = 0.99
    """Discount factor."""
    hidden: int = 128
    """Width of the two hidden layers of the Q-network."""
    target_update_interval: int = 50
    """Updates between target-network synchronisations."""
    publish_every: int = 25
    """Updates between weight pushes to the parameter server."""
    solved_return: float = 475.0
    """Mean return over the last 10 episodes of the least-exploring collector that counts as solved."""
    run_dir: str = "runs/apex_cartpole"
    """Where TensorBoard events, CSV logs and the PNG curve go."""
    address: str | None = None
    """Master HOST:PORT of a running cluster; default: an embedded cluster."""


def q_network(env_id: str, hidden: int) -> rl.QNetwork:
    env = gym.make(env_id)
    try:
        return rl.QNetwork(env.observation_space, env.action_space, hidden=(hidden, hidden))
    finally:
        env.close()


@actorrt.remote_class
class Replay:
    """Transitions from every collector; samples for the learner."""

    def __init__(self, capacity: int, obs_shape: tuple[int, ...], seed: int) -> None:
        self.buffer = rl.UniformReplay(capacity, obs_shape, seed=seed)

    def add(
        self, obs: np.ndarray, actions: np.ndarray, rewards: np.ndarray, next_obs: np.ndarray, done: np.ndarray
    ) -> int:
        self.buffer.add(obs, actions, rewards, next_obs, done)
        return len(self.buffer)

    def sample(self, n: int) -> rl.ReplayBatch[np.ndarray] | None:
        return self.buffer.sample(n) if len(self.buffer) else None

    def size(self) -> int:
        return len(self.buffer)


@actorrt.remote_class
class ParameterServer:
    """The latest weights and their version number."""

    def __init__(self) -> None:
        self.version = 0
        self.weights: dict[str, torch.Tensor] | None = None

    def push(self, weights: dict[str, torch.Tensor]) -> int:
        self.version += 1
        self.weights = weights
        return self.version

    def pull(self, have: int) -> tuple[int, dict[str, torch.Tensor]] | None:
        """The weights, if newer than version ``have``."""
        return (self.version, self.weights) if self.weights is not None and self.version > have else None


@actorrt.remote_class
class Collector:
    """Steps ``num_envs`` environments with its own epsilon; pushes what it sees to ``replay``."""

    def __init__(self, config: Config, index: int) -> None:
        torch.set_num_threads(1)
        self.epsilon = epsilon_of(index, config.num_collectors)
        self.envs = [gym.make(config.env_id) for _ in range(config.num_envs)]
        self.obs = np.stack(
            [env.reset(seed=config.seed + 1000 * index + i)[0] for i, env in enumerate(self.envs)]
        ).astype(np.float32)
        self.rng = np.random.default_rng(config.seed + index)
        self.model = q_network(config.env_id, config.hidden)
        self.version = 0
        self.steps = config.steps_per_task
        self.pushing: actorrt.CallFuture[int] | None = None
        self.episode_returns = np.zeros(len(self.envs))
        # Found by name: this actor does not need the driver to hand it anything.
        self.replay = actorrt.get_actor("replay").result()
        self.params = actorrt.get_actor("params").result()

    def collect(self) -> tuple[int, list[float]]:
        """One task: pull newer weights, step every environment ``steps`` times, push the
        transitions to the replay actor (without waiting for it). Returns the env steps taken
        and the returns of the episodes that finished."""
        if self.pushing is not None:
            self.pushing.result()  # the previous push: long done, but its error must not vanish
        newer = self.params.pull(self.version).result()
        if newer is not None:
            self.version, weights = newer
            self.model.load_state_dict(weights)
        parts: dict[str, list[np.ndarray]] = {k: [] for k in ("obs", "actions", "rewards", "next_obs", "done")}
        finished: list[float] = []
        n = len(self.envs)
        for _ in range(self.steps):
            with torch.no_grad():
                greedy = self.model(torch.as_tensor(self.obs)).argmax(-1).numpy()
            explore = self.rng.random(n) < self.epsilon
            actions = np.where(explore, self.rng.integers(self.model.num_actions, size=n), greedy)
            next_obs, following = np.empty_like(self.obs), np.empty_like(self.obs)
            rewards, done = np.zeros(n, np.float32), np.zeros(n, bool)
            for i, env in enumerate(self.envs):
                o, r, terminated, truncated, _ = env.step(int(actions[i]))
                next_obs[i], rewards[i], done[i] = o, r, terminated
                self.episode_returns[i] += r
                if terminated or truncated:
                    finished.append(float(self.episode_returns[i]))
                    self.episode_returns[i] = 0.0
                    o, _ = env.reset()
                following[i] = o
            for key, value in zip(parts, (self.obs, actions.astype(np.float32), rewards, next_obs, done), strict=True):
                parts[key].append(value)
            self.obs = following
        self.pushing = self.replay.add(*(np.concatenate(v) for v in parts.values()))
        return self.steps * n, finished


def epsilon_of(index: int, collectors: int) -> float:
    return 0.4 ** (1 + 7 * index / (collectors - 1)) if collectors > 1 else 0.05


def train(config: Config) -> rl.TrainResult:
    """The learner: start the actors, hand out collection tasks at the update ratio, learn."""
    if config.num_collectors < 1:
        raise ValueError(f"--num-collectors must be >= 1 (they feed the replay), got {config.num_collectors}")
    if config.total_steps < 1:
        raise ValueError(f"--total-steps must be >= 1, got {config.total_steps}")
    rl.use_torch_threads()
    torch.manual_seed(config.seed)
    started = time.perf_counter()
    algorithm = rl.DQN(
        q_network(config.env_id, config.hidden),
        lr=config.lr,
        gamma=config.gamma,
        target_update_interval=config.target_update_interval,
        epsilon=0.0,
    )
    agent = rl.Agent(algorithm)
    if config.restore:
        agent.restore(config.restore)
    logger = rl.TrainingLogger(
        config.run_dir, config.total_steps, tensorboard=config.tensorboard, progress=config.progress
    )
    greediest = ReturnWindow(10)  # the least-exploring collector's last returns
    env_steps = updates = 0
    with actorrt.connect(config.address, num_cpus=config.num_collectors + 2):
        obs_shape = q_network_obs_shape(config.env_id)
        replay = Replay.options(name="replay").remote(config.buffer_size, obs_shape, config.seed).result()
        params = ParameterServer.options(name="params").remote().result()
        params.push(algorithm.model.state_dict()).result()
        collectors = [Collector.remote(config, i).result() for i in range(config.num_collectors)]
        tasks = {c.collect(): i for i, c in enumerate(collectors)}
        solved = False
        while env_steps < config.total_steps and not (solved and config.stop_when_solved):
            due = (env_steps - config.learning_starts) * config.update_ratio
            # A collector returns its task before its push to the replay has landed, so the replay
            # can still be empty when the steps counted say learning is due: then wait for a task.
            batch = None
            if updates < due:  # learn before handing out more work: the ratio holds
                batch = replay.sample(config.batch_size * config.updates_per_sample).result()
            if batch is not None:
                for k in range(config.updates_per_sample):
                    part = rl.ReplayBatch(*(x[k * config.batch_size : (k + 1) * config.batch_size] for x in batch))
                    stats = agent.learn(part)
                    updates += 1
                    if updates % config.publish_every == 0:
                        params.push(algorithm.model.state_dict())  # no need to wait for it
                logger.log_update(env_steps, stats, {"updates": updates})
                continue
            done, _ = actorrt.wait(list(tasks), num_returns=1).result()
            for task in done:
                index = tasks.pop(task)
                steps, returns = task.result()
                env_steps += steps
                if returns:
                    logger.log_episodes(env_steps, np.array(returns), np.zeros(len(returns)))
                    if index == config.num_collectors - 1:
                        greediest.add(np.array(returns))
                        solved = greediest.solved(config.solved_return)
                tasks[collectors[index].collect()] = index
        actorrt.wait(list(tasks), num_returns=len(tasks), timeout=30).result()
    logger.close()
    logger.plot(f"Ape-X DQN on {config.env_id}", config.solved_return)
    if config.save:
        agent.save(config.save)
    return rl.TrainResult(solved, env_steps, time.perf_counter() - started, greediest.mean, len(greediest))


def q_network_obs_shape(env_id: str) -> tuple[int, ...]:
    env = gym.make(env_id)
    try:
        assert env.observation_space.shape is not None
        return tuple(env.observation_space.shape)
    finally:
        env.close()


if __name__ == "__main__":
    with rl.user_errors():
        cfg = rl.parse_config(Config)
        result = train(cfg)
        print(rl.result_line(cfg.env_id, "Ape-X DQN", result), flush=True)
        sys.exit(0 if result.solved else 1)
