"""PARL's torch backend: ``Model``, ``Algorithm``, ``Agent`` (``parl.Model`` and the others
resolve here), built on the ``rl`` package's. Importing it imports torch and ``rl``."""

from actorrt.compat.parl.core.torch.agent import Agent
from actorrt.compat.parl.core.torch.algorithm import Algorithm
from actorrt.compat.parl.core.torch.model import Model

__all__ = ["Agent", "Algorithm", "Model"]
