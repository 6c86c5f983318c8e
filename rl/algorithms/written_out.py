"""SAC's, TD3's and DDPG's updates written out: the fast path of their :meth:`learn`.

Each algorithm's update reads in its own module, by autograd (``rl/algorithms/sac.py``, ``td3.py``,
``ddpg.py``). Here the same steps take their gradients from :mod:`rl.backprop` (forward and
backward passes of ReLU MLPs and of the fused twin critic, by hand) and their Adam steps from
:func:`rl.fused.adam_`, the whole update one function (:func:`_sac_update`,
:func:`_deterministic_update`) that ``compile=True`` hands to ``torch.compile`` as one graph. The
critic targets are the algorithms' own (``_target``), with the target critic's forward pass
written out too. The results equal the autograd updates' to float rounding
(``tests/rl/test_rl_written_out.py``); a HalfCheetah SAC step is faster this way
(``bench/README_rl.md``).

An algorithm takes this path where :func:`applies` said so when it was built (``written_out``:
the fast paths on, float32, its default networks, nothing hooked) and, at each update, where the
optimisers are still the fused Adams it built over parameters all trained (:func:`_adams`); else
:func:`sac_update` and :func:`deterministic_update` return ``None`` and it takes the autograd
update. ``p.grad`` is not set on this path.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch
from torch import nn

from rl import backprop
from rl.fused import AdamTensors, FusedMLPPair, adam_, adam_tensors
from rl.networks import QCritic, TwinQCritic
from rl.ops import weighted_mse
from rl.replay import ReplayBatch

if TYPE_CHECKING:
    from rl.algorithms._off_policy import DeterministicOffPolicy, OffPolicyAlgorithm
    from rl.algorithms.sac import SAC

__all__ = ["applies", "deterministic_update", "regression_grads", "sac_update"]


def applies(algo: OffPolicyAlgorithm, actor_type: type[nn.Module], critic_type: type[nn.Module]) -> bool:
    """Whether ``algo``'s update can be written out: with its fast paths on (``fused``), in
    float32 (no ``autocast``), for the networks it writes out (an actor of exactly ``actor_type``
    and a critic of exactly ``critic_type``, ReLU MLPs; a twin critic fused), nothing hooked."""
    actor, critic = algo.model, algo.critic
    if type(actor) is not actor_type or type(critic) is not critic_type:
        return False  # another network (a PARL model's view, say) has no .net to write out
    if isinstance(critic, TwinQCritic):
        critic_net: nn.Module = critic.nets
        fused_pair = type(critic_net) is FusedMLPPair
    else:
        critic_net, fused_pair = critic.net, True
    return (
        algo.fused
        and algo.autocast is None
        and type(actor) is actor_type
        and type(critic) is critic_type
        and fused_pair
        and backprop.supports(actor.net)
        and backprop.supports(critic_net)
        and not backprop.hooked(actor)
        and not backprop.hooked(critic)
    )


def _adams(algo: OffPolicyAlgorithm, *trained: tuple[torch.optim.Optimizer, nn.Module]) -> list[AdamTensors] | None:
    """The Adam tensors of each ``(optimizer, module)`` the update steps, where it is written out;
    ``None`` where it takes autograd's: not ``written_out``, ``autocast`` set after the algorithm
    was built, a parameter frozen since, or an optimiser that is no longer a fused Adam
    (:func:`rl.fused.adam_tensors`) of exactly that module's parameters. Creates the optimisers'
    state at the first update, as their ``step()`` would."""
    if not algo.written_out or algo.autocast is not None:
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


def _twin_q(critic: nn.Module) -> Callable[[torch.Tensor, torch.Tensor], tuple[torch.Tensor, torch.Tensor]]:
    """A fused twin ``critic``'s forward pass (``(Q_1(s, a), Q_2(s, a))``, ``[B]`` each) written out."""
    assert isinstance(critic, TwinQCritic) and isinstance(critic.nets, FusedMLPPair)
    pair = critic.nets

    def forward(obs: torch.Tensor, action: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        q1, q2, _ = backprop.pair_forward(pair, torch.cat([obs, action], dim=-1))
        return q1, q2

    return forward


def _target_q(critic: nn.Module) -> Callable[..., Any] | None:
    """How the written-out update evaluates a target critic: a twin one written out, a single
    one by its own forward pass (``None``)."""
    return _twin_q(critic) if isinstance(critic, TwinQCritic) else None


def regression_grads(
    critic: QCritic | TwinQCritic, batch: ReplayBatch[torch.Tensor], y: torch.Tensor
) -> tuple[list[torch.Tensor], torch.Tensor, torch.Tensor]:
    """``(dL/d critic parameters, L, Q_1(s, a))`` of the critic regressed onto ``y`` on ``batch``,
    written out: ``L = sum_i mean w (Q_i(s, a) - y)^2`` over the critic's one or two networks, so
    ``dL/dQ_i = 2 w (Q_i - y) / N``."""
    weights = batch.weights
    x = torch.cat([batch.obs, batch.actions], dim=-1)
    scale = weights * (2.0 / x.shape[0])
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


# -- SAC ----------------------------------------------------------------------------------------


def sac_update(
    algo: SAC,
    batch: ReplayBatch[torch.Tensor],
    alpha: torch.Tensor,
    critic_noise: torch.Tensor,
    actor_noise: torch.Tensor,
) -> tuple[torch.Tensor, ...] | None:
    """SAC's update written out, where it applies (else ``None``): ``(J_Q, Q_1(s, a), y, J_pi,
    J(alpha), log pi(a~|s))`` as :meth:`rl.SAC.learn`'s autograd update returns them."""
    trained: list[tuple[torch.optim.Optimizer, nn.Module]] = [
        (algo.critic_optimizer, algo.critic),
        (algo.actor_optimizer, algo.model),
    ]
    if algo.autotune_alpha:
        trained.append((algo.alpha_optimizer, algo.temperature))
    adams = _adams(algo, *trained)
    if adams is None:
        return None
    alpha_adam = adams[2] if algo.autotune_alpha else None
    update = algo._maybe_compiled(_sac_update, no_autograd=True)
    return update(algo, adams[0], adams[1], alpha_adam, batch, alpha, critic_noise, actor_noise)


@torch.no_grad()
def _sac_update(
    algo: SAC,
    critic_adam: AdamTensors,
    actor_adam: AdamTensors,
    alpha_adam: AdamTensors | None,
    batch: ReplayBatch[torch.Tensor],
    alpha: torch.Tensor,
    critic_noise: torch.Tensor,
    actor_noise: torch.Tensor,
) -> tuple[torch.Tensor, ...]:
    """The whole update, in one function for ``torch.compile``: the critics' step, then the
    actor's, the temperature's (where ``alpha_adam`` is given: automatic temperature, with
    ``dJ(alpha)/dlog alpha = -mean(log pi + H_target)``) and the target critics' with the critics
    as their step left them."""
    target_q = _twin_q(algo.target_critic)
    y = algo._target(batch.rewards, batch.terminated, batch.next_obs, alpha, critic_noise, target_q=target_q)
    grads, critic_loss, q1 = regression_grads(algo.critic, batch, y)
    adam_(critic_adam, grads)
    grads, actor_loss, log_prob = _sac_actor_grads(algo, batch.obs, alpha, actor_noise)
    adam_(actor_adam, grads)
    alpha_loss = torch.zeros(())
    if alpha_adam is not None:
        target_gap = (log_prob + algo.target_entropy).mean()
        alpha_loss = -(algo.temperature.log_alpha * target_gap)  # before its step
        adam_(alpha_adam, [-target_gap])
    algo._soft_update(algo.target_critic, algo.critic, algo.tau)
    return critic_loss, q1, y, actor_loss, alpha_loss, log_prob


def _sac_actor_grads(
    algo: SAC, obs: torch.Tensor, alpha: torch.Tensor, noise: torch.Tensor
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
    pair = algo.critic.nets
    assert isinstance(pair, FusedMLPPair)
    actor = algo.model
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


# -- DDPG and TD3 -------------------------------------------------------------------------------


def deterministic_update(
    algo: DeterministicOffPolicy, actor_step: bool, batch: ReplayBatch[torch.Tensor], *target_args: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, float | None] | None:
    """DDPG's or TD3's update written out, where it applies (else ``None``): the critic's step
    onto the algorithm's target (``target_args``: what its ``_target`` takes beyond the batch),
    and with ``actor_step`` the actor's and the targets'. Returns ``(L, Q_1(s, a), y, J)`` (``J``
    ``None`` without an actor step), as the autograd update does."""
    adams = _adams(algo, (algo.critic_optimizer, algo.critic), (algo.actor_optimizer, algo.model))
    if adams is None:
        return None
    actor_adam = adams[1] if actor_step else None
    update = algo._maybe_compiled(_deterministic_update, no_autograd=True)
    critic_loss, q1, y, actor_loss = update(algo, adams[0], actor_adam, batch, *target_args)
    return critic_loss, q1, y, None if actor_loss is None else actor_loss.item()


@torch.no_grad()
def _deterministic_update(
    algo: DeterministicOffPolicy,
    critic_adam: AdamTensors,
    actor_adam: AdamTensors | None,
    batch: ReplayBatch[torch.Tensor],
    *target_args: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """The whole update, in one function for ``torch.compile``: the critic's step, then, where
    ``actor_adam`` is given, the actor's (through the critic as that step left it) and the
    targets' soft update."""
    target_q = _target_q(algo.target_critic)
    y = algo._target(batch.rewards, batch.terminated, batch.next_obs, *target_args, target_q=target_q)
    grads, critic_loss, q1 = regression_grads(algo.critic, batch, y)
    adam_(critic_adam, grads)
    actor_loss = None
    if actor_adam is not None:
        grads, actor_loss = _deterministic_actor_grads(algo, batch.obs)
        adam_(actor_adam, grads)
        algo._soft_update_targets()
    return critic_loss, q1, y, actor_loss


def _deterministic_actor_grads(
    algo: DeterministicOffPolicy, obs: torch.Tensor
) -> tuple[list[torch.Tensor], torch.Tensor]:
    """``(dJ/d actor parameters, J)`` of ``J = -mean Q_1(s, mu(s))`` written out: with
    ``a = bias + scale tanh(out)``, ``dJ/d out = -dQ_1/da scale (1 - tanh(out)^2) / N`` (only
    the first network of a twin critic: its input gradient towards the action)."""
    actor, critic = algo.model, algo.critic
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
