"""REINFORCE on CartPole written against PARL's torch API, as a PARL user writes a training
script (for actorrt's tests; run it with ``python -m actorrt.compat.parl train.py``)."""

import argparse

import gym
import numpy as np
import parl
from parl.env import CompatWrapper
from parl.utils import logger
from policy import PolicyAgent, PolicyNet


def discounted(rewards, gamma=0.99):
    out, running = np.zeros(len(rewards), dtype=np.float32), 0.0
    for t in reversed(range(len(rewards))):
        running = rewards[t] + gamma * running
        out[t] = running
    return out


def episode(env, agent, greedy):
    obs, done, trace = env.reset(), False, ([], [], [])
    while not done:
        act = agent.predict(obs) if greedy else agent.sample(obs)
        trace[0].append(obs)
        trace[1].append(act)
        obs, reward, done, _ = env.step(act)
        trace[2].append(reward)
    return trace


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--episodes", type=int, default=100)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    env = CompatWrapper(gym.make("CartPole-v1"))
    env.seed(args.seed)
    np.random.seed(args.seed)
    model = PolicyNet(env.observation_space.shape[0], env.action_space.n)
    agent = PolicyAgent(parl.algorithms.PolicyGradient(model, lr=1e-3))
    for i in range(1, args.episodes + 1):
        obs, act, rewards = episode(env, agent, greedy=False)
        agent.learn(np.array(obs), np.array(act), discounted(rewards))
        if i % 50 == 0:
            logger.info(f"episode {i}, train reward {sum(rewards):.1f}")
    test = np.mean([sum(episode(env, agent, greedy=True)[2]) for _ in range(3)])
    logger.info(f"test reward: {test:.1f}")


if __name__ == "__main__":
    main()
