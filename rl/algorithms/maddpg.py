"""MADDPG: multi-agent deep deterministic policy gradient with centralised critics (Lowe et al.
2017, "Multi-Agent Actor-Critic for Mixed Cooperative-Competitive Environments", Algorithm 1).

``N`` agents. Agent ``i`` acts on its own observation ``o_i`` with its policy ``mu_i``, and learns
a critic ``Q_i(x, a_1, ..., a_N)`` of every agent's observation ``x = (o_1, ..., o_N)`` and action:
centralised training, decentralised execution. On a minibatch ``(x, a_1..a_N, r_i, x', d_i)``:

    target:  y_i = r_i + gamma (1 - d_i) Q'_i(x', a'_1, ..., a'_N),   a'_j ~ mu'_j(o'_j)   (every target policy)
    critic:  L(theta_i) = mean (Q_i(x, a_1, ..., a_N) - y_i)^2
    actor:   grad J = mean grad mu_i(o_i) grad_{a_i} Q_i(x, a_1, ..., a_i, ..., a_N) at a_i ~ mu_i(o_i)
    targets: theta'_i <- tau theta_i + (1 - tau) theta'_i        (policy and critic)

Discrete actions (the particle environments) are relaxed by the Gumbel-softmax (§4.2): the
policy gives logits ``l`` and acts with ``softmax(l + g)``, ``g`` Gumbel noise, a vector the
critic takes as the action. Continuous ones: ``tanh(mean + exp(log_std) eps)``. As in the
authors' code, the actor's loss adds ``1e-3 mean(out^2)`` of the policy's raw output, and each
gradient is clipped to norm 0.5.

:class:`MADDPG` is one agent's part (its policy is ``self.model``); :func:`learn_together` is the
algorithm's inner loop over all agents on one minibatch. The paper updates the critic, then the
actor; ``actor_first=True`` takes the actor's step first (PARL's order).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import torch

from rl import ops
from rl.algorithm import Algorithm, PolicyStep, check_gamma
from rl.algorithms._off_policy import check_tau, frozen_copies
from rl.fused import plain_clip_grad_norm_
from rl.model import Model

__all__ = ["MADDPG", "AgentBatch", "learn_together"]


class AgentBatch(NamedTuple):
    """What agent ``i`` learns from: every agent's observations and actions of ``B``
    transitions (one ``[B, ...]`` tensor per agent) and its critic's targets ``y_i`` ``[B]``."""

    obs: Sequence[torch.Tensor]
    actions: Sequence[torch.Tensor]
    target_q: torch.Tensor


class MADDPG(Algorithm):
    """One agent of MADDPG: its policy (``self.model``: logits, or ``(mean, log_std)`` when
    ``continuous``), its centralised critic ``critic(obs_n, act_n) -> [B]``, target copies of
    both and an Adam optimiser for each. ``agent_index``: where its observation and action are in
    the lists the critic takes."""

    def __init__(
        self,
        actor: Model,
        critic: Model,
        agent_index: int,
        continuous: bool = False,
        actor_lr: float = 1e-2,
        critic_lr: float = 1e-2,
        gamma: float = 0.95,
        tau: float = 0.01,
        max_grad_norm: float | None = 0.5,
        policy_reg: float = 1e-3,
        actor_first: bool = False,
        fused: bool | None = None,
    ) -> None:
        super().__init__(actor, fused)
        if agent_index < 0:
            raise ValueError(f"agent_index must be >= 0, got {agent_index}")
        self.critic = critic
        self.target_actor, self.target_critic = frozen_copies(actor, critic)
        self.agent_index = agent_index
        self.continuous = continuous
        self.gamma = check_gamma(gamma)
        self.tau = check_tau(tau)
        self.max_grad_norm = max_grad_norm
        self.policy_reg = policy_reg
        self.actor_first = actor_first
        self.actor_optimizer = torch.optim.Adam(actor.parameters(), lr=actor_lr)
        self.critic_optimizer = torch.optim.Adam(critic.parameters(), lr=critic_lr)

    # -- acting --------------------------------------------------------------------------------
    def _act(self, out: torch.Tensor | tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        """A relaxed action from the policy's output: Gumbel-softmax of the logits, or the squashed Gaussian draw."""
        if isinstance(out, tuple):
            mean, log_std = out
            return torch.tanh(mean + log_std.exp() * torch.randn_like(mean))
        return ops.gumbel_softmax_sample(out, torch.rand_like(out))

    def sample(self, obs: torch.Tensor, target: bool = False) -> PolicyStep:
        """``a ~ mu_i(o_i)`` (``target``: of the target policy ``mu'_i``), differentiable in the policy's weights."""
        return PolicyStep(self._act((self.target_actor if target else self.model)(obs)), None, None)

    def predict(self, obs: torch.Tensor) -> torch.Tensor:
        """The noiseless action: ``softmax(l)`` (a discrete action is its argmax) or ``tanh(mean)``."""
        out = self.model(obs)
        if isinstance(out, tuple):
            return torch.tanh(out[0])
        return torch.softmax(out, dim=-1)

    def q(self, obs: Sequence[torch.Tensor], actions: Sequence[torch.Tensor], target: bool = False) -> torch.Tensor:
        """``Q_i(x, a_1, ..., a_N)`` (``target``: ``Q'_i``), ``[B]``."""
        return (self.target_critic if target else self.critic)(obs, actions)

    @torch.no_grad()
    def target_q(
        self,
        rewards: torch.Tensor,
        terminated: torch.Tensor,
        next_obs: Sequence[torch.Tensor],
        next_actions: Sequence[torch.Tensor],
    ) -> torch.Tensor:
        """``y_i = r_i + gamma (1 - d_i) Q'_i(x', a'_1, ..., a'_N)``, the ``a'_j`` drawn by every agent's target policy."""
        return ops.td_target(rewards, terminated, self.q(next_obs, next_actions, target=True), self.gamma)

    # -- learning ------------------------------------------------------------------------------
    def learn(self, batch: AgentBatch) -> dict[str, float]:
        """The critic's step and the actor's (in the paper's order, or the actor's first), then the targets."""
        if self.actor_first:
            actor_loss = self._actor_step(batch)
            critic_loss, q = self._critic_step(batch)
        else:
            # 1. The critic regresses onto y_i;
            critic_loss, q = self._critic_step(batch)
            # 2. the policy climbs Q_i through its own relaxed action, the others' as sampled;
            actor_loss = self._actor_step(batch)
        # 3. and the target networks take one Polyak step.
        ops.soft_update_(list(self.target_critic.parameters()), list(self.critic.parameters()), self.tau)
        ops.soft_update_(list(self.target_actor.parameters()), list(self.model.parameters()), self.tau)
        return {"critic_loss": critic_loss, "actor_loss": actor_loss, "q_mean": q}

    def _critic_step(self, batch: AgentBatch) -> tuple[float, float]:
        """``L = mean (Q_i(x, a) - y_i)^2``, one clipped Adam step; returns ``(L, mean Q_i)``."""
        q = self.q(batch.obs, batch.actions)
        loss = ops.weighted_mse(q, batch.target_q, torch.ones_like(q))
        self._clipped_step(loss, self.critic, self.critic_optimizer)
        return loss.item(), float(q.detach().mean())

    def _actor_step(self, batch: AgentBatch) -> float:
        """``-mean Q_i(x, a_1, .., a_i ~ mu_i(o_i), .., a_N) + policy_reg mean(out^2)``, one clipped Adam step."""
        i = self.agent_index
        out = self.model(batch.obs[i])
        actions = list(batch.actions)
        actions[i] = self._act(out)
        flat = torch.cat(out, dim=-1) if isinstance(out, tuple) else out
        loss = -self.q(batch.obs, actions).mean() + self.policy_reg * flat.pow(2).mean()
        self._clipped_step(loss, self.model, self.actor_optimizer)
        return loss.item()

    def _clipped_step(self, loss: torch.Tensor, module: torch.nn.Module, optimizer: torch.optim.Optimizer) -> None:
        """Gradients of ``loss`` into ``module``'s parameters only, clipped to :attr:`max_grad_norm`, and the step."""
        params = [p for p in module.parameters() if p.requires_grad]
        grads = torch.autograd.grad(loss, params, allow_unused=True)
        for p, g in zip(params, grads, strict=True):
            p.grad = torch.zeros_like(p) if g is None else g
        plain_clip_grad_norm_([p.grad for p in params if p.grad is not None], self.max_grad_norm)
        optimizer.step()


def learn_together(
    agents: Sequence[MADDPG],
    obs: Sequence[torch.Tensor],
    actions: Sequence[torch.Tensor],
    rewards: Sequence[torch.Tensor],
    next_obs: Sequence[torch.Tensor],
    terminated: Sequence[torch.Tensor],
) -> list[dict[str, float]]:
    """Algorithm 1's inner loop on one minibatch: every target policy acts on ``x'``, each agent's
    target ``y_i`` is set, then each agent learns (its targets move after its step; no ``y_i``
    depends on them any more). ``rewards[i]``, ``terminated[i]``: agent ``i``'s, ``[B]``."""
    with torch.no_grad():
        next_actions = [agent.sample(o, target=True).action for agent, o in zip(agents, next_obs, strict=True)]
    targets = [agent.target_q(rewards[i], terminated[i], next_obs, next_actions) for i, agent in enumerate(agents)]
    return [agent.learn(AgentBatch(obs, actions, y)) for agent, y in zip(agents, targets, strict=True)]
