"""PARL's ``DQN(model, gamma, lr)`` and its update, as :class:`rl.DQN` (``double_q=False``, the
squared error, no clipping); the target network follows only when the agent calls ``sync_target``."""

from __future__ import annotations

from typing import cast

import torch
from torch import Tensor

import rl
from actorrt.compat.parl.algorithms._views import number, require_methods
from actorrt.compat.parl.core.torch.algorithm import Algorithm
from actorrt.compat.parl.core.torch.model import Model
from rl.storage import Transition

__all__ = ["DQN"]


class DQN(Algorithm):
    """``model(obs)`` gives the Q-values ``[B, num_actions]``."""

    double_q = False

    def __init__(self, model: Model, gamma: float | None = None, lr: float | None = None) -> None:
        name = type(self).__name__
        require_methods(model, name, "forward")
        self.model = model
        self.gamma = number(name, "gamma", gamma)
        self.lr = number(name, "lr", lr)
        self.rl_algorithm = rl.DQN(
            cast(rl.QNetwork, model),  # rl.DQN calls model(obs) only
            lr=self.lr,
            gamma=self.gamma,
            target_update_interval=None,
            double_q=self.double_q,
            max_grad_norm=None,
        )
        self.target_model = cast(Model, self.rl_algorithm.target_model)
        self.optimizer = self.rl_algorithm.optimizer

    def predict(self, obs: torch.Tensor) -> torch.Tensor:
        """The Q-values ``model(obs)``."""
        return cast(torch.Tensor, self.model(obs))

    def learn(self, obs: Tensor, action: Tensor, reward: Tensor, next_obs: Tensor, terminal: Tensor) -> float:
        """One step on ``mean (Q(s, a) - y)^2`` (``action``, ``reward``, ``terminal``: ``[B, 1]``); returns that loss."""
        batch = Transition(obs, action.reshape(-1), reward.reshape(-1), next_obs, terminal.reshape(-1).bool())
        return self.rl_algorithm.learn(batch)["td_loss"]

    def sync_target(self) -> None:
        """Copy the model's parameters into the target model."""
        self.model.sync_weights_to(self.target_model)
