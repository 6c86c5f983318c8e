"""Pieces shared by the actor-critic algorithms: acting with an :class:`ActorCritic`, optimizers."""

from __future__ import annotations

import torch

from rl.algorithm import Algorithm, PolicyStep
from rl.models import ActorCritic

__all__ = ["ActorCriticAlgorithm", "make_optimizer"]


def make_optimizer(name: str, params, lr: float) -> torch.optim.Optimizer:  # type: ignore[no-untyped-def]
    """``adam`` (eps 1e-5, as in the PPO reference code) or ``rmsprop`` (alpha .99, eps 1e-5, as A2C)."""
    if name == "adam":
        return torch.optim.Adam(params, lr=lr, eps=1e-5, fused=True)
    if name == "rmsprop":
        return torch.optim.RMSprop(params, lr=lr, alpha=0.99, eps=1e-5)
    raise ValueError(f"unknown optimizer {name!r}")


class ActorCriticAlgorithm(Algorithm):
    """Acting for algorithms whose model is an :class:`ActorCritic` (PG, A2C, PPO, IMPALA)."""

    model: ActorCritic

    def sample(self, obs: torch.Tensor) -> PolicyStep:
        """Sample from the policy; also return ``log pi(a|obs)`` and ``V(obs)``."""
        return PolicyStep(*self.model.act(obs))

    def predict(self, obs: torch.Tensor) -> torch.Tensor:
        """Greedy action."""
        return self.model.greedy(obs)

    def value(self, obs: torch.Tensor) -> torch.Tensor:
        """``V(obs)``, to bootstrap truncated episodes."""
        return self.model.value(obs)

    def _step(self, loss: torch.Tensor, max_grad_norm: float | None) -> torch.Tensor:
        """Backward, clip, optimizer step; return the gradient norm before clipping (a tensor)."""
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        norm = torch.nn.utils.clip_grad_norm_(
            self.model.parameters(), max_grad_norm if max_grad_norm else float("inf")
        )
        self.optimizer.step()
        return norm
