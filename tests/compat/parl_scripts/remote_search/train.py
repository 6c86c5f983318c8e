"""Random search over a linear CartPole policy with remote evaluators, written against PARL's
remote and torch APIs as a PARL user writes a distributed script (for actorrt's tests: ``python
-m actorrt.compat.parl train.py --address HOST:PORT`` against ``actorrt start``)."""

import argparse

import gym
import numpy as np
import parl
import torch
from parl.env import CompatWrapper
from parl.utils import logger, summary
from torch import nn


class LinearPolicy(parl.Model):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(4, 2)

    def forward(self, obs):
        return self.linear(obs)


@parl.remote_class
class Evaluator:
    def __init__(self, seed):
        self.env = CompatWrapper(gym.make("CartPole-v1"))
        self.env.seed(seed)
        self.model = LinearPolicy()

    def evaluate(self, weights):
        self.model.set_weights(weights)
        obs, done, total = self.env.reset(), False, 0.0
        while not done:
            with torch.no_grad():
                act = int(self.model(torch.tensor(obs, dtype=torch.float32)).argmax())
            obs, reward, done, _ = self.env.step(act)
            total += reward
        return total


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--address", required=True)
    parser.add_argument("--evaluators", type=int, default=2)
    parser.add_argument("--steps", type=int, default=5)
    args = parser.parse_args()
    parl.connect(args.address)
    evaluators = [Evaluator(seed) for seed in range(args.evaluators)]
    model, rng = LinearPolicy(), np.random.default_rng(0)
    best = {k: v.copy() for k, v in model.get_weights().items()}
    best_score = -1.0
    for step in range(1, args.steps + 1):
        tried = [
            {k: v + 0.5 * rng.standard_normal(v.shape).astype(v.dtype) for k, v in best.items()} for _ in evaluators
        ]
        scores = [e.evaluate(w) for e, w in zip(evaluators, tried, strict=True)]
        i = int(np.argmax(scores))
        if scores[i] >= best_score:
            best, best_score = tried[i], scores[i]
        summary.add_scalar("search/best", best_score, step)
        logger.info(f"step {step}, best {best_score:.1f}")
    logger.info(f"done: best score {best_score:.1f} with {len(evaluators)} evaluators")


if __name__ == "__main__":
    main()
