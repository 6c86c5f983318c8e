"""What DDPG, TD3 and SAC share: acting in a bounded Box, uniform warm-up actions, target
networks, the TD errors that prioritised replay needs, and mixed precision for the updates."""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import torch

from rl import backprop, ops
from rl.algorithm import Algorithm, PolicyStep, check_gamma
from rl.fused import AdamTensors, FusedMLPPair, adam_, adam_tensors, fused_adam_step_
from rl.model import Model
from rl.networks import DeterministicActor, QCritic, SquashedGaussianActor, TwinQCritic
from rl.precision import warn_if_slow_bfloat16

__all__ = ["DeterministicOffPolicy", "OffPolicyAlgorithm", "check_tau", "frozen_copy", "weighted_mse"]


def frozen_copy(model: Model) -> Model:
    """A target network: a deep copy that never takes gradients."""
    target = copy.deepcopy(model)
    target.requires_grad_(False)
    return target


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


def weighted_mse(pred: torch.Tensor, target: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """``mean(w_i (pred_i - target_i)^2)``: the squared TD error, importance-weighted for
    prioritised replay (``w = 1`` for uniform replay gives the plain mean squared error)."""
    return (weights * (pred - target).pow(2)).mean()


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
    included, is one compiled function (``_update``). It computes the same maths
    (``tests/rl/test_rl_compile.py``). On a CPU with AMX, with ``autocast=torch.bfloat16``, a SAC
    or TD3 step on one core takes about half of SB3's; on an AVX2-only CPU, in float32, a SAC
    env step takes ~0.54x of SB3's (``bench/README_rl.md``). SAC, TD3 and DDPG accept it.
    Inductor builds C++ kernels on a CPU: it needs a C++ compiler (``g++``) at the first update.
    """

    saved_attributes = ("updates",)  # TD3's policy delay counts on it

    model: DeterministicActor | SquashedGaussianActor
    critic: QCritic | TwinQCritic
    critic_optimizer: torch.optim.Optimizer
    _critic_loss: Callable[..., tuple[torch.Tensor, torch.Tensor, torch.Tensor]]
    """``(L, Q_1(s, a), y)`` by autograd, of the subclass's critic loss."""
    _critic_grads: Callable[..., tuple[list[torch.Tensor], torch.Tensor, torch.Tensor, torch.Tensor]]
    """``(dL/d critic parameters, L, Q_1(s, a), y)``, the same loss's gradients written out."""

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
        """Whether :meth:`learn` writes its update out (gradients by :mod:`rl.backprop`, Adam by
        :func:`rl.fused.adam_`) rather than taking it by autograd (set by each algorithm where its
        networks allow it; checked again at each update by :meth:`_written_adams`)."""

    def __getstate__(self) -> dict[str, Any]:
        # Compiled functions do not pickle; a copy compiles its own at its first update.
        state = self.__dict__.copy()
        state["_compiled"] = {}
        return state

    def _maybe_compiled(self, fn: Callable[..., Any], no_autograd: bool = False) -> Callable[..., Any]:
        """``fn`` (a bound method computing losses or gradients), or its ``torch.compile`` (built
        once) when :attr:`compile` is set. Static shapes: the batch size is fixed in a training run.
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

    def _written_adams(self, *trained: tuple[torch.optim.Optimizer, torch.nn.Module]) -> list[AdamTensors] | None:
        """The Adam tensors of each ``(optimizer, module)`` that :meth:`learn` steps, where it takes
        its update written out; ``None`` where it takes autograd's: not :attr:`written_out`,
        ``autocast`` set after the algorithm was built, a parameter frozen since, or an optimiser
        that is no longer a fused Adam (:func:`rl.fused.adam_tensors`) of exactly that module's
        parameters. Creates the optimisers' state at the first update, as their ``step()`` would."""
        if not self.written_out or self.autocast is not None:
            return None
        params = [list(module.parameters()) for _, module in trained]
        if not all(p.requires_grad for ps in params for p in ps):
            return None
        adams = []
        for (optimizer, _), ps in zip(trained, params, strict=True):
            groups = adam_tensors(optimizer, create=True)
            if groups is None or len(groups) != 1 or len(groups[0].params) != len(ps):
                return None
            if any(p is not q for p, q in zip(ps, groups[0].params, strict=True)):
                return None
            adams.append(groups[0])
        return adams

    def _critic_step(self, *args: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The critic's step on ``args`` by autograd through :meth:`_critic_loss` (compiled where
        :attr:`compile` is set); returns ``(L, Q_1(s, a), y)``."""
        critic_loss, q1, y = self._maybe_compiled(self._critic_loss)(*args)
        self.critic_optimizer.zero_grad(set_to_none=True)
        critic_loss.backward()
        self._adam_step(self.critic_optimizer)
        return critic_loss, q1, y

    @torch.no_grad()
    def _critic_update(self, adam: AdamTensors, *args: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The critic's gradients written out (:meth:`_critic_grads`) and its Adam step on them
        (:func:`rl.fused.adam_`): the first part of each algorithm's written-out ``_update``;
        returns ``(L, Q_1(s, a), y)``. The gradients are not kept (``p.grad`` is left alone)."""
        grads, critic_loss, q1, y = self._critic_grads(*args)
        adam_(adam, grads)
        return critic_loss, q1, y

    def _regression_grads(
        self, obs: torch.Tensor, actions: torch.Tensor, y: torch.Tensor, weights: torch.Tensor
    ) -> tuple[list[torch.Tensor], torch.Tensor, torch.Tensor]:
        """``(dL/d critic parameters, L, Q_1(s, a))`` of the critic regressed onto ``y``, written
        out: ``L = sum_i mean w (Q_i(s, a) - y)^2`` over the critic's one or two networks, so
        ``dL/dQ_i = 2 w (Q_i - y) / N``."""
        x = torch.cat([obs, actions], dim=-1)
        scale = weights * (2.0 / obs.shape[0])
        critic = self.critic
        if isinstance(critic, TwinQCritic):
            assert isinstance(critic.nets, FusedMLPPair)
            q1, q2, tape = backprop.pair_forward(critic.nets, x)
            loss = weighted_mse(q1, y, weights) + weighted_mse(q2, y, weights)
            grads, _ = backprop.pair_backward(critic.nets, tape, scale * (q1 - y), scale * (q2 - y))
        else:
            assert isinstance(critic.net, torch.nn.Sequential)
            layers = backprop.mlp_layers(critic.net)
            out, tape = backprop.mlp_forward(layers, x)
            q1 = out.squeeze(-1)
            loss = weighted_mse(q1, y, weights)
            grads, _ = backprop.mlp_backward(layers, tape, (scale * (q1 - y)).unsqueeze(-1))
        assert grads is not None
        return grads, loss, q1

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
    """The critic whose gradients the subclass writes out (TD3: twin, DDPG: single)."""

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
        self.target_actor = frozen_copy(actor)
        self.target_critic = frozen_copy(critic)
        self.gamma = check_gamma(gamma)
        self.tau = check_tau(tau)
        self.exploration_noise = check_non_negative("exploration_noise", exploration_noise)
        """Standard deviation of the acting noise, as a fraction of the half-range of each action."""
        self.actor_optimizer = torch.optim.Adam(actor.parameters(), lr=actor_lr, fused=True)
        self.critic_optimizer = torch.optim.Adam(critic.parameters(), lr=critic_lr, fused=True)
        if isinstance(critic, TwinQCritic):
            critic_written = type(critic.nets) is FusedMLPPair and backprop.supports(critic.nets)
        else:
            critic_written = backprop.supports(critic.net)
        self.written_out = (
            self.fused
            and autocast is None
            and type(actor) is DeterministicActor
            and type(critic) is self._written_critic
            and backprop.supports(actor.net)
            and critic_written
            and not backprop.hooked(actor)
            and not backprop.hooked(critic)
        )
        """Whether :meth:`learn` writes its update out (:mod:`rl.backprop`, :meth:`_update`) rather
        than taking it by autograd, as :attr:`rl.SAC.written_out` does: with the fast paths in
        float32, for the default networks (ReLU MLPs; TD3's fused twin critic, DDPG's
        :class:`rl.QCritic`) and the fused Adam optimisers it built."""

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

    @torch.no_grad()
    def _actor_grads(self, obs: torch.Tensor) -> tuple[list[torch.Tensor], torch.Tensor]:
        """``(dJ/d actor parameters, J)`` of :meth:`_actor_loss` written out: with
        ``a = bias + scale tanh(out)``, ``dJ/d out = -dQ_1/da scale (1 - tanh(out)^2) / N``."""
        actor, critic = self.model, self.critic
        actor_layers = backprop.mlp_layers(actor.net)
        out, actor_tape = backprop.mlp_forward(actor_layers, obs)
        tanh_out = torch.tanh(out)
        action = actor.bias + actor.scale * tanh_out
        if isinstance(critic, TwinQCritic):
            assert isinstance(critic.nets, FusedMLPPair)
            q_layers = backprop.pair_first_layers(critic.nets)
        else:
            q_layers = backprop.mlp_layers(critic.net)
        q, q_tape = backprop.mlp_forward(q_layers, torch.cat([obs, action], dim=-1))
        _, dq = backprop.mlp_backward(
            q_layers, q_tape, torch.ones_like(q), weight_grads=False, input_grad=True, input_from=obs.shape[1]
        )
        assert dq is not None  # dQ_1 / da
        d_out = -dq * actor.scale * (1.0 - tanh_out * tanh_out) / obs.shape[0]
        grads, _ = backprop.mlp_backward(actor_layers, actor_tape, d_out)
        assert grads is not None
        return grads, -q.mean()

    def _learn_step(
        self, actor_step: bool, *args: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, float | None]:
        """A critic step on ``args`` (``obs`` first: the subclass's :meth:`_critic_loss`
        arguments), then, with ``actor_step``, an actor step on ``obs`` (the critic frozen) and the
        soft update of both targets: written out (:meth:`_update`) where
        :meth:`_written_adams` allows, else by autograd. Returns ``(L, Q_1(s, a), y, J)``, ``J``
        the actor's loss (``None`` without ``actor_step``)."""
        obs = args[0]
        adams = self._written_adams((self.critic_optimizer, self.critic), (self.actor_optimizer, self.model))
        if adams is not None:
            actor_adam = adams[1] if actor_step else None
            critic_loss, q1, y, loss = self._maybe_compiled(self._update, no_autograd=True)(adams[0], actor_adam, *args)
        else:
            critic_loss, q1, y = self._critic_step(*args)
            loss = None
            if actor_step:
                with self._frozen(self.critic):
                    loss = self._maybe_compiled(self._actor_loss)(obs)
                    self.actor_optimizer.zero_grad(set_to_none=True)
                    loss.backward()
                self._adam_step(self.actor_optimizer)
                self._soft_update_targets()
        return critic_loss, q1, y, None if loss is None else loss.item()

    @torch.no_grad()
    def _update(
        self, critic_adam: AdamTensors, actor_adam: AdamTensors | None, *args: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor | None]:
        """The update written out, in one function for ``torch.compile``: the critic's step
        (:meth:`_critic_update`), then, where ``actor_adam`` is given, the actor's gradients
        (:meth:`_actor_grads`, through the critic as that step left it), its Adam step and the
        targets' soft update. Returns ``(L, Q_1(s, a), y, J)`` (``J`` ``None`` without an actor step)."""
        critic_loss, q1, y = self._critic_update(critic_adam, *args)
        loss = None
        if actor_adam is not None:
            grads, loss = self._actor_grads(args[0])
            adam_(actor_adam, grads)
            self._soft_update_targets()
        return critic_loss, q1, y, loss

    def _soft_update_targets(self) -> None:
        """Both target networks one Polyak step towards the trained ones."""
        self._soft_update(self.target_critic, self.critic, self.tau)
        self._soft_update(self.target_actor, self.model, self.tau)
