"""Action distributions as small pure functions (no ``torch.distributions`` objects).

``torch.distributions`` validates arguments and builds objects on every call; on the acting fast
path, with batches of 8, that overhead is larger than the network itself.
"""

from __future__ import annotations

import math

import torch

__all__ = [
    "categorical_entropy",
    "categorical_log_prob",
    "categorical_log_prob_entropy",
    "categorical_sample",
    "gaussian_entropy",
    "gaussian_log_prob",
    "gaussian_sample",
]

_LOG_2PI = math.log(2.0 * math.pi)


def categorical_sample(logits: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Sample ``a ~ softmax(logits)`` by the Gumbel-max trick; return ``(a, log pi(a))``."""
    log_probs = torch.log_softmax(logits, dim=-1)
    gumbel = -torch.empty_like(log_probs).exponential_().log()
    action = (log_probs + gumbel).argmax(dim=-1)
    return action, log_probs.gather(-1, action.unsqueeze(-1)).squeeze(-1)


def categorical_log_prob(logits: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
    """``log softmax(logits)[action]``."""
    log_probs = torch.log_softmax(logits, dim=-1)
    return log_probs.gather(-1, action.long().unsqueeze(-1)).squeeze(-1)


def categorical_entropy(logits: torch.Tensor) -> torch.Tensor:
    """``-sum_a pi(a) log pi(a)``."""
    log_probs = torch.log_softmax(logits, dim=-1)
    return -(log_probs.exp() * log_probs).sum(-1)


def categorical_log_prob_entropy(logits: torch.Tensor, action: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``(log pi(action), H[pi])`` from one ``log_softmax`` (what the learners need together)."""
    log_probs = torch.log_softmax(logits, dim=-1)
    log_prob = log_probs.gather(-1, action.long().unsqueeze(-1)).squeeze(-1)
    return log_prob, -(log_probs.exp() * log_probs).sum(-1)


def gaussian_sample(mean: torch.Tensor, log_std: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Sample from a diagonal Gaussian; return ``(a, log pi(a))`` (log-prob summed over dims)."""
    noise = torch.randn_like(mean)
    action = mean + noise * log_std.exp()
    log_prob = (-0.5 * noise.pow(2) - log_std - 0.5 * _LOG_2PI).sum(-1)
    return action, log_prob


def gaussian_log_prob(mean: torch.Tensor, log_std: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
    """Log-density of ``action`` under ``N(mean, exp(log_std)^2)``, summed over action dims."""
    z = (action - mean) * torch.exp(-log_std)
    return (-0.5 * z.pow(2) - log_std - 0.5 * _LOG_2PI).sum(-1)


def gaussian_entropy(log_std: torch.Tensor) -> torch.Tensor:
    """Entropy of a diagonal Gaussian, summed over action dims."""
    return (log_std + 0.5 * (1.0 + _LOG_2PI)).sum(-1)
