"""PARL's ``PPO(model, clip_param, ...)``: one minibatch step of :meth:`rl.PPO.update` per
``learn`` (the script runs the epochs), with PARL's settings: the value loss clipped with
``clip_param`` (``use_clipped_value_loss``) and halved (``0.5 * mean(...)``, then
``value_loss_coef``: rl.PPO gets ``vf_coef = value_loss_coef / 2``), advantages normalised per
minibatch (``norm_adv``)."""

from __future__ import annotations

from typing import cast

import torch

import rl
from actorrt.compat.parl.algorithms._views import ActorCriticView, method, number, require_methods
from actorrt.compat.parl.core.torch.algorithm import Algorithm
from actorrt.compat.parl.core.torch.model import Model
from rl import distributions

__all__ = ["PPO"]


class PPO(Algorithm):
    """``model.value(obs)``; ``model.policy(obs)``: logits, or ``(mean, std)`` with ``continuous_action``."""

    def __init__(
        self,
        model: Model,
        clip_param: float = 0.1,
        value_loss_coef: float = 0.5,
        entropy_coef: float = 0.01,
        initial_lr: float = 2.5e-4,
        eps: float = 1e-5,
        max_grad_norm: float = 0.5,
        use_clipped_value_loss: bool = True,
        norm_adv: bool = True,
        continuous_action: bool = False,
    ) -> None:
        require_methods(model, "PPO", "value", "policy")
        self.model = model
        self.clip_param = number("PPO", "clip_param", clip_param)
        self.value_loss_coef = number("PPO", "value_loss_coef", value_loss_coef)
        self.entropy_coef = number("PPO", "entropy_coef", entropy_coef)
        self.max_grad_norm = number("PPO", "max_grad_norm", max_grad_norm)
        self.use_clipped_value_loss = bool(use_clipped_value_loss)
        self.norm_adv = bool(norm_adv)
        self.continuous_action = bool(continuous_action)
        self.rl_algorithm = rl.PPO(
            ActorCriticView(model, "gaussian" if self.continuous_action else "logits"),
            lr=number("PPO", "initial_lr", initial_lr),
            clip_range=self.clip_param,
            num_epochs=1,
            num_minibatches=1,
            vf_coef=self.value_loss_coef / 2,
            ent_coef=self.entropy_coef,
            max_grad_norm=self.max_grad_norm,
            normalize_advantages=self.norm_adv,
            clip_range_vf=self.clip_param if self.use_clipped_value_loss else None,
            optimizer_eps=number("PPO", "eps", eps),
        )
        self.optimizer = self.rl_algorithm.optimizer

    def learn(
        self,
        batch_obs: torch.Tensor,
        batch_action: torch.Tensor,
        batch_value: torch.Tensor,
        batch_return: torch.Tensor,
        batch_logprob: torch.Tensor,
        batch_adv: torch.Tensor,
        lr: float | None = None,
    ) -> tuple[float, float, float]:
        """One step on a minibatch (values, returns, log-probabilities and advantages ``[B]``);
        returns ``(value_loss, action_loss, entropy_loss)``."""
        if lr:
            for group in self.optimizer.param_groups:
                group["lr"] = lr
        stats = self.rl_algorithm.update(
            batch_obs, batch_action, batch_logprob, batch_adv, batch_return, batch_value.reshape(-1)
        )
        return stats["value_loss"] / 2, stats["policy_loss"], stats["entropy"]

    def sample(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(value, action, log-probability, entropy)`` of an action drawn from the policy."""
        value = method(self.model, "value")(obs)
        if self.continuous_action:
            mean, std = method(self.model, "policy")(obs)
            log_std = std.log()
            action = distributions.gaussian_sample(mean, log_std)[0].detach()  # a draw: no gradient, as PARL's
            return (
                value,
                action,
                distributions.gaussian_log_prob(mean, log_std, action),
                distributions.gaussian_entropy(log_std),
            )
        logits = method(self.model, "policy")(obs)
        action, log_prob = distributions.categorical_sample(logits)
        return value, action, log_prob, distributions.categorical_entropy(logits)

    def predict(self, obs: torch.Tensor) -> torch.Tensor:
        """The mean action, or the most probable one ``[B, 1]``."""
        if self.continuous_action:
            mean, _ = method(self.model, "policy")(obs)
            return cast(torch.Tensor, mean)
        return cast(torch.Tensor, method(self.model, "policy")(obs).argmax(dim=-1, keepdim=True))

    def value(self, obs: torch.Tensor) -> torch.Tensor:
        """``model.value(obs)``."""
        return cast(torch.Tensor, method(self.model, "value")(obs))
