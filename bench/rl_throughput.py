"""Distributed training throughput: our IMPALA and A2C (remote collectors on the embedded
cluster) beside Stable-Baselines3's A2C and PPO, in the same run.

Every run is a fresh subprocess with one torch thread; runs alternate seed by seed (ours, SB3,
ours, SB3, ...) so slow drifts of the machine hit both sides alike.

    python bench/rl_throughput.py                 # 5 seeds + the collectors curve; JSON lines, then tables
    python bench/rl_throughput.py --seeds 3 --no-curve
    python bench/rl_throughput.py --quick         # smoke test: 1 seed, tiny budgets

Measured per run: env steps and wall-clock seconds of training until the mean return of the
last 20 training episodes reaches 475 (CartPole-v1), and frames per second while training.
The curve: IMPALA frames/s with 1, 2 and 4 collectors over a fixed step budget (never stopping
early). With ale-py installed (`pip install .[atari]`), also Pong: IMPALA frames/s beside one
raw ALE environment stepping random actions.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
ENV = {**os.environ, "RL_TORCH_THREADS": "1", "OMP_NUM_THREADS": "1"}


def run_example(name: str, *args: str, timeout: float = 900) -> tuple[int, dict | None, str]:
    """``examples/<name>.py ARGS`` in a fresh interpreter with one torch thread, no progress bar or
    TensorBoard, outputs in a temporary run dir: ``(exit status, final JSON line or None, stderr)``.
    Raises ``subprocess.TimeoutExpired`` (the process killed) past ``timeout`` seconds."""
    with tempfile.TemporaryDirectory() as run_dir:
        proc = subprocess.run(
            [
                sys.executable,
                os.path.join(ROOT, "examples", f"{name}.py"),
                "--no-progress",
                "--no-tensorboard",
                "--run-dir",
                run_dir,
                *args,
            ],
            capture_output=True,
            text=True,
            env=ENV,
            timeout=timeout,
            check=False,
        )
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    return proc.returncode, json.loads(lines[-1]) if lines else None, proc.stderr


def _example(name: str, *args: str, timeout: float = 900) -> dict:
    _, final, stderr = run_example(name, *args, timeout=timeout)
    return final if final is not None else {"error": stderr[-1500:]}


def _sb3(algo: str, seed: int, cap: int) -> dict:
    proc = subprocess.run(
        [sys.executable, os.path.join(HERE, "rl_baselines.py"), "--child", f"sb3_{algo}", str(seed), str(cap)],
        capture_output=True,
        text=True,
        env=ENV,
        check=False,
    )
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if not lines:
        return {"error": proc.stderr[-1500:]}
    out = json.loads(lines[-1])
    out["frames_per_s"] = out["env_steps"] / max(out["wall_s"], 1e-9)
    return out


def _have(module: str) -> bool:
    try:
        __import__(module)
    except ImportError:
        return False
    return True


def _emit(row: dict) -> dict:
    print(json.dumps(row), flush=True)
    return row


def _med(rows: list[dict], key: str) -> float | None:
    vals = [r[key] for r in rows if key in r]
    return statistics.median(vals) if vals else None


def pong_raw_fps(steps: int) -> float:
    import ale_py
    import gymnasium as gym

    gym.register_envs(ale_py)
    env = gym.make("ALE/Pong-v5", frameskip=4, repeat_action_probability=0.0)
    env.reset(seed=0)
    t0 = time.perf_counter()
    for _ in range(steps):
        _, _, term, trunc, _ = env.step(env.action_space.sample())
        if term or trunc:
            env.reset()
    env.close()
    return steps * 4 / (time.perf_counter() - t0)  # frames: each step is 4 emulator frames


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="smoke test: 1 seed, tiny budgets")
    parser.add_argument("--no-curve", action="store_true", help="skip the 1/2/4-collector curve")
    parser.add_argument("--no-pong", action="store_true", help="skip Pong even when ale-py is installed")
    args = parser.parse_args()
    seeds = 1 if args.quick else args.seeds
    have_sb3 = _have("stable_baselines3")
    caps = {"impala": 3000 if args.quick else 2_000_000, "a2c": 3000 if args.quick else 1_000_000}
    sb3_caps = {"ppo": 2000 if args.quick else 200_000, "a2c": 2000 if args.quick else 500_000}
    rows: dict[str, list[dict]] = {k: [] for k in ("ours_impala", "ours_a2c", "sb3_ppo", "sb3_a2c")}
    for seed in range(seeds):
        r = _example("impala_cartpole", "--seed", str(seed), "--total-steps", str(caps["impala"]))
        rows["ours_impala"].append(_emit({"runner": "ours_impala", "seed": seed, **r}))
        if have_sb3:
            rows["sb3_ppo"].append(_emit({"runner": "sb3_ppo", "seed": seed, **_sb3("ppo", seed, sb3_caps["ppo"])}))
        r = _example("a2c_cartpole", "--seed", str(seed), "--total-steps", str(caps["a2c"]))
        rows["ours_a2c"].append(_emit({"runner": "ours_a2c", "seed": seed, **r}))
        if have_sb3:
            rows["sb3_a2c"].append(_emit({"runner": "sb3_a2c", "seed": seed, **_sb3("a2c", seed, sb3_caps["a2c"])}))

    curve: list[dict] = []
    if not args.no_curve:
        budget = "3000" if args.quick else "150000"
        for n in (1, 2, 4):
            r = _example(
                "impala_cartpole", "--num-collectors", str(n), "--total-steps", budget, "--solved-return", "1e9"
            )
            curve.append(_emit({"runner": "impala_curve", "collectors": n, **r}))

    pong: dict[str, float | str] = {}
    if not args.no_pong:
        if _have("ale_py") and _have("cv2"):
            pong["raw_ale_frames_per_s"] = pong_raw_fps(500 if args.quick else 5000)
            r = _example("impala_atari", "--total-steps", "2000" if args.quick else "40000")
            pong["impala_frames_per_s"] = (
                r.get("frames_per_s", float("nan")) * 4 if "frames_per_s" in r else r.get("error", "?")
            )
            _emit({"runner": "pong", **pong})
        else:
            pong["note"] = "ale-py / opencv not installed (pip install .[atari])"

    print(
        f"\nCartPole-v1, {seeds} seed(s): training time to a mean return of 475 over the last 20 episodes",
        file=sys.stderr,
    )
    print(
        f"{'runner':<12} {'solved':>7} {'median steps':>13} {'median wall s':>14} {'median frames/s':>16}",
        file=sys.stderr,
    )
    for name, rs in rows.items():
        if name.startswith("sb3") and not have_sb3:
            print(f"{name:<12} stable-baselines3 not installed (pip install .[bench])", file=sys.stderr)
            continue
        ok = [r for r in rs if "error" not in r]
        solved = f"{sum(bool(r.get('solved')) for r in ok)}/{len(rs)}"

        def fmt(v: Any, f: str) -> str:
            return "-" if v is None else format(v, f)

        print(
            f"{name:<12} {solved:>7} {fmt(_med(ok, 'env_steps'), '>13.0f')} {fmt(_med(ok, 'wall_s'), '>14.2f')} "
            f"{fmt(_med(ok, 'frames_per_s'), '>16,.0f')}",
            file=sys.stderr,
        )
    if have_sb3:

        def ratio(a: str, b: str, key: str) -> str:
            x, y = _med(rows[a], key), _med(rows[b], key)
            return "-" if not x or not y else f"{x / y:.2f}"

        print(
            f"IMPALA wall / SB3 PPO wall: {ratio('ours_impala', 'sb3_ppo', 'wall_s')}   "
            f"IMPALA frames/s / SB3 A2C frames/s: {ratio('ours_impala', 'sb3_a2c', 'frames_per_s')}   "
            f"our A2C wall / SB3 A2C wall: {ratio('ours_a2c', 'sb3_a2c', 'wall_s')}",
            file=sys.stderr,
        )
    if curve:
        print(
            "IMPALA frames/s by collectors: "
            + ", ".join(f"{c['collectors']}: {c.get('frames_per_s', float('nan')):,.0f}" for c in curve),
            file=sys.stderr,
        )
    if pong:
        print(f"Pong: {pong}", file=sys.stderr)


if __name__ == "__main__":
    main()
