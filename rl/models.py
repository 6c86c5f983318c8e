"""Small MLP networks: an actor-critic with a categorical or Gaussian head, and a Q-network."""

from __future__ import annotations

from typing import Sequence

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from rl import distributions as D
from rl.model import Model

__all__ = ["mlp", "ActorCritic", "QNetwork"]


def mlp(
    in_dim: int,
    hidden: Sequence[int],
    out_dim: int,
    activation: type[nn.Module] = nn.Tanh,
    out_gain: float = 1.0,
) -> nn.Sequential:
    """``Linear -> activation`` for each hidden size, then a linear output layer.

    Orthogonal initialisation (gain sqrt(2) in hidden layers, ``out_gain`` at the output) as in
    the PPO implementations that work (Engstrom et al. 2020, "Implementation Matters").
    """
    layers: list[nn.Module] = []
    last = in_dim
    for h in hidden:
        lin = nn.Linear(last, h)
        nn.init.orthogonal_(lin.weight, gain=float(np.sqrt(2)))
        nn.init.zeros_(lin.bias)
        layers += [lin, activation()]
        last = h
    out = nn.Linear(last, out_dim)
    nn.init.orthogonal_(out.weight, gain=out_gain)
    nn.init.zeros_(out.bias)
    layers.append(out)
    return nn.Sequential(*layers)


def _flat_dim(space: gym.Space) -> int:
    assert space.shape is not None
    return int(np.prod(space.shape))


class ActorCritic(Model):
    """Separate policy and value MLPs over flat observations.

    Discrete action spaces get a categorical head (logits); ``Box`` action spaces get a diagonal
    Gaussian whose ``log_std`` is a state-independent parameter. Used by PolicyGradient, A2C, PPO
    and IMPALA.
    """

    def __init__(
        self,
        observation_space: gym.Space,
        action_space: gym.Space,
        hidden: Sequence[int] = (64, 64),
        activation: type[nn.Module] = nn.Tanh,
        log_std_init: float = 0.0,
    ) -> None:
        super().__init__()
        obs_dim = _flat_dim(observation_space)
        self.continuous = isinstance(action_space, gym.spaces.Box)
        if self.continuous:
            act_dim = _flat_dim(action_space)
            self.log_std = nn.Parameter(torch.full((act_dim,), float(log_std_init)))
        elif isinstance(action_space, gym.spaces.Discrete):
            act_dim = int(action_space.n)
        else:
            raise TypeError(f"ActorCritic: unsupported action space {action_space}")
        self.policy_net = mlp(obs_dim, hidden, act_dim, activation, out_gain=0.01)
        self.value_net = mlp(obs_dim, hidden, 1, activation, out_gain=1.0)

    def act(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Sample actions; return ``(action, log_prob, value)`` for a batch ``[B, obs_dim]``."""
        out = self.policy_net(obs)
        if self.continuous:
            action, log_prob = D.gaussian_sample(out, self.log_std)
        else:
            action, log_prob = D.categorical_sample(out)
        return action, log_prob, self.value_net(obs).squeeze(-1)

    def greedy(self, obs: torch.Tensor) -> torch.Tensor:
        """Most likely action (argmax, or the Gaussian mean)."""
        out = self.policy_net(obs)
        return out if self.continuous else out.argmax(-1)

    def value(self, obs: torch.Tensor) -> torch.Tensor:
        """``V(obs)``, shape ``[...]`` (observation dims removed)."""
        return self.value_net(obs).squeeze(-1)

    def evaluate(
        self, obs: torch.Tensor, action: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(log pi(action|obs), entropy, V(obs))`` with gradients, for any leading dims."""
        out = self.policy_net(obs)
        if self.continuous:
            log_prob = D.gaussian_log_prob(out, self.log_std, action)
            entropy = D.gaussian_entropy(self.log_std).expand(log_prob.shape)
        else:
            log_prob = D.categorical_log_prob(out, action)
            entropy = D.categorical_entropy(out)
        return log_prob, entropy, self.value_net(obs).squeeze(-1)


class QNetwork(Model):
    """``Q(s, .)`` for a discrete action space: an MLP from flat observations to one value per action."""

    def __init__(
        self,
        observation_space: gym.Space,
        action_space: gym.Space,
        hidden: Sequence[int] = (256, 256),
        activation: type[nn.Module] = nn.ReLU,
    ) -> None:
        super().__init__()
        if not isinstance(action_space, gym.spaces.Discrete):
            raise TypeError(f"QNetwork needs a Discrete action space, got {action_space}")
        self.num_actions = int(action_space.n)
        self.q_net = mlp(_flat_dim(observation_space), hidden, self.num_actions, activation)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        """Q-values ``[B, num_actions]``."""
        return self.q_net(obs)
