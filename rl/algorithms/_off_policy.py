"""What DDPG, TD3 and SAC share: acting in a bounded Box, uniform warm-up actions, target
networks, the critics' regression onto a target and its step, the TD errors that prioritised
replay needs, and the switches of the updates' fast paths (mixed precision, ``torch.compile``;
the updates written out by hand are :mod:`rl.algorithms.written_out`)."""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import torch

from rl import ops
from rl.algorithm import Algorithm, PolicyStep, check_gamma
from rl.algorithms import written_out
from rl.fused import fused_adam_step_
from rl.model import Model
from rl.networks import DeterministicActor, QCritic, SquashedGaussianActor, TwinQCritic
from rl.precision import warn_if_slow_bfloat16
from rl.replay import ReplayBatch

__all__ = [
    "DeterministicOffPolicy",
    "OffPolicyAlgorithm",
    "check_non_negative",
    "check_tau",
    "frozen_copies",
    "frozen_copy",
]


def frozen_copy(model: Model) -> Model:
    """A target network: a deep copy that never takes gradients."""
    (target,) = frozen_copies(model)
    return target


def frozen_copies(*models: Model) -> tuple[Model, ...]:
    """Target networks of several models, copied together: parts the models share (an actor and
    a critic that are two views of one network) are shared by their copies too."""
    targets = copy.deepcopy(models)
    for target in targets:
        target.requires_grad_(False)
    return targets


def check_tau(tau: float) -> float:
    """The target networks' Polyak rate, checked when the algorithm is built (not at its first update)."""
    if not 0.0 < tau <= 1.0:
        raise ValueError(f"tau must be in (0, 1] (0 would freeze the targets), got {tau}")
    return float(tau)


def check_non_negative(name: str, value: float) -> float:
    """A noise scale, checked when the algorithm is built."""
    if not value >= 0.0:
        raise ValueError(f"{name} must be >= 0, got {value}")
    return float(value)


class OffPolicyAlgorithm(Algorithm):
    """Base of the continuous-control off-policy algorithms.

    ``self.model`` is the actor (the acting model whose weights collectors get). While
    :attr:`uniform_exploration` is set (the training loop sets it until ``learning_starts``),
    :meth:`sample` draws actions uniformly in the bounds. After each :meth:`learn`,
    :attr:`td_errors` holds the batch's TD errors (numpy) for prioritised replay.

    ``autocast`` (default ``None``: off) is a lower-precision dtype, ``torch.bfloat16``, for the
    forward passes of :meth:`learn` (``torch.autocast``: the hidden layers' matmuls in that dtype;
    each network's output layer (:class:`rl.precision.OutputLinear`), so Q-values, log-probabilities,
    targets and TD errors, and weights, gradients and optimiser state in float32). On a CPU with AMX
    (Intel Sapphire Rapids and later) a 256x256 matmul runs ~4x faster in bfloat16, and a SAC
    step at batch 256 takes 15-25% less time (``bench/README_rl.md``). On a CPU without bfloat16
    units (:func:`rl.precision.native_bfloat16_matmul`) it is many times slower (a SAC step ~15x
    on an AVX2-only AMD EPYC), and constructing the algorithm warns. Acting (:meth:`sample`,
    :meth:`predict`) stays in float32.

    ``compile`` (default ``False``): the loss computations of :meth:`learn` (forward passes, and
    with them the backward passes) run through ``torch.compile``, built at the first update (a
    few seconds; again for each new batch size), the optimiser steps staying eager; where the
    update is written out (``written_out``, float32), the whole update, optimiser and target steps
    included, is one compiled function (:mod:`rl.algorithms.written_out`). It computes the same maths
    (``tests/rl/test_rl_compile.py``). On a CPU with AMX, with ``autocast=torch.bfloat16``, a SAC
    or TD3 step on one core takes about half of SB3's; on an AVX2-only CPU, in float32, a SAC
    env step takes ~0.54x of SB3's (``bench/README_rl.md``). SAC, TD3 and DDPG accept it.
    Inductor builds C++ kernels on a CPU: it needs a C++ compiler (``g++``) at the first update.
    """

    saved_attributes = ("updates",)  # TD3's policy delay counts on it

    model: DeterministicActor | SquashedGaussianActor
    critic: QCritic | TwinQCritic
    critic_optimizer: torch.optim.Optimizer
    _target: Callable[..., torch.Tensor]
    """The subclass's critic target ``y`` (no gradient), from ``(rewards, terminated, next_obs,
    *what else it needs)`` and, as ``target_q``, how to evaluate the target critic (its forward
    pass when not given; the written-out update passes its own)."""

    def __init__(
        self,
        model: DeterministicActor | SquashedGaussianActor,
        fused: bool | None = None,
        autocast: torch.dtype | None = None,
        compile: bool = False,
    ) -> None:
        super().__init__(model, fused)
        if autocast not in (None, torch.bfloat16):
            # float16 would need loss scaling (small gradients underflow); bfloat16 has float32's range.
            raise ValueError(f"autocast must be None or torch.bfloat16, not {autocast!r}")
        warn_if_slow_bfloat16(autocast, model.low.device)
        self.autocast = autocast
        """The dtype of :meth:`learn`'s forward passes (``None``: float32 throughout)."""
        self.compile = bool(compile)
        """Whether :meth:`learn`'s losses run through ``torch.compile``."""
        self._compiled: dict[str, Callable[..., Any]] = {}
        self.uniform_exploration = False
        """Act uniformly at random in the bounds (warm-up)."""
        self.td_errors: np.ndarray = np.zeros(0, np.float32)
        """``y - Q(s, a)`` of the last batch learned from (first critic where there are two)."""
        self.updates = 0
        """Gradient steps taken (of the critic)."""
        self.written_out = False
        """Whether :meth:`learn` takes its update written out (:mod:`rl.algorithms.written_out`:
        gradients by :mod:`rl.backprop`, Adam by :func:`rl.fused.adam_`) rather than by autograd
        (set by each algorithm where its networks allow it, :func:`rl.algorithms.written_out.applies`;
        checked again at each update)."""

    def __getstate__(self) -> dict[str, Any]:
        # Compiled functions do not pickle; a copy compiles its own at its first update.
        state = self.__dict__.copy()
        state["_compiled"] = {}
        return state

    def _maybe_compiled(self, fn: Callable[..., Any], no_autograd: bool = False) -> Callable[..., Any]:
        """``fn`` (a loss, or a written-out update taking this algorithm first), or its
        ``torch.compile`` (built once, kept by name) when :attr:`compile` is set. Static shapes: the batch size is fixed in a training run.
        ``no_autograd``: ``fn`` runs under ``torch.no_grad`` (gradients written out), and is
        compiled with inductor's C++ wrapper, which calls its kernels without Python in between
        (~4% of a SAC step)."""
        if not self.compile:
            return fn
        compiled = self._compiled.get(fn.__name__)
        if compiled is None:
            options: dict[str, str | int | bool | Callable[..., Any]] | None = (
                {"cpp_wrapper": True} if no_autograd else None
            )
            compiled = self._compiled[fn.__name__] = torch.compile(fn, dynamic=False, options=options)
        return compiled

    def _adam_step(self, optimizer: torch.optim.Optimizer) -> None:
        """``optimizer.step()``, as :func:`rl.fused.fused_adam_step_` when :attr:`fused`."""
        if self.fused:
            fused_adam_step_(optimizer)
        else:
            optimizer.step()

    def _critic_loss(
        self, batch: ReplayBatch[torch.Tensor], *target_args: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(L, Q_1(s, a), y)`` (the last two detached, float32): the critic regressed onto the
        subclass's target ``y`` (:attr:`_target`, given ``target_args``),
        ``L = sum_i mean w (Q_i(s, a) - y)^2`` over its one or two networks."""
        with torch.no_grad(), self._mixed():
            y = self._target(batch.rewards, batch.terminated, batch.next_obs, *target_args).float()
        with self._mixed():
            q = self.critic(batch.obs, batch.actions)
            qs = q if isinstance(q, tuple) else (q,)
            loss = ops.weighted_mse(qs[0], y, batch.weights)
            for q_i in qs[1:]:
                loss = loss + ops.weighted_mse(q_i, y, batch.weights)
        return loss, qs[0].detach().float(), y

    def _critic_step(self, batch: ReplayBatch[torch.Tensor], *target_args: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """The critic's step on ``batch`` by autograd through :meth:`_critic_loss` (compiled where
        :attr:`compile` is set); returns ``(L, Q_1(s, a), y)``."""
        critic_loss, q1, y = self._maybe_compiled(self._critic_loss)(batch, *target_args)
        self.critic_optimizer.zero_grad(set_to_none=True)
        critic_loss.backward()
        self._adam_step(self.critic_optimizer)
        return critic_loss, q1, y

    @staticmethod
    @contextlib.contextmanager
    def _frozen(module: torch.nn.Module) -> Iterator[None]:
        """``module``'s trained parameters take no gradient inside (a step through a critic
        towards the actor); those frozen before stay frozen after."""
        trained = [p for p in module.parameters() if p.requires_grad]
        for p in trained:
            p.requires_grad_(False)
        try:
            yield
        finally:
            for p in trained:
                p.requires_grad_(True)

    def _mixed(self) -> contextlib.AbstractContextManager[object]:
        """The context of a forward pass in :meth:`learn`: ``torch.autocast`` to :attr:`autocast`
        on the model's device, or nothing."""
        if self.autocast is None:
            return contextlib.nullcontext()
        return torch.autocast(self.model.low.device.type, dtype=self.autocast)

    def _uniform(self, like: torch.Tensor) -> torch.Tensor:
        """Uniform actions, one row per observation in ``like``."""
        u = torch.rand(like.shape[0], self.model.action_dim)
        return self.model.low + (self.model.high - self.model.low) * u

    def _soft_update(self, target: Model, source: Model, tau: float) -> None:
        """Polyak-average the parameters (buffers such as the action bounds are constant)."""
        ops.soft_update_(list(target.parameters()), list(source.parameters()), tau, fused=self.fused)


class DeterministicOffPolicy(OffPolicyAlgorithm):
    """What DDPG and TD3 share: a deterministic actor ``mu(s)`` explored with Gaussian noise, a
    critic, target copies of both, and an Adam optimiser for each."""

    model: DeterministicActor
    _written_critic: type[QCritic] | type[TwinQCritic]
    """The critic the subclass's update is written out for (TD3: twin, DDPG: single)."""

    def __init__(
        self,
        actor: DeterministicActor,
        critic: QCritic | TwinQCritic,
        actor_lr: float,
        critic_lr: float,
        gamma: float,
        tau: float,
        exploration_noise: float,
        fused: bool | None,
        autocast: torch.dtype | None,
        compile: bool,
    ) -> None:
        super().__init__(actor, fused, autocast, compile)
        self.critic = critic
        self.target_actor, self.target_critic = frozen_copies(actor, critic)
        self.gamma = check_gamma(gamma)
        self.tau = check_tau(tau)
        self.exploration_noise = check_non_negative("exploration_noise", exploration_noise)
        """Standard deviation of the acting noise, as a fraction of the half-range of each action."""
        self.actor_optimizer = torch.optim.Adam(actor.parameters(), lr=actor_lr, fused=True)
        self.critic_optimizer = torch.optim.Adam(critic.parameters(), lr=critic_lr, fused=True)
        self.written_out = written_out.applies(self, DeterministicActor, self._written_critic)
        """Whether :meth:`learn` takes its update written out
        (:func:`rl.algorithms.written_out.deterministic_update`) rather than by autograd, as
        :attr:`rl.SAC.written_out` does: with the fast paths in float32, for the default networks
        (ReLU MLPs; TD3's fused twin critic, DDPG's :class:`rl.QCritic`) and the fused Adam
        optimisers it built."""

    def sample(self, obs: torch.Tensor) -> PolicyStep:
        """``clip(mu(s) + N(0, (sigma scale)^2), low, high)`` (uniform during warm-up)."""
        if self.uniform_exploration:
            return PolicyStep(self._uniform(obs), None, None)
        mu = self.model(obs)
        noise = torch.randn_like(mu) * (self.exploration_noise * self.model.scale)
        return PolicyStep(torch.maximum(torch.minimum(mu + noise, self.model.high), self.model.low), None, None)

    def predict(self, obs: torch.Tensor) -> torch.Tensor:
        """``mu(s)``."""
        return self.model(obs)

    def _actor_loss(self, obs: torch.Tensor) -> torch.Tensor:
        """``-mean Q_1(s, mu(s))``: the actor follows the (first) critic's gradient in action space."""
        with self._mixed():
            q = self.critic(obs, self.model(obs))
            if isinstance(q, tuple):
                q = q[0]
            return -q.float().mean()

    def _actor_step(self, obs: torch.Tensor) -> float:
        """The actor's step by autograd through :meth:`_actor_loss` (compiled where :attr:`compile`
        is set), the critic frozen; returns the loss ``J``."""
        with self._frozen(self.critic):
            loss = self._maybe_compiled(self._actor_loss)(obs)
            self.actor_optimizer.zero_grad(set_to_none=True)
            loss.backward()
        self._adam_step(self.actor_optimizer)
        return loss.item()

    def _soft_update_targets(self) -> None:
        """Both target networks one Polyak step towards the trained ones."""
        self._soft_update(self.target_critic, self.critic, self.tau)
        self._soft_update(self.target_actor, self.model, self.tau)
