"""Small models written the way PARL's torch scripts write theirs (one ``parl.Model`` with the
methods each algorithm calls), for the contract tests of ``actorrt.compat.parl``'s torch API."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import torch
from torch import nn
from torch.nn import functional

from actorrt.compat.parl.core.torch import Model

OBS, ACT = 4, 3


class QValues(Model):
    """DQN's: ``model(obs)`` is the Q-values."""

    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(OBS, 16)
        self.fc2 = nn.Linear(16, ACT)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(functional.relu(self.fc1(x)))


class Probs(QValues):
    """PolicyGradient's: ``model(obs)`` is the action probabilities."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return functional.softmax(super().forward(x), dim=-1)


class Logits(Model):
    """A2C's and discrete PPO's: logits, a value ``[B]`` (A2C) or ``[B, 1]`` (PPO), both at once."""

    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Linear(OBS, 16)
        self.pi = nn.Linear(16, ACT)
        self.v = nn.Linear(16, 1)

    def policy(self, x: torch.Tensor) -> torch.Tensor:
        return self.pi(functional.relu(self.body(x)))

    def value(self, x: torch.Tensor) -> torch.Tensor:
        return self.v(functional.relu(self.body(x))).squeeze(1)

    def policy_and_value(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.policy(x), self.value(x)


class Gaussian(Model):
    """Continuous PPO's: ``policy(obs) = (mean, std)``, ``value(obs)`` ``[B, 1]``."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(OBS, 16)
        self.mean = nn.Linear(16, ACT)
        self.log_std = nn.Parameter(torch.zeros(1, ACT))
        self.v = nn.Linear(16, 1)

    def policy(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        mean = self.mean(torch.tanh(self.fc(x)))
        return mean, self.log_std.expand_as(mean).exp()

    def value(self, x: torch.Tensor) -> torch.Tensor:
        return self.v(torch.tanh(self.fc(x)))


class _Actor(Model):
    def __init__(self, gaussian: bool) -> None:
        super().__init__()
        self.gaussian = gaussian
        self.l1 = nn.Linear(OBS, 16)
        self.out = nn.Linear(16, 2 * ACT if gaussian else ACT)

    def forward(self, x: torch.Tensor) -> Any:
        out = self.out(functional.relu(self.l1(x)))
        if self.gaussian:
            mean, log_std = out.chunk(2, dim=-1)
            return mean, log_std.clamp(-20.0, 2.0)
        return torch.tanh(out)


class _Critic(Model):
    def __init__(self, twin: bool) -> None:
        super().__init__()
        self.twin = twin
        self.q1 = nn.Sequential(nn.Linear(OBS + ACT, 16), nn.ReLU(), nn.Linear(16, 1))
        self.q2 = nn.Sequential(nn.Linear(OBS + ACT, 16), nn.ReLU(), nn.Linear(16, 1))

    def forward(self, obs: torch.Tensor, act: torch.Tensor) -> Any:
        x = torch.cat([obs, act], 1)
        return (self.q1(x), self.q2(x)) if self.twin else self.q1(x)


class ActorCritic(Model):
    """DDPG's (``twin=False``: one Q ``[B, 1]``), TD3's (twin, with ``Q1``) and SAC's/OAC's
    (``gaussian``: ``policy`` gives ``(mean, log_std)``)."""

    def __init__(self, twin: bool = True, gaussian: bool = False) -> None:
        super().__init__()
        self.actor_model = _Actor(gaussian)
        self.critic_model = _Critic(twin)

    def policy(self, obs: torch.Tensor) -> Any:
        return self.actor_model(obs)

    def value(self, obs: torch.Tensor, act: torch.Tensor) -> Any:
        return self.critic_model(obs, act)

    def Q1(self, obs: torch.Tensor, act: torch.Tensor) -> torch.Tensor:
        return self.critic_model.q1(torch.cat([obs, act], 1))

    def get_actor_params(self) -> Iterator[nn.Parameter]:
        return self.actor_model.parameters()

    def get_critic_params(self) -> Iterator[nn.Parameter]:
        return self.critic_model.parameters()


class MultiAgent(Model):
    """MADDPG's: the agent's policy on its observation (logits, or ``(mean, log_std)``), and a
    critic ``value(obs_n, act_n) -> [B]`` over every agent's."""

    def __init__(self, obs_dim: int, act_dim: int, critic_in: int, continuous: bool = False) -> None:
        super().__init__()
        self.continuous = continuous
        self.a1 = nn.Linear(obs_dim, 16)
        self.a2 = nn.Linear(16, act_dim)
        self.a_std = nn.Linear(16, act_dim)
        self.c1 = nn.Linear(critic_in, 16)
        self.c2 = nn.Linear(16, 1)

    def policy(self, obs: torch.Tensor) -> Any:
        h = functional.relu(self.a1(obs))
        return (self.a2(h), self.a_std(h)) if self.continuous else self.a2(h)

    def value(self, obs_n: list[torch.Tensor], act_n: list[torch.Tensor]) -> torch.Tensor:
        return self.c2(functional.relu(self.c1(torch.cat(obs_n + act_n, dim=1)))).squeeze(1)

    def get_actor_params(self) -> list[nn.Parameter]:
        return [*self.a1.parameters(), *self.a2.parameters(), *self.a_std.parameters()]

    def get_critic_params(self) -> list[nn.Parameter]:
        return [*self.c1.parameters(), *self.c2.parameters()]
