"""PARL's ``A2C(model, config)``: :meth:`rl.A2C.update` with PARL's settings: every loss summed
over the batch (not averaged), the entropy coefficient given with each ``learn`` (negative: PARL
adds ``entropy * entropy_coeff`` to the loss), the learning rate too, gradients clipped to norm 40,
Adam with torch's default ``eps``."""

from __future__ import annotations

from typing import Any, cast

import torch

import rl
from actorrt.compat.parl.algorithms._views import ActorCriticView, method, number, require_methods, scalar
from actorrt.compat.parl.core.torch.algorithm import Algorithm
from actorrt.compat.parl.core.torch.model import Model
from rl import distributions

__all__ = ["A2C"]


class A2C(Algorithm):
    """``model.policy(obs)``: logits; ``model.value(obs)``: ``[B]``; ``model.policy_and_value(obs)``: both.
    ``config``: ``learning_rate`` and ``vf_loss_coeff``."""

    def __init__(self, model: Model, config: dict[str, Any]) -> None:
        require_methods(model, "A2C", "value", "policy", "policy_and_value")
        for key in ("learning_rate", "vf_loss_coeff"):
            if key not in config:
                raise KeyError(f"A2C: config has no {key!r}")
        self.model = model
        self.vf_loss_coeff = number("A2C", "config['vf_loss_coeff']", config["vf_loss_coeff"])
        self.config = config
        self.rl_algorithm = rl.A2C(
            ActorCriticView(model, "logits"),
            lr=number("A2C", "config['learning_rate']", config["learning_rate"]),
            vf_coef=self.vf_loss_coeff,
            max_grad_norm=40.0,
            optimizer="adam",
            optimizer_eps=1e-8,
            loss_reduction="sum",
        )
        self.optimizer = self.rl_algorithm.optimizer

    def learn(
        self,
        obs: torch.Tensor,
        actions: torch.Tensor,
        advantages: torch.Tensor,
        target_values: torch.Tensor,
        lr: float,
        entropy_coeff: float,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """One step on ``pi_loss + vf_loss_coeff * vf_loss + entropy_coeff * entropy`` (sums over
        the batch); returns ``(total_loss, pi_loss, vf_loss, entropy)``."""
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        self.rl_algorithm.ent_coef = -entropy_coeff
        stats = self.rl_algorithm.update(obs, actions, advantages, target_values)
        pi_loss, vf_loss, entropy = stats["policy_loss"], stats["value_loss"], stats["entropy"]
        total = pi_loss + vf_loss * self.vf_loss_coeff + entropy * entropy_coeff
        return scalar(total), scalar(pi_loss), scalar(vf_loss), scalar(entropy)

    def sample(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(actions drawn from the policy, values)``."""
        logits, values = method(self.model, "policy_and_value")(obs)
        actions, _ = distributions.categorical_sample(logits)
        return actions, values

    def prob_and_value(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(action probabilities, values)``."""
        logits, values = method(self.model, "policy_and_value")(obs)
        return torch.softmax(logits, dim=1), values

    def predict(self, obs: torch.Tensor) -> torch.Tensor:
        """The most probable actions."""
        return cast(torch.Tensor, method(self.model, "policy")(obs).argmax(-1))

    def value(self, obs: torch.Tensor) -> torch.Tensor:
        """``model.value(obs)``."""
        return cast(torch.Tensor, method(self.model, "value")(obs))
