"""PARL's ``DDQN(model, gamma, lr)``: :class:`~actorrt.compat.parl.algorithms.dqn.DQN` with
double Q-learning (the model picks the next action, the target model values it)."""

from __future__ import annotations

from actorrt.compat.parl.algorithms.dqn import DQN

__all__ = ["DDQN"]


class DDQN(DQN):
    """Double DQN: ``y = r + gamma (1 - terminal) Q'(s', argmax_a Q(s', a))``."""

    double_q = True
