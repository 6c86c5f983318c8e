"""Pieces shared by the actor-critic algorithms: acting with an :class:`ActorCriticModel`, optimizers."""

from __future__ import annotations

from collections.abc import Iterable

import torch

from rl.algorithm import Algorithm, PolicyStep
from rl.networks import ActorCriticModel

__all__ = ["ActorCriticAlgorithm", "make_optimizer", "normalized"]


def normalized(advantages: torch.Tensor) -> torch.Tensor:
    """Advantages scaled to mean 0 and std 1; one sample (whose std is NaN) is left as it is."""
    if advantages.numel() < 2:
        return advantages
    return (advantages - advantages.mean()) / (advantages.std() + 1e-8)


def make_optimizer(
    name: str, params: Iterable[torch.nn.Parameter], lr: float, eps: float = 1e-5
) -> torch.optim.Optimizer:
    """``adam`` or ``rmsprop`` (alpha .99); ``eps`` 1e-5 as in the PPO and A2C reference code.

    Adam is the fused kernel and RMSprop the ``foreach`` one: one torch call for all parameters
    instead of a Python loop of several calls per parameter.
    """
    if name == "adam":
        return torch.optim.Adam(params, lr=lr, eps=eps, fused=True)
    if name == "rmsprop":
        return torch.optim.RMSprop(params, lr=lr, alpha=0.99, eps=eps, foreach=True)
    raise ValueError(f"unknown optimizer {name!r}")


class ActorCriticAlgorithm(Algorithm):
    """Acting for algorithms whose model is an :class:`ActorCriticModel` (PG, A2C, PPO, IMPALA)."""

    model: ActorCriticModel

    def sample(self, obs: torch.Tensor) -> PolicyStep:
        """Sample from the policy; also return ``log pi(a|obs)`` and ``V(obs)``."""
        return PolicyStep(*self.model.act(obs))

    def predict(self, obs: torch.Tensor) -> torch.Tensor:
        """Greedy action."""
        return self.model.greedy(obs)

    def value(self, obs: torch.Tensor) -> torch.Tensor:
        """``V(obs)``, to bootstrap truncated episodes."""
        return self.model.value(obs)
