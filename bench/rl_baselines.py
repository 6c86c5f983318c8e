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
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import statistics
import subprocess
import sys
import time
from collections import deque
from collections.abc import Callable

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
    model.learn(total_timesteps=cap, callback=callback)
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, default=5, help="number of seeds (0..N-1)")
    parser.add_argument("--quick", action="store_true", help="smoke test: 1 seed, caps of 2000 steps")
    parser.add_argument("--child", nargs=3, metavar=("RUNNER", "SEED", "CAP"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        _child(args.child[0], int(args.child[1]), int(args.child[2]))
        return

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


if __name__ == "__main__":
    main()
