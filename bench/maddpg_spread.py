"""Does MADDPG learn ``simple_spread``? rl.MADDPG with PARL's settings (the update PARL's face
runs: the actor's step first), on ``MAenv("simple_spread")`` (actorrt.compat.parl's, on mpe2),
against a random policy, over a fixed budget of episodes.

    nice -n 19 python bench/maddpg_spread.py                  # 8,000 episodes (a few minutes on one core)
    python bench/maddpg_spread.py --episodes 200 --quick      # smoke test

PARL's benchmark/torch/maddpg settings: 3 agents, 25 steps an episode, 64x64 ReLU MLPs, Adam
0.01 for actor and critic, gamma 0.95, tau 0.01, a replay of 1e5 transitions, batch 1024, one
update of every agent each 100 env steps once the replay holds more than 25,600; the episode
reward is the sum over agents (each gets the shared reward). Prints one JSON line per
checkpoint (the mean training reward of the last ``--window`` episodes) and a last line with
the random policy's mean and whether training beat it clearly (by ``--margin`` of its size).
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
import torch

import rl
from actorrt.compat.parl.env.multiagent_env import MAenv
from rl.algorithms.maddpg import learn_together

BATCH, MEMORY, LEARN_EVERY, STEPS = 1024, 100_000, 100, 25


def random_policy_reward(episodes: int, seed: int) -> float:
    env = MAenv("simple_spread")
    rng = np.random.default_rng(seed)
    totals = []
    for e in range(episodes):
        env.reset(seed=seed + e)
        total = 0.0
        for _ in range(STEPS):
            _, rewards, _, _ = env.step([np.eye(d)[rng.integers(d)] for d in env.act_shape_n])
            total += sum(rewards)
        totals.append(total)
    return float(np.mean(totals))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--episodes", type=int, default=8000)
    parser.add_argument("--window", type=int, default=500, help="episodes in each mean")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--margin", type=float, default=0.2, help="beat random by this fraction of |random|")
    parser.add_argument("--quick", action="store_true", help="a smoke test: start learning at once")
    args = parser.parse_args()
    rl.use_torch_threads()
    torch.manual_seed(args.seed)
    env = MAenv("simple_spread")
    n, obs_dims, act_dims = env.n, env.obs_shape_n, env.act_shape_n
    critic_in = sum(obs_dims) + sum(act_dims)
    agents = [
        rl.MADDPG(rl.MADDPGActor(o, a), rl.CentralisedCritic(critic_in), i, actor_first=True)
        for i, (o, a) in enumerate(zip(obs_dims, act_dims, strict=True))
    ]
    warmup = BATCH if args.quick else BATCH * STEPS
    obs_buf = [np.zeros((MEMORY, d), np.float32) for d in obs_dims]
    next_buf = [np.zeros((MEMORY, d), np.float32) for d in obs_dims]
    act_buf = [np.zeros((MEMORY, d), np.float32) for d in act_dims]
    rew_buf, done_buf = np.zeros((MEMORY, n), np.float32), np.zeros((MEMORY, n), bool)
    size = pos = steps = updates = 0
    rewards: list[float] = []
    rng = np.random.default_rng(args.seed)
    start = time.perf_counter()
    for episode in range(1, args.episodes + 1):
        obs_n = env.reset(seed=args.seed * 1_000_003 + episode)
        total = 0.0
        for _ in range(STEPS):
            with torch.no_grad():
                act_n = [
                    a.sample(torch.as_tensor(o)[None]).action[0].numpy() for a, o in zip(agents, obs_n, strict=True)
                ]
            next_n, rew_n, done_n, _ = env.step(act_n)
            for i in range(n):
                obs_buf[i][pos], act_buf[i][pos], next_buf[i][pos] = obs_n[i], act_n[i], next_n[i]
            rew_buf[pos], done_buf[pos] = rew_n, done_n
            pos, size, steps = (pos + 1) % MEMORY, min(size + 1, MEMORY), steps + 1
            obs_n, total = next_n, total + sum(rew_n)
            if steps % LEARN_EVERY == 0 and size > warmup:
                idx = rng.integers(size, size=BATCH)
                learn_together(
                    agents,
                    [torch.as_tensor(b[idx]) for b in obs_buf],
                    [torch.as_tensor(b[idx]) for b in act_buf],
                    [torch.as_tensor(rew_buf[idx, i]) for i in range(n)],
                    [torch.as_tensor(b[idx]) for b in next_buf],
                    [torch.as_tensor(done_buf[idx, i]) for i in range(n)],
                )
                updates += 1
            if all(done_n):
                break
        rewards.append(total)
        if episode % args.window == 0 or episode == args.episodes:
            row = {
                "bench": "maddpg_simple_spread",
                "episodes": episode,
                "updates": updates,
                "mean_reward": float(np.mean(rewards[-args.window :])),
                "seconds": round(time.perf_counter() - start, 1),
            }
            print(json.dumps(row), flush=True)
    random_mean = random_policy_reward(args.window, args.seed + 10_000)
    first, last = float(np.mean(rewards[: args.window])), float(np.mean(rewards[-args.window :]))
    summary = {
        "bench": "maddpg_simple_spread_summary",
        "episodes": args.episodes,
        "seed": args.seed,
        "random_mean_reward": random_mean,
        "first_window_mean_reward": first,
        "last_window_mean_reward": last,
        "learned": last > random_mean + args.margin * abs(random_mean),
        "seconds": round(time.perf_counter() - start, 1),
    }
    print(json.dumps(summary), flush=True)


if __name__ == "__main__":
    main()
