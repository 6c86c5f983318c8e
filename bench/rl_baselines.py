"""Our PPO and A2C against Stable-Baselines3's, side by side on CartPole-v1.

Each run is a fresh subprocess with one torch thread. Runs alternate (ours PPO, SB3 PPO, ours
A2C, SB3 A2C) seed by seed, so slow drifts of the machine hit both sides alike. A run measures
wall-clock seconds (from the first env step; model construction excluded on both sides) and env
steps until the mean return of the last 20 training episodes reaches 475, or stops at a cap.

    python bench/rl_baselines.py                 # 5 seeds, prints JSON lines then a table
    python bench/rl_baselines.py --seeds 3
    python bench/rl_baselines.py --quick         # smoke test: 1 seed, tiny caps

SB3 side: rl-zoo hyper-parameters for CartPole-v1 (PPO: 8 envs, n_steps 32, batch 256, 20
epochs, gamma .98, lambda .8, linear lr 1e-3 and clip .2; A2C: 8 envs, defaults, ent_coef 0).
Our side: the same networks (64x64 tanh policy and value MLPs) and losses; PPO: 8 envs x 32
steps, 5 epochs of one 256-sample minibatch, lr 3e-3 (a quarter of the gradient steps of 20
epochs, for ~1.5x the env steps); A2C: 8 envs x 8 steps, RMSprop lr 2e-3 (SB3's defaults are
5 steps and 7e-4).

``--suite mujoco``: our SAC/TD3/PPO against SB3's on a MuJoCo task (default HalfCheetah-v5), with
the same hyper-parameters on both sides (SAC/TD3: rl-zoo's for HalfCheetah, one env, one gradient
step per env step; PPO: SB3's defaults with observation and reward normalisation; see
``MUJOCO_HPARAMS``). Each run (fresh subprocess, one torch thread, sides
alternating seed by seed) records the mean of the last 10 finished training episodes at each
checkpoint it reaches (50k / 100k / 300k env steps, or half-way and the end in ``--quick``), the
wall-clock from the first env step, env steps/s, and the wall-clock and env steps at which that
mean first reaches 3,000 (``null`` if never). SAC and TD3 runs also evaluate the policy's mean
action at each checkpoint (``eval_return``: the mean return of ``--eval-episodes`` episodes, 10
by default and 1 in ``--quick``, on a separate env seeded alike on both sides; not counted in
the wall-clock, and drawing nothing from the training's random streams, so the training runs as
it would without). A micro-benchmark child first times ONE SAC (and
TD3, when named) gradient step (replay sample + update, batch 256, the env's dims) on each side
in one process.

    python bench/rl_baselines.py --suite mujoco --algos sac --steps 100000 --seeds 1
    python bench/rl_baselines.py --suite mujoco --algos sac,td3 --steps 50000 --seeds 2 --first-seed 1
    python bench/rl_baselines.py --suite mujoco --quick      # smoke test: 1.5k steps, learning_starts 1000
    python bench/rl_baselines.py --suite mujoco --algos sac --sides oursbf16,sb3,ours --steps 100000

``--sides``: which of ``ours``, ``ourscompile`` (our SAC/TD3 with ``compile=True``: the losses
through ``torch.compile``), ``oursbf16`` (with ``autocast=torch.bfloat16``, the updates' forward
passes in bfloat16: fast only where bfloat16 matmuls are native, such as AMX), ``oursbf16compile``
(both) and ``sb3`` run, in that order for each seed; the micro-benchmarks (one per off-policy
algorithm named) time each of our sides named. Every row records the CPU it ran on (``cpu``).

Each run reports its progress on stderr at each point of its learning curve (every
``--curve-every`` env steps, 10,000 by default). Stopped (SIGTERM, or Ctrl-C), the benchmark stops
the run in progress and writes its row as it stood at its last point, marked ``"partial": true``
(``bench/rl_summary.py`` counts the checkpoints such a row reached), then exits 143 (130).
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections import deque
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar, cast

if TYPE_CHECKING:
    import rl

SOLVED = 475.0
WINDOW = 20
CAPS = {"ppo": 200_000, "a2c": 500_000}
RUNNERS = ["ours_ppo", "sb3_ppo", "ours_a2c", "sb3_a2c"]


# -- one run (inside the subprocess) ----------------------------------------------------------
def run_ours(algo: str, seed: int, cap: int) -> dict:
    import torch

    import rl
    from rl.collector import env_spaces

    torch.manual_seed(seed)
    if algo == "ppo":
        config = rl.CollectorConfig("CartPole-v1", num_envs=8, num_steps=32, seed=seed)
        obs_space, act_space = env_spaces(config)
        algorithm: rl.Algorithm = rl.PPO(
            rl.ActorCritic(obs_space, act_space),
            lr=3e-3,
            gamma=0.98,
            gae_lambda=0.8,
            num_epochs=5,
            num_minibatches=1,
            seed=seed,
        )
    else:
        config = rl.CollectorConfig("CartPole-v1", num_envs=8, num_steps=8, seed=seed)
        obs_space, act_space = env_spaces(config)
        algorithm = rl.A2C(rl.ActorCritic(obs_space, act_space), lr=2e-3, gamma=0.99)
    agent = rl.Agent(algorithm)
    collector = rl.Collector(config, agent)
    result = rl.train_on_policy(agent, collector, cap, solved_return=SOLVED, window=WINDOW)
    collector.close()
    return {"solved": result.solved, "env_steps": result.env_steps, "wall_s": result.wall_s}


def run_sb3(algo: str, seed: int, cap: int) -> dict:
    import torch

    torch.set_num_threads(1)
    from stable_baselines3 import A2C, PPO
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.env_util import make_vec_env

    class StopWhenSolved(BaseCallback):
        def __init__(self) -> None:
            super().__init__()
            self.returns: deque[float] = deque(maxlen=WINDOW)
            self.solved = False
            self.start = 0.0

        def _on_training_start(self) -> None:
            self.start = time.perf_counter()

        def _on_step(self) -> bool:
            for info in self.locals["infos"]:
                if "episode" in info:
                    self.returns.append(info["episode"]["r"])
            if len(self.returns) == WINDOW and sum(self.returns) / WINDOW >= SOLVED:
                self.solved = True
                return False
            return True

    env = make_vec_env("CartPole-v1", n_envs=8, seed=seed)
    model: PPO | A2C
    if algo == "ppo":

        def lin(v: float) -> Callable[[float], float]:
            return lambda progress: progress * v

        model = PPO(
            "MlpPolicy",
            env,
            n_steps=32,
            batch_size=256,
            gae_lambda=0.8,
            gamma=0.98,
            n_epochs=20,
            ent_coef=0.0,
            learning_rate=lin(1e-3),
            clip_range=lin(0.2),
            seed=seed,
            device="cpu",
        )
    else:
        model = A2C("MlpPolicy", env, ent_coef=0.0, seed=seed, device="cpu")
    callback = StopWhenSolved()
    _sb3_quiet(model).learn(total_timesteps=cap, callback=callback)
    wall = time.perf_counter() - callback.start
    return {"solved": callback.solved, "env_steps": int(model.num_timesteps), "wall_s": wall}


def _child(runner: str, seed: int, cap: int) -> None:
    side, algo = runner.split("_")
    out = (run_ours if side == "ours" else run_sb3)(algo, seed, cap)
    print(json.dumps({"runner": runner, "seed": seed, **out, "wall_s": round(out["wall_s"], 3)}), flush=True)


# -- the benchmark (parent) -------------------------------------------------------------------
def _sb3_available() -> bool:
    try:
        importlib.import_module("stable_baselines3")
    except ImportError:
        return False
    return True


_Model = TypeVar("_Model")


def _sb3_quiet(model: _Model) -> _Model:
    """``model`` with a logger that writes nothing: SB3's default one makes a ``/tmp/SB3-<time>``
    folder on every ``learn`` even when it logs nothing (``verbose=0``)."""
    from stable_baselines3.common.logger import Logger

    cast(Any, model).set_logger(Logger(folder=None, output_formats=[]))
    return model


def main_cartpole(args: argparse.Namespace) -> None:
    seeds = 1 if args.quick else args.seeds
    have_sb3 = _sb3_available()
    env = {**os.environ, "RL_TORCH_THREADS": "1", "OMP_NUM_THREADS": "1"}
    results: dict[str, list[dict]] = {r: [] for r in RUNNERS}
    for seed in range(seeds):
        for runner in RUNNERS:
            if runner.startswith("sb3") and not have_sb3:
                continue
            cap = 2000 if args.quick else CAPS[runner.split("_")[1]]
            proc = subprocess.run(
                [sys.executable, os.path.abspath(__file__), "--child", runner, str(seed), str(cap)],
                capture_output=True,
                text=True,
                env=env,
                check=False,
            )
            lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
            if proc.returncode != 0 or not lines:
                print(json.dumps({"runner": runner, "seed": seed, "error": proc.stderr[-2000:]}), flush=True)
                continue
            print(lines[-1], flush=True)
            results[runner].append(json.loads(lines[-1]))

    def med(runner: str, key: str) -> float | None:
        rows = results[runner]
        return statistics.median(r[key] for r in rows) if rows else None

    print()
    print(f"CartPole-v1, {seeds} seed(s), time to mean return {SOLVED:.0f} over the last {WINDOW} episodes")
    print(f"{'algo':<5} {'side':<5} {'solved':>7} {'median steps':>13} {'median wall s':>14} {'ours/SB3 wall':>14}")
    for algo in ("ppo", "a2c"):
        for side in ("ours", "sb3"):
            runner = f"{side}_{algo}"
            if side == "sb3" and not have_sb3:
                print(f"{algo:<5} {side:<5} {'stable-baselines3 not installed (pip install stable-baselines3)':>40}")
                continue
            rows = results[runner]
            solved = f"{sum(r['solved'] for r in rows)}/{len(rows)}"
            steps, wall = med(runner, "env_steps"), med(runner, "wall_s")
            ratio = ""
            sb3_wall = med(f"sb3_{algo}", "wall_s") if side == "ours" and have_sb3 and wall is not None else None
            if wall is not None and sb3_wall:
                ratio = f"{wall / sb3_wall:.2f}"
            steps_s = "-" if steps is None else f"{steps:.0f}"
            wall_s = "-" if wall is None else f"{wall:.2f}"
            print(f"{algo:<5} {side:<5} {solved:>7} {steps_s:>13} {wall_s:>14} {ratio:>14}")


# -- MuJoCo suite: off-policy SAC / TD3 ------------------------------------------------------------
TARGET = 3000.0
"""The HalfCheetah return whose wall-clock the issue asks for."""
MUJOCO_WINDOW = 10
EVAL_EPISODES = 10
"""Episodes of the mean action evaluated at each checkpoint of an off-policy run (``--eval-episodes``)."""
EVAL_SEED = 1_000_000
"""The evaluation env's episode seeds: ``EVAL_SEED + 1000 * seed + episode``, the same on both sides."""
OURS_SIDES: dict[str, tuple[str | None, bool]] = {
    "ours": (None, False),
    "ourscompile": (None, True),
    "oursbf16": ("bf16", False),
    "oursbf16compile": ("bf16", True),
}
"""Our sides, as ``(autocast, compile)``: ``ourscompile`` our SAC/TD3 with ``compile=True`` (their
losses through ``torch.compile``, float32); ``oursbf16`` with ``autocast=torch.bfloat16`` (the
updates' forward passes in bfloat16: fast only on CPUs with native bfloat16 matmuls, such as
AMX); ``oursbf16compile`` with both."""
SIDES = (*OURS_SIDES, "sb3")
CHECKPOINTS = (50_000, 100_000, 300_000)
MUJOCO_HPARAMS: dict[str, dict] = {
    # rl-zoo (hyperparams/sac.yml, td3.yml) for HalfCheetah: learning_starts 10000 on top of the
    # SB3 defaults; TD3 adds Gaussian action noise of std 0.1. Written out so both sides read them.
    "sac": {
        "hidden": (256, 256),
        "lr": 3e-4,
        "batch_size": 256,
        "buffer_size": 1_000_000,
        "learning_starts": 10_000,
        "gamma": 0.99,
        "tau": 0.005,
        "train_freq": 1,
        "gradient_steps": 1,
        "ent_coef": "auto (initial 1.0, target entropy -dim(A))",
    },
    "td3": {
        "hidden": (400, 300),
        "lr": 1e-3,
        "batch_size": 256,
        "buffer_size": 1_000_000,
        "learning_starts": 10_000,
        "gamma": 0.99,
        "tau": 0.005,
        "train_freq": 1,
        "gradient_steps": 1,
        "action_noise": 0.1,
        "policy_delay": 2,
        "target_policy_noise": 0.2,
        "target_noise_clip": 0.5,
    },
    "ppo": {
        # SB3's PPO defaults (which are also examples/ppo_halfcheetah.py's and rl.PPO's usual MuJoCo
        # settings) with observation and reward normalisation (rl-zoo's ``normalize: true``): SB3
        # wraps the env in VecNormalize, ours is rl.normalization.NormalizingAgent. 64x64 tanh
        # policy and value MLPs, state-independent log std initialised at 0, orthogonal init.
        "hidden": (64, 64),
        "lr": 3e-4,
        "n_envs": 1,
        "n_steps": 2048,
        "batch_size": 64,
        "n_epochs": 10,
        "gamma": 0.99,
        "gae_lambda": 0.95,
        "clip_range": 0.2,
        "ent_coef": 0.0,
        "vf_coef": 0.5,
        "max_grad_norm": 0.5,
        "normalize": "obs and reward, clip 10",
    },
}


# TD3's networks and lr as examples/td3_halfcheetah.py has them by default, which are also the TD3
# authors' own code's (github.com/sfujim/TD3 since 2019), CleanRL's and Tianshou's: 256x256, lr 3e-4
# (rl-zoo's "td3" keeps the paper's 400x300 and lr 1e-3); the rest is rl-zoo's, learning_starts
# 10,000 included (the example's default is 25,000). Both sides read it, as they read the others.
MUJOCO_HPARAMS["td3-256"] = {**MUJOCO_HPARAMS["td3"], "hidden": (256, 256), "lr": 3e-4}
# rl-zoo's TD3 with SAC's 256x256 networks instead of 400x300 (lr 1e-3 kept): the network width
# alone changed, against "td3", and the learning rate alone, against "td3-256".
MUJOCO_HPARAMS["td3-256-zoo"] = {**MUJOCO_HPARAMS["td3"], "hidden": (256, 256)}
OFF_POLICY = ("sac", "td3", "td3-256", "td3-256-zoo")
"""The off-policy configurations of ``MUJOCO_HPARAMS`` (the rest is PPO)."""


CURVE_EVERY = 10_000
"""Env steps between two points of a run's learning curve (``curve`` in its row)."""


def _print_progress(row: dict) -> None:
    """A run's row so far, as a ``"progress": true`` JSON line on stdout: the parent reports it and
    writes the last one as a partial row if it is stopped (see ``main_mujoco``)."""
    print(json.dumps({"progress": True, **row}), flush=True)


class _Tracker:
    """Mean of the last ``MUJOCO_WINDOW`` finished training episodes, at each checkpoint and every
    ``curve_every`` env steps (the learning curve), and the first time it reaches ``TARGET``.
    ``start`` is set at the first env step. At each point of the curve, ``on_curve`` gets the row
    so far (``updates`` unknown there: None)."""

    def __init__(
        self,
        checkpoints: list[int],
        curve_every: int = CURVE_EVERY,
        evaluate: Callable[[], float] | None = None,
        on_curve: Callable[[dict], None] | None = _print_progress,
    ) -> None:
        self.curve_every = curve_every
        self.evaluate = evaluate
        """Called at each checkpoint: the mean action's return (``eval_return``), its time excluded."""
        self.on_curve = on_curve
        self.recent: deque[float] = deque(maxlen=MUJOCO_WINDOW)
        self.episodes = 0
        self.pending = sorted(checkpoints)
        self.at: dict[str, dict] = {}
        self.curve: list[tuple[int, float | None]] = []
        self.reached: dict | None = None
        self.start = 0.0
        self.learn_start: float | None = None
        """Wall-clock (s from the start) of the first gradient step."""
        self.learn_start_steps = 0
        """Env steps at the first gradient step."""

    def begin(self) -> None:
        self.start = time.perf_counter()

    def mean(self) -> float | None:
        return round(sum(self.recent) / len(self.recent), 1) if self.recent else None

    def step(self, steps: int, returns: list[float], learning: bool) -> None:
        now = time.perf_counter() - self.start
        if learning and self.learn_start is None:
            self.learn_start = now
        for r in returns:
            self.recent.append(float(r))
            self.episodes += 1
            full = len(self.recent) == MUJOCO_WINDOW
            if self.reached is None and full and sum(self.recent) / MUJOCO_WINDOW >= TARGET:
                self.reached = {"env_steps": steps, "wall_s": round(now, 2)}
        while self.pending and steps >= self.pending[0]:
            at: dict[str, float | None] = {"mean_return": self.mean(), "wall_s": round(now, 2)}
            if self.evaluate is not None:
                t0 = time.perf_counter()
                at["eval_return"] = round(self.evaluate(), 1)
                self.start += time.perf_counter() - t0  # the evaluation is not the run's time
            self.at[str(self.pending.pop(0))] = at
        points = len(self.curve)
        while steps >= self.curve_every * (len(self.curve) + 1):
            self.curve.append((self.curve_every * (len(self.curve) + 1), self.mean()))
        if self.on_curve is not None and len(self.curve) > points:
            self.on_curve(self.result(steps, None))

    def result(self, steps: int, updates: int | None) -> dict:
        wall = time.perf_counter() - self.start
        learn_s = wall - self.learn_start if self.learn_start is not None else None
        learn_steps = max(0, steps - self.learn_start_steps) if self.learn_start is not None else 0
        return {
            "env_steps": steps,
            "updates": updates,
            "wall_s": round(wall, 2),
            "env_steps_per_s": round(steps / wall, 1),
            "learning_env_steps_per_s": round(learn_steps / learn_s, 1) if learn_s else None,
            "episodes": self.episodes,
            "checkpoints": self.at,
            "curve": self.curve,
            f"reached_{TARGET:.0f}": self.reached,
            "final_mean_return": self.mean(),
        }


def evaluate_policy(env_id: str, act: Callable[[Any], Any], seed: int, episodes: int) -> float:
    """Mean return of ``episodes`` episodes of ``act`` (observation -> action, the policy's mean
    action) on a fresh ``gym.make(env_id)``, episode ``i`` seeded ``EVAL_SEED + 1000 * seed + i``."""
    import gymnasium as gym

    env = gym.make(env_id)
    total = 0.0
    try:
        for i in range(episodes):
            obs, _ = env.reset(seed=EVAL_SEED + 1000 * seed + i)
            done = False
            while not done:
                obs, reward, terminated, truncated, _ = env.step(act(obs))
                total += float(reward)
                done = terminated or truncated
    finally:
        env.close()
    return total / episodes


def _curve_every(steps: int, quick: bool, every: int = CURVE_EVERY) -> int:
    return max(1, steps // 3) if quick else every


def _checkpoints(steps: int, quick: bool) -> list[int]:
    if quick:
        return [steps // 2, steps]
    return [c for c in CHECKPOINTS if c <= steps] or [steps]


def run_ours_offpolicy(
    algo: str,
    env_id: str,
    seed: int,
    steps: int,
    learning_starts: int,
    quick: bool,
    autocast: str | None = None,
    compile: bool = False,
    eval_episodes: int = 0,
    curve_every: int = CURVE_EVERY,
) -> dict:
    import numpy as np
    import torch

    import rl
    from rl.collector import env_spaces

    torch.set_num_threads(1)
    torch.manual_seed(seed)
    np.random.seed(seed)
    hp = MUJOCO_HPARAMS[algo]
    # One env, one step per collect: SB3's train_freq 1 (an update after every env step).
    config = rl.CollectorConfig(env_id, num_envs=1, num_steps=1, seed=seed)
    obs_space, act_space = env_spaces(config)
    assert obs_space.shape is not None and act_space.shape is not None
    algorithm = _ours_algorithm(algo, obs_space, act_space, autocast, compile)
    agent = rl.Agent(algorithm)
    collector = rl.Collector(config, agent)
    replay = rl.UniformReplay(hp["buffer_size"], obs_space.shape, act_space.shape, seed=seed)

    def evaluate() -> float:
        return evaluate_policy(env_id, lambda o: agent.predict(o[None].astype(np.float32))[0], seed, eval_episodes)

    tracker = _Tracker(
        _checkpoints(steps, quick), _curve_every(steps, quick, curve_every), evaluate if eval_episodes else None
    )
    batch_size = hp["batch_size"]
    tracker.begin()
    while collector.total_steps < steps:
        algorithm.uniform_exploration = collector.total_steps < learning_starts
        rollout = collector.collect()
        replay.add_rollout(rollout)
        learning = collector.total_steps > learning_starts  # SB3: trains once num_timesteps > learning_starts
        if learning:
            if tracker.learn_start is None:
                tracker.learn_start_steps = collector.total_steps
            agent.learn(replay.sample(batch_size))
        tracker.step(collector.total_steps, rollout.episode_returns.tolist(), learning)
    collector.close()
    # Gradients written out (rl.backprop) or by autograd: rows of the two are timed apart.
    return {
        **tracker.result(collector.total_steps, algorithm.updates),
        "written_out": getattr(algorithm, "written_out", False),
    }


def run_ours_ppo(env_id: str, seed: int, steps: int, quick: bool, curve_every: int = CURVE_EVERY) -> dict:
    """Our PPO in one process: a local collector (1 env x ``n_steps``), one update per rollout."""
    import numpy as np
    import torch

    import rl
    from rl.collector import env_spaces
    from rl.normalization import NormalizingAgent

    torch.set_num_threads(1)
    torch.manual_seed(seed)
    np.random.seed(seed)
    hp = MUJOCO_HPARAMS["ppo"]
    config = rl.CollectorConfig(env_id, num_envs=hp["n_envs"], num_steps=hp["n_steps"], seed=seed)
    obs_space, act_space = env_spaces(config)
    assert obs_space.shape is not None
    algorithm = rl.PPO(
        rl.ActorCritic(obs_space, act_space, hidden=hp["hidden"]),
        lr=hp["lr"],
        gamma=hp["gamma"],
        gae_lambda=hp["gae_lambda"],
        clip_range=hp["clip_range"],
        num_epochs=hp["n_epochs"],
        num_minibatches=hp["n_envs"] * hp["n_steps"] // hp["batch_size"],
        vf_coef=hp["vf_coef"],
        ent_coef=hp["ent_coef"],
        max_grad_norm=hp["max_grad_norm"],
        seed=seed,
    )
    agent = NormalizingAgent(algorithm, obs_space.shape, hp["gamma"])
    collector = rl.Collector(config, agent)
    tracker = _Tracker(_checkpoints(steps, quick), _curve_every(steps, quick, curve_every))
    tracker.begin()
    updates = 0
    while collector.total_steps < steps:
        rollout = collector.collect()
        agent.learn(rollout)
        updates += 1
        tracker.step(collector.total_steps, rollout.episode_returns.tolist(), True)
    collector.close()
    return tracker.result(collector.total_steps, updates)


def run_sb3_ppo(env_id: str, seed: int, steps: int, quick: bool, curve_every: int = CURVE_EVERY) -> dict:
    """SB3's PPO with the same settings, in a VecNormalize-wrapped single env."""
    import torch

    torch.set_num_threads(1)
    from stable_baselines3 import PPO
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.vec_env import VecNormalize

    hp = MUJOCO_HPARAMS["ppo"]
    tracker = _Tracker(_checkpoints(steps, quick), _curve_every(steps, quick, curve_every))

    env = VecNormalize(make_vec_env(env_id, n_envs=hp["n_envs"], seed=seed), gamma=hp["gamma"])
    model = PPO(
        "MlpPolicy",
        env,
        learning_rate=hp["lr"],
        n_steps=hp["n_steps"],
        batch_size=hp["batch_size"],
        n_epochs=hp["n_epochs"],
        gamma=hp["gamma"],
        gae_lambda=hp["gae_lambda"],
        clip_range=hp["clip_range"],
        ent_coef=hp["ent_coef"],
        vf_coef=hp["vf_coef"],
        max_grad_norm=hp["max_grad_norm"],
        policy_kwargs={"net_arch": {"pi": list(hp["hidden"]), "vf": list(hp["hidden"])}},
        seed=seed,
        device="cpu",
    )
    _sb3_quiet(model).learn(total_timesteps=steps, callback=_sb3_tracking(tracker, 0))
    # SB3 counts epochs in _n_updates; "updates" on both sides is one per rollout.
    return tracker.result(int(model.num_timesteps), int(model._n_updates) // hp["n_epochs"])


def _ours_algorithm(
    algo: str, obs_space: Any, act_space: Any, autocast: str | None = None, compile: bool = False
) -> rl.SAC | rl.TD3:
    """Our SAC or TD3 with ``MUJOCO_HPARAMS[algo]`` (the same the SB3 side gets); ``autocast``
    ``"bf16"``: the updates' forward passes in bfloat16 (``rl.SAC(autocast=torch.bfloat16)``);
    ``compile``: the losses through ``torch.compile`` (``rl.SAC(compile=True)``, ``rl.TD3(compile=True)``)."""
    import torch

    import rl

    hp = MUJOCO_HPARAMS[algo]
    h = hp["hidden"]
    common = {
        "actor_lr": hp["lr"],
        "critic_lr": hp["lr"],
        "gamma": hp["gamma"],
        "tau": hp["tau"],
        "autocast": torch.bfloat16 if autocast == "bf16" else None,
    }
    critic = rl.TwinQCritic(obs_space, act_space, h)
    if algo == "sac":
        actor = rl.SquashedGaussianActor(obs_space, act_space, h)
        return rl.SAC(actor, critic, alpha_lr=hp["lr"], compile=compile, **common)
    return rl.TD3(
        rl.DeterministicActor(obs_space, act_space, h),
        critic,
        exploration_noise=hp["action_noise"],
        policy_noise=hp["target_policy_noise"],
        noise_clip=hp["target_noise_clip"],
        policy_delay=hp["policy_delay"],
        compile=compile,
        **common,
    )


def _sb3_offpolicy_model(algo: str, env: Any, seed: int, learning_starts: int) -> object:
    import numpy as np
    from stable_baselines3 import SAC, TD3
    from stable_baselines3.common.noise import NormalActionNoise

    hp = MUJOCO_HPARAMS[algo]
    common: dict[str, Any] = {
        "learning_rate": hp["lr"],
        "buffer_size": hp["buffer_size"],
        "learning_starts": learning_starts,
        "batch_size": hp["batch_size"],
        "tau": hp["tau"],
        "gamma": hp["gamma"],
        "train_freq": hp["train_freq"],
        "gradient_steps": hp["gradient_steps"],
        "policy_kwargs": {"net_arch": list(hp["hidden"])},
        "seed": seed,
        "device": "cpu",
    }
    if algo == "sac":
        return SAC("MlpPolicy", env, ent_coef="auto", **common)
    n_act = env.action_space.shape[-1]
    noise = NormalActionNoise(np.zeros(n_act), hp["action_noise"] * np.ones(n_act))
    return TD3(
        "MlpPolicy",
        env,
        action_noise=noise,
        policy_delay=hp["policy_delay"],
        target_policy_noise=hp["target_policy_noise"],
        target_noise_clip=hp["target_noise_clip"],
        **common,
    )


def _sb3_tracking(tracker: _Tracker, learning_starts: int) -> Any:
    """An SB3 callback that feeds ``tracker`` the finished episodes' returns at every env step
    (learning from the first step past ``learning_starts``, as SB3 counts)."""
    from stable_baselines3.common.callbacks import BaseCallback

    class Track(BaseCallback):
        def _on_training_start(self) -> None:
            tracker.begin()

        def _on_step(self) -> bool:
            returns = [info["episode"]["r"] for info in self.locals["infos"] if "episode" in info]
            learning = self.num_timesteps > learning_starts
            if learning and tracker.learn_start is None:
                tracker.learn_start_steps = self.num_timesteps
            tracker.step(self.num_timesteps, returns, learning)
            return True

    return Track()


def run_sb3_offpolicy(
    algo: str,
    env_id: str,
    seed: int,
    steps: int,
    learning_starts: int,
    quick: bool,
    eval_episodes: int = 0,
    curve_every: int = CURVE_EVERY,
) -> dict:
    import torch

    torch.set_num_threads(1)
    from stable_baselines3.common.env_util import make_vec_env

    env = make_vec_env(env_id, n_envs=1, seed=seed)
    model = _sb3_quiet(_sb3_offpolicy_model(algo, env, seed, learning_starts))

    def evaluate() -> float:
        act = lambda o: model.predict(o, deterministic=True)[0]  # type: ignore[attr-defined]  # noqa: E731
        return evaluate_policy(env_id, act, seed, eval_episodes)

    tracker = _Tracker(
        _checkpoints(steps, quick), _curve_every(steps, quick, curve_every), evaluate if eval_episodes else None
    )
    model.learn(total_timesteps=steps, callback=_sb3_tracking(tracker, learning_starts))  # type: ignore[attr-defined]
    return tracker.result(int(model.num_timesteps), int(model._n_updates))  # type: ignore[attr-defined]


def run_micro(env_id: str, rounds: int, per_round: int, ours: Sequence[str] = ("ours",), algo: str = "sac") -> dict:
    """Median wall time of ONE gradient step of ``algo`` (SAC: replay sample of 256 + critic,
    actor and temperature updates + target update; TD3: a timed call is ``policy_delay`` steps,
    the critic's in each and the actor's and targets' in the last, reported per step), on each of
    our sides ``ours`` (names in :data:`OURS_SIDES`) and SB3's, in this one process, interleaved
    in blocks of ``per_round`` calls so that drifts of the machine hit all alike. A compiled side
    is compiled in its warm-up."""
    import numpy as np
    import torch

    import rl
    from rl.collector import env_spaces

    torch.set_num_threads(1)
    torch.manual_seed(0)
    hp = MUJOCO_HPARAMS[algo]
    per_call = int(hp.get("policy_delay", 1))
    obs_space, act_space = env_spaces(rl.CollectorConfig(env_id))
    assert obs_space.shape is not None and act_space.shape is not None
    n_obs, n_act = obs_space.shape[0], act_space.shape[0]
    fill = 10_000
    rng = np.random.default_rng(0)
    data = (
        rng.standard_normal((fill, n_obs)).astype(np.float32),
        rng.uniform(-1, 1, (fill, n_act)).astype(np.float32),
        rng.standard_normal(fill).astype(np.float32),
        rng.standard_normal((fill, n_obs)).astype(np.float32),
    )
    replay = rl.UniformReplay(hp["buffer_size"], (n_obs,), (n_act,), seed=0)
    replay.add(data[0], data[1], data[2], data[3], np.zeros(fill, bool))

    def learner(agent: rl.Agent) -> Callable[[], None]:
        def step() -> None:
            for _ in range(per_call):
                agent.learn(replay.sample(hp["batch_size"]))

        return step

    sides: dict[str, Callable[[], None]] = {}
    for name in ours:
        autocast, compile = OURS_SIDES[name]
        sides[name] = learner(rl.Agent(_ours_algorithm(algo, obs_space, act_space, autocast, compile)))
    if _sb3_available():
        from stable_baselines3.common.env_util import make_vec_env

        model = _sb3_quiet(_sb3_offpolicy_model(algo, make_vec_env(env_id, n_envs=1, seed=0), 0, 0))
        model._setup_learn(total_timesteps=1)  # type: ignore[attr-defined]  # logger, progress
        buf = model.replay_buffer  # type: ignore[attr-defined]
        for i in range(fill):
            buf.add(data[0][i : i + 1], data[3][i : i + 1], data[1][i : i + 1], data[2][i : i + 1], np.zeros(1), [{}])

        def sb3_step() -> None:
            model.train(gradient_steps=per_call, batch_size=hp["batch_size"])  # type: ignore[attr-defined]

        sides["sb3"] = sb3_step
    times: dict[str, list[float]] = {k: [] for k in sides}
    for fn in sides.values():  # warm-up
        for _ in range(20):
            fn()
    for _ in range(rounds):
        for name, fn in sides.items():
            for _ in range(per_round):
                t0 = time.perf_counter()
                fn()
                times[name].append((time.perf_counter() - t0) / per_call)
    out: dict = {
        "algo": algo,
        "env": env_id,
        "obs_dim": n_obs,
        "act_dim": n_act,
        "batch": hp["batch_size"],
        "hidden": list(hp["hidden"]),
    }
    for name, ts in times.items():
        out[f"{name}_median_ms"] = round(statistics.median(ts) * 1e3, 3)
        out[f"{name}_p10_ms"] = round(statistics.quantiles(ts, n=10)[0] * 1e3, 3)
        out[f"{name}_p90_ms"] = round(statistics.quantiles(ts, n=10)[-1] * 1e3, 3)
        out[f"{name}_steps_timed"] = len(ts)
    if "sb3_median_ms" in out:
        for name in times:
            if name != "sb3":
                out[f"{name}_over_sb3"] = round(out[f"{name}_median_ms"] / out["sb3_median_ms"], 3)
    return out


def _mujoco_child(spec: dict) -> None:
    if spec["runner"] == "micro":
        ours = spec.get("ours", ("ours",))
        out = run_micro(spec["env"], spec["rounds"], spec["per_round"], ours, spec.get("algo", "sac"))
    else:
        side, algo = spec["runner"].split("_")
        every = spec.get("curve_every", CURVE_EVERY)
        if algo == "ppo":
            ppo = run_ours_ppo if side.startswith("ours") else run_sb3_ppo
            out = ppo(spec["env"], spec["seed"], spec["steps"], spec["quick"], curve_every=every)
        else:
            args = (algo, spec["env"], spec["seed"], spec["steps"], spec["learning_starts"], spec["quick"])
            episodes = spec.get("eval_episodes", 0)
            if side.startswith("ours"):
                autocast, compile = OURS_SIDES[side]
                out = run_ours_offpolicy(
                    *args, autocast=autocast, compile=compile, eval_episodes=episodes, curve_every=every
                )
            else:
                out = run_sb3_offpolicy(*args, eval_episodes=episodes, curve_every=every)
    print(json.dumps({**spec, **out}), flush=True)


class _StopError(Exception):
    """This benchmark got SIGTERM: the run in progress is written as a partial row."""


def _raise_stopped(signum: int, frame: object) -> None:
    raise _StopError(signal.Signals(signum).name)


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def _cpu() -> str:
    """This machine's CPU as each row records it: the model, torch's vector capability, and whether
    bfloat16 matmuls are native (:func:`rl.precision.native_bfloat16_matmul`). Wall-clocks compare
    only between rows of one CPU, and our bfloat16 sides are fast only where that says native."""
    import torch
    from machine import cpu_model

    bf16 = "native" if _native_bfloat16() else "not native"
    return f"{cpu_model()}, {torch.backends.cpu.get_cpu_capability()}, bfloat16 matmuls {bf16}"


def _native_bfloat16() -> bool:
    from rl.precision import native_bfloat16_matmul

    return native_bfloat16_matmul()


def main_mujoco(args: argparse.Namespace) -> None:
    algos = [a.strip() for a in args.algos.split(",") if a.strip()]
    for a in algos:
        if a not in MUJOCO_HPARAMS:
            raise SystemExit(f"unknown algo {a!r} (choose from {sorted(MUJOCO_HPARAMS)})")
    sides = [x.strip() for x in args.sides.split(",") if x.strip()]
    for x in sides:
        if x not in SIDES:
            raise SystemExit(f"unknown side {x!r} (choose from {', '.join(SIDES)})")
    steps = 1500 if args.quick else args.steps
    eval_episodes = args.eval_episodes if args.eval_episodes is not None else 1 if args.quick else EVAL_EPISODES
    learning_starts = 1000 if args.quick else args.learning_starts
    seeds = list(range(args.first_seed, args.first_seed + (1 if args.quick else (args.seeds or 1))))
    have_sb3 = _sb3_available()
    cpu = _cpu()
    if not _native_bfloat16() and any(OURS_SIDES.get(x, (None, False))[0] for x in sides):
        print(f"note: {cpu}: the bfloat16 sides will run many times slower than float32", file=sys.stderr)
    env = {**os.environ, "RL_TORCH_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    out = open(args.out, "a") if args.out else None

    def spawn(spec: dict) -> dict | None:
        """Runs ``spec`` in a child, reporting its progress on stderr, and writes its row. If this
        process is stopped meanwhile (SIGTERM, SIGINT), the child is stopped too, the last progress
        it reported is written as a ``"partial": true`` row, and the stop goes on up."""
        load0 = _load()
        label = f"{spec['runner']} {spec['env']} seed {spec.get('seed', '-')}"
        final, last, stop = None, None, None
        with tempfile.TemporaryFile("w+") as err:
            proc = subprocess.Popen(
                [sys.executable, os.path.abspath(__file__), "--child-json", json.dumps(spec)],
                stdout=subprocess.PIPE,
                stderr=err,
                text=True,
                env=env,
            )
            try:
                assert proc.stdout is not None
                for line in proc.stdout:
                    if not line.startswith("{"):
                        continue
                    got = json.loads(line)
                    if got.pop("progress", False):
                        last = got
                        print(
                            f"{label}: {got['env_steps']} env steps, {got['wall_s']:.0f} s, "
                            f"mean return {got['final_mean_return']}",
                            file=sys.stderr,
                            flush=True,
                        )
                    else:
                        final = got
                proc.wait()
            except (_StopError, KeyboardInterrupt) as e:
                stop = e
                proc.terminate()
                try:
                    proc.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
            err.seek(0)
            stderr = err.read()
        if final is not None and (stop is not None or proc.returncode == 0):
            row: dict = final  # whole, though the stop came as it ended
        elif stop is not None:
            if last is None:
                raise stop  # stopped before its first point: nothing to write
            row = {**spec, **last, "partial": True}
        else:
            row = {**spec, "error": stderr[-2000:]}
        row["loadavg_start"], row["loadavg_end"] = load0, _load()
        row["utc_end"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        row["cpu"] = cpu
        text = json.dumps(row)
        print(text, flush=True)
        if out is not None:
            out.write(text + "\n")
            out.flush()
        if stop is not None:
            raise stop
        return None if "error" in row else row

    micros: dict[str, dict] = {}
    for algo in [] if args.no_micro else [a for a in algos if a in OFF_POLICY]:
        rounds, per_round = (2, 10) if args.quick else (10, 50)
        ours = [x for x in sides if x in OURS_SIDES] or ["ours"]
        spec = {"runner": "micro", "algo": algo, "env": args.env, "rounds": rounds, "per_round": per_round}
        micro = spawn({**spec, "ours": ours})
        if micro is not None:
            micros[algo] = micro
    results: dict[str, list[dict]] = {}
    for seed in seeds:
        for algo in algos:
            for side in sides:
                if side == "sb3" and not have_sb3:
                    continue
                if algo == "ppo" and OURS_SIDES.get(side, (None, False)) != (None, False):
                    continue  # bfloat16 and compile are options of the off-policy updates
                runner = f"{side}_{algo}"
                spec = {
                    "runner": runner,
                    "env": args.env,
                    "seed": seed,
                    "steps": steps,
                    "learning_starts": learning_starts,
                    "quick": args.quick,
                }
                if algo in OFF_POLICY and eval_episodes:
                    spec["eval_episodes"] = eval_episodes
                if not args.quick and args.curve_every != CURVE_EVERY:
                    spec["curve_every"] = args.curve_every
                row = spawn(spec)
                if row is not None:
                    results.setdefault(runner, []).append(row)
    if out is not None:
        out.close()

    print()
    for algo, micro in micros.items():
        times = ", ".join(f"{k} {micro[f'{k}_median_ms']}" for k in OURS_SIDES if f"{k}_median_ms" in micro)
        print(f"one {algo.upper()} gradient step (batch 256), median ms: {times}", end="")
        if "sb3_median_ms" in micro:
            ratios = ", ".join(f"{k[: -len('_over_sb3')]}/SB3 {v}" for k, v in micro.items() if k.endswith("_over_sb3"))
            print(f", SB3 {micro['sb3_median_ms']} ({ratios})", end="")
        print()
    reached = f"reached_{TARGET:.0f}"
    print(f"{args.env}, seeds {seeds}, mean of the last {MUJOCO_WINDOW} training episodes")
    print(
        f"{'runner':<13} {'seed':>4} {'steps':>7} {'wall s':>8} {'steps/s':>8} {'checkpoints (return @ wall s)':<40} {reached}"
    )
    for runner, rows in results.items():
        for r in rows:
            cps = ", ".join(
                f"{k}: {v['mean_return']}{f' (eval {e})' if (e := v.get('eval_return')) is not None else ''} @ {v['wall_s']}"
                for k, v in r["checkpoints"].items()
            )
            hit = r[reached]
            hit_s = "-" if hit is None else f"{hit['env_steps']} steps, {hit['wall_s']} s"
            print(
                f"{runner:<13} {r['seed']:>4} {r['env_steps']:>7} {r['wall_s']:>8} {r['env_steps_per_s']:>8} {cps:<40} {hit_s}"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--suite", choices=("cartpole", "mujoco"), default="cartpole")
    parser.add_argument("--seeds", type=int, default=None, help="number of seeds (cartpole: 5, mujoco: 1)")
    parser.add_argument("--first-seed", type=int, default=0, help="mujoco: seeds first-seed .. first-seed+N-1")
    parser.add_argument("--quick", action="store_true", help="smoke test: 1 seed, a few thousand steps")
    parser.add_argument("--env", default="HalfCheetah-v5", help="mujoco: gymnasium id")
    parser.add_argument("--algos", default="sac", help="mujoco: comma-separated, of sac,td3,td3-256,td3-256-zoo,ppo")
    parser.add_argument("--steps", type=int, default=100_000, help="mujoco: env steps per run")
    parser.add_argument("--learning-starts", type=int, default=10_000, help="mujoco: uniform-action steps")
    parser.add_argument(
        "--sides",
        default="ours,sb3",
        help="mujoco: comma-separated, of " + ",".join(SIDES) + " (see the module's docstring)",
    )
    parser.add_argument("--no-micro", action="store_true", help="mujoco: skip the gradient-step micro-benchmark")
    parser.add_argument(
        "--eval-episodes",
        type=int,
        default=None,
        help=f"mujoco: SAC/TD3 mean-action episodes evaluated at each checkpoint ({EVAL_EPISODES}; --quick: 1; 0: none)",
    )
    parser.add_argument(
        "--curve-every",
        type=int,
        default=CURVE_EVERY,
        help=f"mujoco: env steps between two points of the learning curve and progress reports ({CURVE_EVERY})",
    )
    parser.add_argument("--out", help="mujoco: append the JSON lines to this file too")
    parser.add_argument("--child", nargs=3, metavar=("RUNNER", "SEED", "CAP"), help=argparse.SUPPRESS)
    parser.add_argument("--child-json", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        _child(args.child[0], int(args.child[1]), int(args.child[2]))
    elif args.child_json:
        _mujoco_child(json.loads(args.child_json))
    elif args.suite == "mujoco":
        if args.curve_every < 1:
            parser.error(f"--curve-every {args.curve_every}: must be at least 1")
        signal.signal(signal.SIGTERM, _raise_stopped)
        try:
            main_mujoco(args)
        except (_StopError, KeyboardInterrupt) as e:
            print(
                f"stopped ({e or 'SIGINT'}): the run in progress, if it had reported, written as a partial row",
                file=sys.stderr,
            )
            raise SystemExit(128 + (signal.SIGTERM if isinstance(e, _StopError) else signal.SIGINT)) from None
    else:
        if args.seeds is None:
            args.seeds = 5
        main_cartpole(args)


if __name__ == "__main__":
    main()
