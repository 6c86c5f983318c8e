"""SAC: soft actor-critic with twin Q and automatic temperature (Haarnoja et al. 2018,
"Soft Actor-Critic Algorithms and Applications", Algorithm 1).

The policy maximises reward plus entropy, ``sum_t E[r_t + alpha H(pi(.|s_t))]``:

    critics:     y = r + gamma (1 - terminated) (min_i Q'_i(s', a') - alpha log pi(a'|s')),  a' ~ pi(.|s')
                 J_Q = sum_i mean (Q_i(s, a) - y)^2
    actor:       J_pi = mean (alpha log pi(a~|s) - min_i Q_i(s, a~)),  a~ ~ pi(.|s) reparameterised
    temperature: J(alpha) = mean (-alpha (log pi(a~|s) + H_target)),   H_target = -dim(A)
    targets:     theta'_i <- tau theta_i + (1 - tau) theta'_i

``alpha`` is optimised as ``log alpha`` (so it stays positive), with ``alpha`` replaced by
``log alpha`` in ``J(alpha)``: the gradient has the same sign, and a step size that does not
shrink with ``alpha`` (as SB3 and the authors' later code do). The policy is a tanh-squashed
Gaussian (:class:`rl.SquashedGaussianActor`, with the log-density correction of the paper's
appendix C).

:meth:`SAC.learn` takes these steps in order, by autograd. Where the fast paths apply
(:attr:`SAC.written_out`) it takes the same steps with their gradients written out by hand
(:func:`rl.algorithms.written_out.sac_update`: equal to float rounding, and faster).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from rl import ops
from rl.algorithm import PolicyStep, check_gamma
from rl.algorithms import written_out
from rl.algorithms._off_policy import OffPolicyAlgorithm, check_tau, frozen_copy
from rl.networks import SquashedGaussianActor, TwinQCritic
from rl.replay import ReplayBatch

__all__ = ["SAC"]


class Temperature(nn.Module):
    """``log alpha`` as a module, so that it is saved and restored with the rest."""

    def __init__(self, alpha: float) -> None:
        super().__init__()
        self.log_alpha = nn.Parameter(torch.tensor(float(alpha)).log())

    def forward(self) -> torch.Tensor:
        """``alpha`` (with a gradient to ``log alpha``)."""
        return self.log_alpha.exp()


class SAC(OffPolicyAlgorithm):
    """SAC with twin critics, target critics and (by default) automatic entropy temperature."""

    model: SquashedGaussianActor

    def __init__(
        self,
        actor: SquashedGaussianActor,
        critic: TwinQCritic,
        actor_lr: float = 3e-4,
        critic_lr: float = 3e-4,
        alpha_lr: float = 3e-4,
        gamma: float = 0.99,
        tau: float = 0.005,
        alpha: float = 1.0,
        autotune_alpha: bool = True,
        target_entropy: float | None = None,
        fused: bool | None = None,
        autocast: torch.dtype | None = None,
        compile: bool = False,
    ) -> None:
        if alpha <= 0:
            raise ValueError(f"alpha (the initial temperature) must be > 0, got {alpha}")
        super().__init__(actor, fused, autocast, compile)
        self.critic = critic
        self.target_critic = frozen_copy(critic)
        self.gamma = check_gamma(gamma)
        self.tau = check_tau(tau)
        self.temperature = Temperature(alpha)
        self.autotune_alpha = autotune_alpha
        if target_entropy is None:
            # log pi is a density over the environment's actions (with -sum log scale); the
            # paper's heuristic is for actions in [-1, 1], as SB3 and RLlib apply it.
            target_entropy = -actor.action_dim + float(torch.log(actor.scale).sum())
        self.target_entropy = float(target_entropy)
        """``H_target`` in nats of the environment's actions; by default the paper's heuristic
        ``-dim(A)`` for actions normalised to [-1, 1] (``-dim(A) + sum log scale`` here, where
        ``scale`` is half the width of the action bounds: -0.31 for Pendulum's [-2, 2])."""
        self.actor_optimizer = torch.optim.Adam(actor.parameters(), lr=actor_lr, fused=True)
        self.critic_optimizer = torch.optim.Adam(critic.parameters(), lr=critic_lr, fused=True)
        self.alpha_optimizer = torch.optim.Adam(self.temperature.parameters(), lr=alpha_lr, fused=True)
        self.written_out = written_out.applies(self, SquashedGaussianActor, TwinQCritic)
        """Whether :meth:`learn` takes its update written out
        (:func:`rl.algorithms.written_out.sac_update`: gradients by :mod:`rl.backprop`, Adam by
        :func:`rl.fused.adam_`) rather than by autograd: the same steps to float rounding, faster
        (``bench/README_rl.md``). On with the fast paths (``fused``) in float32, for the default
        networks (ReLU MLPs, the fused twin critic) and the fused Adam optimisers built here; with
        ``compile``, that one function is what is compiled. A parameter frozen later, or an
        optimiser replaced, sends :meth:`learn` down the autograd path. ``p.grad`` is not set on
        that path."""

    @property
    def alpha(self) -> float:
        """The current temperature."""
        return float(self.temperature.log_alpha.detach().exp())

    def sample(self, obs: torch.Tensor) -> PolicyStep:
        """``a ~ pi(.|s)`` with its log-probability (uniform during warm-up)."""
        if self.uniform_exploration:
            return PolicyStep(self._uniform(obs), None, None)
        action, log_prob = self.model.sample(obs)
        return PolicyStep(action, log_prob, None)

    def predict(self, obs: torch.Tensor) -> torch.Tensor:
        """The squashed mean action."""
        return self.model.greedy(obs)

    def learn(self, batch: ReplayBatch[torch.Tensor]) -> dict[str, float]:
        """One step of each of critics, actor and temperature; then the soft target update."""
        alpha = self.temperature().detach()
        # The standard normal draws of the reparameterised samples a' ~ pi(.|s') and a~ ~ pi(.|s).
        critic_noise, actor_noise = self._noise(batch.obs), self._noise(batch.obs)
        step = written_out.sac_update(self, batch, alpha, critic_noise, actor_noise)
        if step is None:
            step = self._update(batch, alpha, critic_noise, actor_noise)
        critic_loss, q1, y, actor_loss, alpha_loss, log_prob = step
        self.updates += 1
        self.td_errors = (y - q1).numpy()
        return {
            "critic_loss": critic_loss.item(),
            "actor_loss": actor_loss.item(),
            "alpha": float(alpha),
            "alpha_loss": alpha_loss.item(),
            "entropy": float(-log_prob.mean()),
            "q_mean": float(q1.mean()),
        }

    def _update(
        self,
        batch: ReplayBatch[torch.Tensor],
        alpha: torch.Tensor,
        critic_noise: torch.Tensor,
        actor_noise: torch.Tensor,
    ) -> tuple[torch.Tensor, ...]:
        """The update by autograd; returns ``(J_Q, Q_1(s, a), y, J_pi, J(alpha), log pi(a~|s))``."""
        # 1. Soft policy evaluation: both critics regress onto the soft one-step target y (_target).
        critic_loss, q1, y = self._critic_step(batch, alpha, critic_noise)
        # 2. Soft policy improvement: the actor through the reparameterised sample a~ into the
        #    critics (frozen); 3. the temperature towards H_target. One backward pass for both
        #    (J_pi's graph reaches no log alpha, J(alpha)'s no actor weight).
        with self._frozen(self.critic):
            actor_loss, alpha_loss, log_prob = self._maybe_compiled(self._actor_loss)(batch.obs, alpha, actor_noise)
            self.actor_optimizer.zero_grad(set_to_none=True)
            self.alpha_optimizer.zero_grad(set_to_none=True)
            (actor_loss + alpha_loss).backward()
        self._adam_step(self.actor_optimizer)
        if self.autotune_alpha:
            self._adam_step(self.alpha_optimizer)
        # 4. The target critics: one Polyak step.
        self._soft_update(self.target_critic, self.critic, self.tau)
        return critic_loss, q1, y, actor_loss, alpha_loss, log_prob

    def _target(
        self,
        rewards: torch.Tensor,
        terminated: torch.Tensor,
        next_obs: torch.Tensor,
        alpha: torch.Tensor,
        noise: torch.Tensor,
        target_q: Callable[[torch.Tensor, torch.Tensor], tuple[torch.Tensor, torch.Tensor]] | None = None,
    ) -> torch.Tensor:
        """The soft target ``y = r + gamma (1 - terminated) (min_i Q'_i(s', a') - alpha log pi(a'|s'))``,
        ``a' ~ pi(.|s')`` drawn with ``noise``. ``target_q``: how ``Q'`` is evaluated (the target
        critics' forward pass; the written-out update passes its own)."""
        next_action, next_log_prob = self.model.sample(next_obs, noise)
        next_q1, next_q2 = (target_q or self.target_critic)(next_obs, next_action)
        return ops.clipped_double_q_target(rewards, terminated, next_q1, next_q2, self.gamma, next_log_prob, alpha)

    def _actor_loss(
        self, obs: torch.Tensor, alpha: torch.Tensor, noise: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(J_pi, J(alpha), log pi(a~|s))``; ``J(alpha)`` is 0 without :attr:`autotune_alpha`
        (the log-probability detached, float32). Raising alpha when the entropy is below the
        target and lowering it above, ``J(alpha)`` takes the log-probability without its gradient."""
        with self._mixed():
            action, log_prob = self.model.sample(obs, noise)
            q1_pi, q2_pi = self.critic(obs, action)
            loss = (alpha * log_prob - torch.minimum(q1_pi, q2_pi)).float().mean()
        log_prob = log_prob.detach().float()
        alpha_loss = torch.zeros(())
        if self.autotune_alpha:
            alpha_loss = -(self.temperature.log_alpha * (log_prob + self.target_entropy)).mean()
        return loss, alpha_loss, log_prob

    def _noise(self, obs: torch.Tensor) -> torch.Tensor:
        """The standard normal draw of a reparameterised sample for each row of ``obs`` (drawn
        outside the compiled losses: inductor's CPU ``randn`` costs ~0.2 ms for ``[256, 6]``)."""
        return torch.randn(obs.shape[0], self.model.action_dim)
