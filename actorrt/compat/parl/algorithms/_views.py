"""Views of a PARL model as the networks ``rl``'s algorithms call: how one implementation
(``rl``'s) gets two faces.

A PARL model is one ``nn.Module`` with methods (``policy``, ``value``, ``get_actor_params``,
...); ``rl``'s algorithms take separate networks (an actor, a critic) with their own methods
(``sample``, ``greedy``, ``evaluate``). A view is a small ``rl.Model`` that answers ``rl``'s calls
through the PARL model's methods. An actor's or a critic's view holds the parameters it trains
(``get_actor_params()``, ``get_critic_params()``) as its own, the same tensors, so that ``rl``'s
optimisers, gradient clipping and soft updates touch only them; the PARL model itself is kept
outside the module tree (copies of views copied together, a target network, share one copy).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, cast

import torch
from torch import nn

import rl
from actorrt.compat.parl.core.torch.model import Model
from rl import distributions, ops

__all__ = [
    "ActorCriticView",
    "CriticView",
    "GaussianPolicyView",
    "PolicyView",
    "method",
    "number",
    "require_methods",
    "scalar",
    "soft_update_all",
]

_DOCS = "see docs/parl.md"


def require_methods(model: object, algorithm: str, *methods: str) -> None:
    """The model is a ``parl.Model`` with every method ``algorithm`` calls; else a ``TypeError`` naming what is missing."""
    if not isinstance(model, Model):
        raise TypeError(f"{algorithm} needs a parl.Model, got {type(model).__name__}")
    missing = [m for m in methods if not callable(getattr(model, m, None))]
    if missing:
        raise TypeError(
            f"{algorithm}: the model {type(model).__name__} has no method {', '.join(missing)} "
            f"(PARL's {algorithm} calls {', '.join(methods)}; {_DOCS})"
        )


def method(model: object, name: str) -> Callable[..., Any]:
    """``model.<name>``: a method of the user's model that ``parl.Model`` does not declare."""
    return cast(Callable[..., Any], getattr(model, name))


def number(algorithm: str, name: str, value: object) -> float:
    """A float setting (an int is taken too), or a ``TypeError`` naming it."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{algorithm}: {name} must be a float, got {value!r}")
    return float(value)


def scalar(value: float) -> torch.Tensor:
    """A statistic ``rl`` returned as a float, as the 0-d tensor PARL's algorithms returned."""
    return torch.tensor(value)


class _View(rl.Model):
    """The parameters ``params`` of ``model`` (the same tensors) as this module's own."""

    low: torch.Tensor
    high: torch.Tensor
    scale: torch.Tensor
    bias: torch.Tensor

    def __init__(self, model: nn.Module, params: Iterable[nn.Parameter]) -> None:
        super().__init__()
        self.held = nn.ParameterList(list(params))
        self._model = (model,)  # a tuple: not a submodule, so not in parameters() or state_dict()
        # PARL's actions lie in [-1, 1] (scripts map them onto the environment's bounds).
        for name, value in (("low", -1.0), ("high", 1.0), ("scale", 1.0), ("bias", 0.0)):
            self.register_buffer(name, torch.tensor(value))
        self.action_dim = 0
        """Set by the algorithm from the actions it learns from (``rl`` draws its noise with it)."""

    @property
    def parl_model(self) -> Model:
        """The PARL model this view calls."""
        return cast(Model, self._model[0])


def _flat(value: torch.Tensor) -> torch.Tensor:
    """``[B, 1]`` (PARL's critics) as ``[B]`` (``rl``'s)."""
    return value.reshape(-1) if value.dim() == 2 and value.shape[-1] == 1 else value


class PolicyView(_View):
    """The actor: ``forward(obs) = model.policy(obs)``, training ``get_actor_params()``
    (DDPG's and TD3's ``mu(s)``; MADDPG's logits or ``(mean, log_std)``)."""

    def __init__(self, model: Model) -> None:
        super().__init__(model, method(model, "get_actor_params")())

    def forward(self, obs: torch.Tensor) -> Any:
        return method(self.parl_model, "policy")(obs)


class GaussianPolicyView(PolicyView):
    """SAC's and OAC's actor, ``rl.SquashedGaussianActor``'s calls: ``model.policy(obs)`` is
    ``(mean, log_std)`` of ``u``, and the action ``tanh(u)``."""

    def sample(self, obs: torch.Tensor, noise: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """A reparameterised ``(a, log pi(a|s))``, ``[B, act]`` and ``[B]``."""
        mean, log_std = self(obs)
        if noise is None:
            noise = torch.randn_like(mean)
        u = mean + noise * log_std.exp()
        return torch.tanh(u), ops.tanh_gaussian_log_prob(u, mean, log_std)

    def greedy(self, obs: torch.Tensor) -> torch.Tensor:
        """``tanh(mean)``."""
        mean, _ = self(obs)
        return torch.tanh(mean)


class CriticView(_View):
    """The critic: ``forward(obs, action) = model.value(obs, action)``, each Q ``[B]``, training
    ``get_critic_params()``. MADDPG's takes the lists of every agent's observations and actions."""

    def __init__(self, model: Model) -> None:
        super().__init__(model, method(model, "get_critic_params")())

    def forward(self, obs: Any, action: Any) -> Any:
        if isinstance(obs, (list, tuple)):
            return _flat(method(self.parl_model, "value")(list(obs), list(action)))
        q = method(self.parl_model, "value")(obs, action)
        return tuple(_flat(x) for x in q) if isinstance(q, tuple) else _flat(q)


class ActorCriticView(rl.ActorCriticModel):
    """PolicyGradient's, A2C's and PPO's model, ``rl.ActorCriticModel``'s ``evaluate``: the PARL
    model (all its parameters trained) and how to read its policy:

    - ``"probs"``: ``model(obs)`` is the action probabilities (PolicyGradient; no value: 0);
    - ``"logits"``: ``model.policy(obs)`` the logits, ``model.value(obs)`` the value (A2C, PPO);
    - ``"gaussian"``: ``model.policy(obs)`` is ``(mean, std)`` of a diagonal Gaussian (PPO).
    """

    def __init__(self, model: Model, policy: str) -> None:
        super().__init__()
        self.parl_model = model
        self.policy = policy

    def evaluate(self, obs: torch.Tensor, action: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(log pi(action|obs), H[pi(.|obs)], V(obs))``, each ``[B]``."""
        if self.policy == "probs":
            probs = self.parl_model(obs)
            probs = probs / probs.sum(-1, keepdim=True)
            log_prob = probs.gather(-1, action.long().unsqueeze(-1)).squeeze(-1).log()
            entropy = -(probs * probs.log()).sum(-1)
            return log_prob, entropy, torch.zeros_like(log_prob)
        value = method(self.parl_model, "value")(obs).reshape(-1)
        if self.policy == "gaussian":
            mean, std = method(self.parl_model, "policy")(obs)
            log_std = std.log()
            return (
                distributions.gaussian_log_prob(mean, log_std, action),
                distributions.gaussian_entropy(log_std),
                value,
            )
        log_prob, entropy = distributions.categorical_log_prob_entropy(method(self.parl_model, "policy")(obs), action)
        return log_prob, entropy, value


def soft_update_all(model: nn.Module, target: nn.Module, decay: float) -> None:
    """PARL's ``sync_target``: every parameter of ``target`` to ``decay * target + (1 - decay) * model``."""
    if not 0.0 <= decay <= 1.0:
        raise ValueError(f"sync_target: decay must be in [0, 1], got {decay}")
    with torch.no_grad():
        ops.soft_update_(list(target.parameters()), list(model.parameters()), 1.0 - decay)
