"""Test-only stand-ins for PARL's ``parl.Model`` / ``parl.Algorithm`` / ``parl.Agent`` and
``parl.algorithms.A2C``, for the remote scripts' tests while ``actorrt.compat.parl`` does not
carry them yet (another change brings them): ``main`` installs them where the real ones are
missing, then runs the runner. They keep PARL's contracts the scripts call (numpy weight dicts,
``agent.alg``); the A2C stand-in acts from its model but does not learn (its losses are zeros).
Being a local module, it travels to the actor hosts by value, as the scripts' own modules do."""

from __future__ import annotations

import importlib.util
import sys
import types
from typing import Any

import numpy as np
import torch

import actorrt.compat.parl as parl
import rl
from actorrt.compat.parl._runner import main as run


class Model(rl.Model):
    """PARL's torch ``parl.Model``: an ``nn.Module`` whose weights travel as numpy dicts."""


class Algorithm:
    model: Any  # the parl.Model it was given

    def get_weights(self) -> dict[str, np.ndarray]:
        return self.model.get_weights()

    def set_weights(self, weights: dict[str, np.ndarray]) -> None:
        self.model.set_weights(weights)


class Agent:
    def __init__(self, algorithm: Algorithm) -> None:
        self.alg = algorithm

    def get_weights(self) -> dict[str, np.ndarray]:
        return self.alg.get_weights()

    def set_weights(self, weights: dict[str, np.ndarray]) -> None:
        self.alg.set_weights(weights)


class A2C(Algorithm):
    """PARL's A2C interface (``prob_and_value``, ``predict``, ``value``, ``learn``); no learning."""

    def __init__(self, model: Any, config: dict[str, Any]) -> None:
        self.model = model  # PARL's A2C model: policy, value, policy_and_value
        self.config = config

    def prob_and_value(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        logits, values = self.model.policy_and_value(obs)
        return torch.softmax(logits, dim=-1), values

    def predict(self, obs: torch.Tensor) -> torch.Tensor:
        return self.model.policy(obs).argmax(dim=-1)

    def value(self, obs: torch.Tensor) -> torch.Tensor:
        return self.model.value(obs)

    def learn(
        self, obs: Any, actions: Any, advantages: Any, target_values: Any, lr: float, entropy_coeff: float
    ) -> Any:
        zero = torch.zeros(())
        return zero, zero, zero, zero


def install() -> list[str]:
    """Put the stand-ins where ``actorrt.compat.parl`` lacks the real ones; their names."""
    missing = []
    for name, value in (("Model", Model), ("Algorithm", Algorithm), ("Agent", Agent)):
        if not hasattr(parl, name):
            vars(parl)[name] = value
            missing.append(name)
    if importlib.util.find_spec("actorrt.compat.parl.algorithms") is None:
        algorithms = types.ModuleType("actorrt.compat.parl.algorithms")
        vars(algorithms)["A2C"] = A2C
        sys.modules[algorithms.__name__] = algorithms
        vars(parl)["algorithms"] = algorithms
        missing.append("algorithms.A2C")
    return missing


def main(argv: list[str]) -> int:
    """``python -c '...main(sys.argv[1:])' SCRIPT.py ARGS``: the runner, with the stand-ins."""
    missing = install()
    if missing:
        print(f"parl_stub: test stand-ins for parl.{', parl.'.join(missing)}", file=sys.stderr)
    return run(argv)
