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
"""

from __future__ import annotations

import torch
from torch import nn

from rl import backprop, ops
from rl.algorithm import PolicyStep, check_gamma
from rl.algorithms._off_policy import OffPolicyAlgorithm, check_tau, frozen_copy, weighted_mse
from rl.fused import AdamTensors, FusedMLPPair, adam_
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
        self.written_out = (
            self.fused
            and autocast is None
            and type(actor) is SquashedGaussianActor
            and type(critic) is TwinQCritic
            and type(critic.nets) is FusedMLPPair
            and backprop.supports(actor.net)
            and backprop.supports(critic.nets)
            and not backprop.hooked(actor)
            and not backprop.hooked(critic)
        )
        """Whether :meth:`learn` writes its update out (:meth:`_update`: gradients by
        :mod:`rl.backprop`, Adam by :func:`rl.fused.adam_`) rather than taking it by autograd: the
        same steps to float rounding, faster (``bench/README_rl.md``). On with the fast paths
        (``fused``) in float32, for the default networks (ReLU MLPs, the fused twin critic) and the
        fused Adam optimisers built here; with ``compile``, that one function is what is compiled.
        A parameter frozen later, or an optimiser replaced, sends :meth:`learn` down the autograd
        path. ``p.grad`` is not set on this path."""

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
        """One step of each of critics, actor and temperature; then the soft target update. The
        update is written out (:attr:`written_out`) or taken by autograd: the same steps."""
        alpha = self.temperature().detach()
        trained: list[tuple[torch.optim.Optimizer, nn.Module]] = [
            (self.critic_optimizer, self.critic),
            (self.actor_optimizer, self.model),
        ]
        if self.autotune_alpha:
            trained.append((self.alpha_optimizer, self.temperature))
        adams = self._written_adams(*trained)

        critic_args = (batch.obs, batch.actions, batch.rewards, batch.terminated, batch.next_obs, batch.weights, alpha)
        critic_noise, actor_noise = self._noise(batch.obs), self._noise(batch.obs)
        if adams is not None:
            alpha_adam = adams[2] if self.autotune_alpha else None
            update = self._maybe_compiled(self._update, no_autograd=True)
            critic_loss, q1, y, actor_loss, alpha_loss, log_prob = update(
                adams[0], adams[1], alpha_adam, *critic_args, critic_noise, actor_noise
            )
        else:
            # Soft policy evaluation: the critics regress onto the soft one-step target.
            critic_loss, q1, y = self._critic_step(*critic_args, critic_noise)
            # Soft policy improvement, through the reparameterised sample, and the temperature's
            # step: one backward pass for both (J_pi's graph reaches no log alpha, J(alpha)'s no
            # actor weight).
            with self._frozen(self.critic):
                actor_loss, alpha_loss, log_prob = self._maybe_compiled(self._actor_loss)(batch.obs, alpha, actor_noise)
                self.actor_optimizer.zero_grad(set_to_none=True)
                self.alpha_optimizer.zero_grad(set_to_none=True)
                (actor_loss + alpha_loss).backward()
            self._adam_step(self.actor_optimizer)
            if self.autotune_alpha:
                self._adam_step(self.alpha_optimizer)
            self._soft_update(self.target_critic, self.critic, self.tau)

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

    @torch.no_grad()
    def _update(
        self,
        critic_adam: AdamTensors,
        actor_adam: AdamTensors,
        alpha_adam: AdamTensors | None,
        obs: torch.Tensor,
        actions: torch.Tensor,
        rewards: torch.Tensor,
        terminated: torch.Tensor,
        next_obs: torch.Tensor,
        weights: torch.Tensor,
        alpha: torch.Tensor,
        critic_noise: torch.Tensor,
        actor_noise: torch.Tensor,
    ) -> tuple[torch.Tensor, ...]:
        """The whole update written out, in one function for ``torch.compile``: the critics' step
        (:meth:`_critic_update`), then the actor's, the temperature's and the targets'
        (:meth:`_actor_update`) with the critics as that step left them. Returns ``(J_Q, Q_1(s,
        a), y, J_pi, J(alpha), log pi(a~|s))``."""
        critic_loss, q1, y = self._critic_update(
            critic_adam, obs, actions, rewards, terminated, next_obs, weights, alpha, critic_noise
        )
        actor_loss, alpha_loss, log_prob = self._actor_update(actor_adam, alpha_adam, obs, alpha, actor_noise)
        return critic_loss, q1, y, actor_loss, alpha_loss, log_prob

    @torch.no_grad()
    def _actor_update(
        self,
        adam: AdamTensors,
        alpha_adam: AdamTensors | None,
        obs: torch.Tensor,
        alpha: torch.Tensor,
        noise: torch.Tensor,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The actor's gradients written out (:meth:`_actor_grads`) and its Adam step; the
        temperature's step where ``alpha_adam`` is given (automatic temperature), with
        ``dJ(alpha)/dlog alpha = -mean(log pi + H_target)``; the target critics' soft update. One
        function for ``torch.compile``; returns ``(J_pi, J(alpha), log pi(a~|s))`` as
        :meth:`_actor_loss` does."""
        grads, actor_loss, log_prob = self._actor_grads(obs, alpha, noise)
        adam_(adam, grads)
        alpha_loss = torch.zeros(())
        if alpha_adam is not None:
            target_gap = (log_prob + self.target_entropy).mean()
            alpha_loss = -(self.temperature.log_alpha * target_gap)  # before its step
            adam_(alpha_adam, [-target_gap])
        self._soft_update(self.target_critic, self.critic, self.tau)
        return actor_loss, alpha_loss, log_prob

    @torch.no_grad()
    def _critic_grads(
        self,
        obs: torch.Tensor,
        actions: torch.Tensor,
        rewards: torch.Tensor,
        terminated: torch.Tensor,
        next_obs: torch.Tensor,
        weights: torch.Tensor,
        alpha: torch.Tensor,
        noise: torch.Tensor,
    ) -> tuple[list[torch.Tensor], torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(dJ_Q/d critic parameters, J_Q, Q_1(s, a), y)`` of :meth:`_critic_loss` written out."""
        target = self.target_critic.nets
        assert isinstance(target, FusedMLPPair)
        next_action, next_log_prob = self.model.sample(next_obs, noise)
        next_q1, next_q2, _ = backprop.pair_forward(target, torch.cat([next_obs, next_action], dim=-1))
        y = ops.clipped_double_q_target(rewards, terminated, next_q1, next_q2, self.gamma, next_log_prob, alpha)
        grads, loss, q1 = self._regression_grads(obs, actions, y, weights)
        return grads, loss, q1, y

    @torch.no_grad()
    def _actor_grads(
        self, obs: torch.Tensor, alpha: torch.Tensor, noise: torch.Tensor
    ) -> tuple[list[torch.Tensor], torch.Tensor, torch.Tensor]:
        """``(dJ_pi/d actor parameters, J_pi, log pi(a~|s))``, through the reparameterised sample
        ``a = bias + scale tanh(u)``, ``u = mean + std eps``, with the critics as they are now:

            J_pi = mean(alpha log pi(a|s) - min_i Q_i(s, a))

        ``log pi = sum(-eps^2/2 - log_std) - sum log(1 - tanh(u)^2) + const`` (``eps`` is fixed), so

            dJ/du       = (alpha 2 tanh(u) - dmin Q/da scale (1 - tanh(u)^2)) / N
            dJ/dmean    = dJ/du
            dJ/dlog_std = dJ/du eps std - alpha / N

        and ``log_std = lo + (hi - lo) (tanh(raw) + 1) / 2`` gives
        ``dJ/draw = dJ/dlog_std (hi - lo) (1 - tanh(raw)^2) / 2``.
        """
        n = obs.shape[0]
        pair = self.critic.nets
        assert isinstance(pair, FusedMLPPair)
        actor = self.model
        actor_layers = backprop.mlp_layers(actor.net)
        out, actor_tape = backprop.mlp_forward(actor_layers, obs)
        mean, log_std = actor.head(out)
        action, log_prob, u = actor.reparameterised(mean, log_std, noise)
        q1, q2, q_tape = backprop.pair_forward(pair, torch.cat([obs, action], dim=-1))
        loss = (alpha * log_prob - torch.minimum(q1, q2)).mean()
        # torch.minimum's gradient: to the smaller, halved between equal ones.
        to_q1 = (q1 < q2).float() + 0.5 * (q1 == q2).float()
        _, dmin_q = backprop.pair_backward(
            pair, q_tape, to_q1, 1.0 - to_q1, weight_grads=False, input_grad=True, input_from=obs.shape[1]
        )
        assert dmin_q is not None  # dmin Q / da
        tanh_u = torch.tanh(u)
        d_u = (alpha * 2.0 * tanh_u - dmin_q * actor.scale * (1.0 - tanh_u * tanh_u)) / n
        d_log_std = d_u * noise * log_std.exp() - alpha / n
        lo, hi = actor.log_std_min, actor.log_std_max
        tanh_raw = torch.tanh(out[:, actor.action_dim :])
        d_raw = d_log_std * (0.5 * (hi - lo)) * (1.0 - tanh_raw * tanh_raw)
        grads, _ = backprop.mlp_backward(actor_layers, actor_tape, torch.cat([d_u, d_raw], dim=-1))
        assert grads is not None
        return grads, loss, log_prob.detach()

    def _noise(self, obs: torch.Tensor) -> torch.Tensor:
        """The standard normal draw of a reparameterised sample for each row of ``obs`` (drawn
        outside the compiled losses: inductor's CPU ``randn`` costs ~0.2 ms for ``[256, 6]``)."""
        return torch.randn(obs.shape[0], self.model.action_dim)

    def _critic_loss(
        self,
        obs: torch.Tensor,
        actions: torch.Tensor,
        rewards: torch.Tensor,
        terminated: torch.Tensor,
        next_obs: torch.Tensor,
        weights: torch.Tensor,
        alpha: torch.Tensor,
        noise: torch.Tensor,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(J_Q, Q_1(s, a), y)`` (the last two detached, float32)."""
        with torch.no_grad(), self._mixed():
            next_action, next_log_prob = self.model.sample(next_obs, noise)
            next_q1, next_q2 = self.target_critic(next_obs, next_action)
            y = ops.clipped_double_q_target(
                rewards, terminated, next_q1, next_q2, self.gamma, next_log_prob, alpha
            ).float()
        with self._mixed():
            q1, q2 = self.critic(obs, actions)
            loss = weighted_mse(q1, y, weights) + weighted_mse(q2, y, weights)
        return loss, q1.detach().float(), y

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
