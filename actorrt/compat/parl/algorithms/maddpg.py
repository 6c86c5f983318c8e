"""PARL's ``MADDPG(model, agent_index, act_space, gamma, tau, actor_lr, critic_lr)``: one
agent's :class:`rl.MADDPG` on views of its model, taking the actor's step before the critic's
(PARL's order; the paper's is the critic's first). The agent (the script's) computes the
critic's target with every agent's target policy and calls ``learn(obs_n, act_n, target_q)``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

import rl
from actorrt.compat.parl.algorithms._off_policy import OffPolicyFace, Opt
from actorrt.compat.parl.algorithms._views import CriticView, PolicyView
from actorrt.compat.parl.core.torch.model import Model
from rl.algorithms.maddpg import AgentBatch

__all__ = ["MADDPG"]


class MADDPG(OffPolicyFace):
    """``model.policy(obs)``: logits (discrete actions) or ``(mean, log_std)`` (continuous: the
    action space is a Box); ``model.value(obs_n, act_n)``: ``Q [B]`` from the lists of every
    agent's observations and actions."""

    rl_algorithm: rl.MADDPG

    def __init__(
        self,
        model: Model,
        agent_index: int | None = None,
        act_space: list[Any] | None = None,
        gamma: Opt = None,
        tau: Opt = None,
        actor_lr: Opt = None,
        critic_lr: Opt = None,
    ) -> None:
        super().__init__(model, gamma, tau, actor_lr, critic_lr)
        if not isinstance(agent_index, int) or isinstance(agent_index, bool):
            raise TypeError(f"MADDPG: agent_index must be an int, got {agent_index!r}")
        if not isinstance(act_space, list):
            raise TypeError(f"MADDPG: act_space must be the list of every agent's action space, got {act_space!r}")
        self.agent_index = agent_index
        self.act_space = act_space
        self.continuous_actions = (
            len(act_space) > 0 and hasattr(act_space[0], "high") and not hasattr(act_space[0], "num_discrete_space")
        )
        actor = PolicyView(model)
        critic = CriticView(model)
        settings = (self.actor_lr, self.critic_lr, self.gamma, self.tau)
        maddpg = rl.MADDPG(
            actor, critic, agent_index, self.continuous_actions, *settings, actor_first=True
        )  # PARL's order
        self._adopt(actor, maddpg)
        self.sync_target(0.0)

    def predict(self, obs: torch.Tensor) -> torch.Tensor:
        """``softmax(logits)`` or ``tanh(mean)``, ``[B, act]``."""
        return self.rl_algorithm.predict(obs)

    def sample(self, obs: torch.Tensor, use_target_model: bool = False) -> torch.Tensor:
        """A relaxed action (Gumbel-softmax, or ``tanh`` of a Gaussian draw) of the policy or its target."""
        return self.rl_algorithm.sample(obs, target=use_target_model).action

    def Q(
        self, obs_n: Sequence[torch.Tensor], act_n: Sequence[torch.Tensor], use_target_model: bool = False
    ) -> torch.Tensor:
        """This agent's ``Q(x, a_1, ..., a_N)`` (or its target's), ``[B]``."""
        return self.rl_algorithm.q(list(obs_n), list(act_n), target=use_target_model)

    def learn(
        self, obs_n: Sequence[torch.Tensor], act_n: Sequence[torch.Tensor], target_q: torch.Tensor
    ) -> torch.Tensor:
        """The actor's step, the critic's (onto ``target_q``), then the targets; returns the critic's loss."""
        stats = self.rl_algorithm.learn(AgentBatch(list(obs_n), list(act_n), target_q))
        return torch.tensor(stats["critic_loss"])
