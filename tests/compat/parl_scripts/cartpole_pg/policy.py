"""A PARL-style model and agent for CartPole, written for actorrt's tests (not PARL's code): a
two-layer policy network and an agent that turns numpy in and out."""

import numpy as np
import parl
import torch
from torch import nn
from torch.nn import functional


class PolicyNet(parl.Model):
    def __init__(self, obs_dim, act_dim):
        super().__init__()
        self.hidden = nn.Linear(obs_dim, 32)
        self.out = nn.Linear(32, act_dim)

    def forward(self, obs):
        return functional.softmax(self.out(torch.tanh(self.hidden(obs))), dim=-1)


class PolicyAgent(parl.Agent):
    def sample(self, obs):
        probs = self.alg.predict(torch.tensor(obs, dtype=torch.float32)).detach().numpy()
        return int(np.random.choice(len(probs), p=probs))

    def predict(self, obs):
        probs = self.alg.predict(torch.tensor(obs, dtype=torch.float32))
        return int(probs.argmax())

    def learn(self, obs, act, ret):
        loss = self.alg.learn(
            torch.tensor(obs, dtype=torch.float32),
            torch.tensor(act, dtype=torch.int64),
            torch.tensor(ret, dtype=torch.float32),
        )
        return float(loss)
