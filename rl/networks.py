"""Networks: an actor-critic (policy and value MLPs, by default in one pass), a Q-network for discrete
actions, and the actors and critics of continuous-action off-policy methods (DDPG, TD3, SAC): a
deterministic actor, a squashed-Gaussian actor, a Q critic and twin Q critics. Their base class,
:class:`rl.model.Model`, is in ``rl/model.py``."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from rl import distributions, ops
from rl.fused import FusedMLPPair, MLPPair, ReLU, SigmoidTanh, resolve_fused
from rl.model import Model
from rl.precision import OutputLinear

__all__ = [
    "ActorCritic",
    "ActorCriticModel",
    "CentralisedCritic",
    "DeterministicActor",
    "MADDPGActor",
    "MLPPolicy",
    "QCritic",
    "QNetwork",
    "SquashedGaussianActor",
    "TwinQCritic",
    "mlp",
    "mlp_pair",
]


def mlp(
    in_dim: int,
    hidden: Sequence[int],
    out_dim: int,
    activation: type[nn.Module] = nn.Tanh,
    out_gain: float = 1.0,
) -> nn.Sequential:
    """``Linear -> activation`` for each hidden size, then a linear output layer (an
    :class:`rl.precision.OutputLinear`: float32 even inside ``torch.autocast``).

    Orthogonal initialisation (gain sqrt(2) in hidden layers, ``out_gain`` at the output) as in
    the PPO implementations that work (Engstrom et al. 2020, "Implementation Matters").
    """
    layers: list[nn.Module] = []
    last = in_dim
    for h in hidden:
        lin = nn.Linear(last, h)
        nn.init.orthogonal_(lin.weight, gain=float(np.sqrt(2)))
        nn.init.zeros_(lin.bias)
        layers += [lin, activation()]
        last = h
    out = OutputLinear(last, out_dim)  # float32 even in a mixed-precision update
    nn.init.orthogonal_(out.weight, gain=out_gain)
    nn.init.zeros_(out.bias)
    layers.append(out)
    return nn.Sequential(*layers)


def _flat_dim(space: gym.Space) -> int:
    """The size of an observation (or action) as a flat vector; a space that is not an array of
    numbers is refused with what to do about it."""
    if isinstance(space, gym.spaces.Discrete):
        raise TypeError(
            f"{space} holds indices, not vectors: for observations, one-hot them with "
            "gymnasium.wrappers.FlattenObservation (in env_fn)"
        )
    if isinstance(space, (gym.spaces.Dict, gym.spaces.Tuple)):
        raise TypeError(
            f"{type(space).__name__} observations: flatten them with gymnasium.wrappers.FlattenObservation "
            "(in env_fn); for goal-conditioned envs see rl.her"
        )
    if space.shape is None:
        raise TypeError(f"{space} has no fixed shape: the networks need a Box")
    return int(np.prod(space.shape))


def mlp_pair(
    in_dim: int,
    hidden: Sequence[int],
    out_a: int,
    out_b: int,
    activation: type[nn.Module],
    gain_a: float = 1.0,
    gain_b: float = 1.0,
    *,
    fused: bool,
) -> FusedMLPPair | MLPPair:
    """Two MLPs over the same input, ``(a, b) = pair(x)``: a :class:`rl.fused.FusedMLPPair` (one
    pass) or its plain version, a :class:`rl.fused.MLPPair` of two :func:`mlp` networks."""
    if fused:
        return FusedMLPPair(in_dim, hidden, out_a, out_b, activation, gain_a=gain_a, gain_b=gain_b)
    return MLPPair(
        mlp(in_dim, hidden, out_a, activation, out_gain=gain_a), mlp(in_dim, hidden, out_b, activation, out_gain=gain_b)
    )


class ActorCriticModel(Model):
    """What PolicyGradient, A2C, PPO and IMPALA need of a model: a stochastic policy and a state
    value over the same observations. Implemented by :class:`ActorCritic` (MLPs) and
    :class:`rl.atari.ConvActorCritic` (Atari frames)."""

    def act(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Sample actions; return ``(action, log_prob, value)`` for a batch of observations."""
        raise NotImplementedError

    def greedy(self, obs: torch.Tensor) -> torch.Tensor:
        """Most likely action."""
        raise NotImplementedError

    def value(self, obs: torch.Tensor) -> torch.Tensor:
        """``V(obs)`` (observation dims removed)."""
        raise NotImplementedError

    def evaluate(self, obs: torch.Tensor, action: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(log pi(action|obs), entropy, V(obs))`` with gradients, for any leading dims."""
        raise NotImplementedError


class ActorCritic(ActorCriticModel):
    """Separate policy and value MLPs over flat observations.

    Discrete action spaces get a categorical head (logits); ``Box`` action spaces get a diagonal
    Gaussian whose ``log_std`` is a state-independent parameter. Used by PolicyGradient, A2C, PPO
    and IMPALA.

    ``fused`` (``None``: :func:`rl.fused.enabled`) evaluates the two MLPs in one pass
    (:class:`rl.fused.FusedMLPPair`) with tanh as :class:`rl.fused.SigmoidTanh`; unfused, they are
    a :class:`rl.fused.MLPPair` with ``nn.Tanh`` (the same maths; the weights are named differently).
    ``activation`` (``None``: that tanh) overrides the activation either way.
    """

    def __init__(
        self,
        observation_space: gym.Space,
        action_space: gym.Space,
        hidden: Sequence[int] = (64, 64),
        activation: type[nn.Module] | None = None,
        log_std_init: float = 0.0,
        fused: bool | None = None,
    ) -> None:
        super().__init__()
        self.fused = resolve_fused(fused)
        if activation is None:
            activation = SigmoidTanh if self.fused else nn.Tanh
        obs_dim = _flat_dim(observation_space)
        self.continuous = isinstance(action_space, gym.spaces.Box)
        if self.continuous:
            act_dim = _flat_dim(action_space)
            self.log_std = nn.Parameter(torch.full((act_dim,), float(log_std_init)))
        elif isinstance(action_space, gym.spaces.Discrete):
            act_dim = int(action_space.n)
        else:
            raise TypeError(f"ActorCritic: unsupported action space {action_space}")
        self.nets = mlp_pair(obs_dim, hidden, act_dim, 1, activation, gain_a=0.01, gain_b=1.0, fused=self.fused)
        """Network a: the policy (logits or Gaussian mean); network b: the value."""

    def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(policy output, V(obs))``: logits or Gaussian mean ``[..., act]``, value ``[...]``."""
        out, value = self.nets(obs)
        return out, value.squeeze(-1)

    def act(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Sample actions; return ``(action, log_prob, value)`` for a batch ``[B, obs_dim]``."""
        out, value = self(obs)
        if self.continuous:
            action, log_prob = distributions.gaussian_sample(out, self.log_std)
        else:
            action, log_prob = distributions.categorical_sample(out)
        return action, log_prob, value

    def greedy(self, obs: torch.Tensor) -> torch.Tensor:
        """Most likely action (argmax, or the Gaussian mean)."""
        out, _ = self(obs)
        return out if self.continuous else out.argmax(-1)

    def value(self, obs: torch.Tensor) -> torch.Tensor:
        """``V(obs)``, shape ``[...]`` (observation dims removed)."""
        return self(obs)[1]

    def evaluate(self, obs: torch.Tensor, action: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(log pi(action|obs), entropy, V(obs))`` with gradients, for any leading dims."""
        out, value = self(obs)
        if self.continuous:
            log_prob = distributions.gaussian_log_prob(out, self.log_std, action)
            entropy = distributions.gaussian_entropy(self.log_std).expand(log_prob.shape)
        else:
            log_prob, entropy = distributions.categorical_log_prob_entropy(out, action)
        return log_prob, entropy, value


class QNetwork(Model):
    """``Q(s, .)`` for a discrete action space: an MLP from flat observations to one value per action."""

    def __init__(
        self,
        observation_space: gym.Space,
        action_space: gym.Space,
        hidden: Sequence[int] = (256, 256),
        activation: type[nn.Module] = ReLU,
    ) -> None:
        super().__init__()
        if not isinstance(action_space, gym.spaces.Discrete):
            raise TypeError(f"QNetwork needs a Discrete action space, got {action_space}")
        self.num_actions = int(action_space.n)
        self.q_net = mlp(_flat_dim(observation_space), hidden, self.num_actions, activation)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        """Q-values ``[B, num_actions]``."""
        return self.q_net(obs)


def _box(action_space: gym.Space, who: str) -> gym.spaces.Box:
    if (
        not isinstance(action_space, gym.spaces.Box)
        or not np.all(np.isfinite(action_space.low))
        or not np.all(np.isfinite(action_space.high))
    ):
        raise TypeError(f"{who} needs a bounded Box action space, got {action_space}")
    return action_space


class _BoundedActor(Model):
    """Holds the action bounds as buffers: ``low``, ``high``, ``scale = (high - low) / 2``, ``bias``."""

    low: torch.Tensor
    high: torch.Tensor
    scale: torch.Tensor
    bias: torch.Tensor

    def __init__(self, action_space: gym.Space, who: str) -> None:
        super().__init__()
        box = _box(action_space, who)
        low = torch.as_tensor(box.low, dtype=torch.float32).flatten()
        high = torch.as_tensor(box.high, dtype=torch.float32).flatten()
        self.register_buffer("low", low)
        self.register_buffer("high", high)
        self.register_buffer("scale", (high - low) / 2)
        self.register_buffer("bias", (high + low) / 2)
        self.action_dim = int(low.numel())

    def _load_from_state_dict(
        self,
        state_dict: dict[str, Any],
        prefix: str,
        local_metadata: dict[str, Any],
        strict: bool,
        missing_keys: list[str],
        unexpected_keys: list[str],
        error_msgs: list[str],
    ) -> None:
        """Weights saved for other action bounds are refused (they would act outside these)."""
        for name in ("low", "high"):
            saved, own = state_dict.get(prefix + name), getattr(self, name)
            if isinstance(saved, torch.Tensor) and saved.shape == own.shape and not torch.equal(saved, own):
                error_msgs.append(
                    f"{prefix}{name}: saved for action bounds {saved.tolist()}, this actor's are {own.tolist()} "
                    "(the checkpoint is another environment's)"
                )
        super()._load_from_state_dict(
            state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys, error_msgs
        )


class DeterministicActor(_BoundedActor):
    """``mu(s) = bias + scale * tanh(mlp(s))``: a deterministic policy inside the action bounds (DDPG, TD3)."""

    def __init__(
        self,
        observation_space: gym.Space,
        action_space: gym.Space,
        hidden: Sequence[int] = (256, 256),
        activation: type[nn.Module] = ReLU,
    ) -> None:
        super().__init__(action_space, "DeterministicActor")
        self.net = mlp(_flat_dim(observation_space), hidden, self.action_dim, activation)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        """Actions ``[B, act]``."""
        return self.bias + self.scale * torch.tanh(self.net(obs))


class SquashedGaussianActor(_BoundedActor):
    """SAC's policy: ``a = bias + scale * tanh(u)``, ``u ~ N(mean(s), std(s)^2)`` (diagonal).

    ``log_std`` is squashed into ``[log_std_min, log_std_max]`` by a tanh, so it is bounded but
    keeps a gradient everywhere. The log-density includes the tanh correction
    (:func:`rl.ops.tanh_gaussian_log_prob`) and the constant ``-sum log scale`` of the affine map.
    """

    def __init__(
        self,
        observation_space: gym.Space,
        action_space: gym.Space,
        hidden: Sequence[int] = (256, 256),
        activation: type[nn.Module] = ReLU,
        log_std_min: float = -5.0,
        log_std_max: float = 2.0,
    ) -> None:
        super().__init__(action_space, "SquashedGaussianActor")
        self.net = mlp(_flat_dim(observation_space), hidden, 2 * self.action_dim, activation)
        self.log_std_min = log_std_min
        self.log_std_max = log_std_max

    def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(mean, log_std)`` of the pre-squash Gaussian, each ``[B, act]``."""
        return self.head(self.net(obs))

    def head(self, out: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(mean, log_std)`` from the network's output ``[B, 2 act]`` (``mean``, then the raw ``log_std``)."""
        mean, raw = out.chunk(2, dim=-1)
        lo, hi = self.log_std_min, self.log_std_max
        log_std = lo + 0.5 * (hi - lo) * (torch.tanh(raw) + 1.0)
        return mean, log_std

    def sample(self, obs: torch.Tensor, noise: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """Reparameterised sample ``(a, log pi(a|s))``: differentiable in the actor's weights.

        ``noise``: the standard normal draw ``eps`` of ``u = mean + std eps``, ``[B, act]``
        (default: drawn here, ``torch.randn_like(mean)``)."""
        mean, log_std = self(obs)
        if noise is None:
            noise = torch.randn_like(mean)
        action, log_prob, _ = self.reparameterised(mean, log_std, noise)
        return action, log_prob

    def reparameterised(
        self, mean: torch.Tensor, log_std: torch.Tensor, noise: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(a, log pi(a|s), u)`` of the sample ``u = mean + exp(log_std) noise``, ``a = bias + scale tanh(u)``."""
        u = mean + noise * log_std.exp()
        log_prob = ops.tanh_gaussian_log_prob(u, mean, log_std) - torch.log(self.scale).sum()
        return self.bias + self.scale * torch.tanh(u), log_prob, u

    def greedy(self, obs: torch.Tensor) -> torch.Tensor:
        """The squashed mean: the action to evaluate with."""
        mean, _ = self(obs)
        return self.bias + self.scale * torch.tanh(mean)


class QCritic(Model):
    """``Q(s, a)``: an MLP over ``concat(obs, action)``, one value per row."""

    def __init__(
        self,
        observation_space: gym.Space,
        action_space: gym.Space,
        hidden: Sequence[int] = (256, 256),
        activation: type[nn.Module] = ReLU,
    ) -> None:
        super().__init__()
        self.net = mlp(_flat_dim(observation_space) + _flat_dim(action_space), hidden, 1, activation)

    def forward(self, obs: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        """``Q(obs, action)``, shape ``[B]``."""
        return self.net(torch.cat([obs, action], dim=-1)).squeeze(-1)


class TwinQCritic(Model):
    """Two independent ``Q(s, a)`` networks (TD3 and SAC's clipped double Q).

    ``fused`` (``None``: :func:`rl.fused.enabled`): in one pass (:class:`rl.fused.FusedMLPPair`),
    or as two plain MLPs (:class:`rl.fused.MLPPair`).
    """

    def __init__(
        self,
        observation_space: gym.Space,
        action_space: gym.Space,
        hidden: Sequence[int] = (256, 256),
        activation: type[nn.Module] = ReLU,
        fused: bool | None = None,
    ) -> None:
        super().__init__()
        self.fused = resolve_fused(fused)
        in_dim = _flat_dim(observation_space) + _flat_dim(action_space)
        self.nets = mlp_pair(in_dim, hidden, 1, 1, activation, fused=self.fused)

    def forward(self, obs: torch.Tensor, action: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(Q1(obs, action), Q2(obs, action))``, each ``[B]``."""
        q1, q2 = self.nets(torch.cat([obs, action], dim=-1))
        return q1.squeeze(-1), q2.squeeze(-1)


class MADDPGActor(Model):
    """An agent's policy in MADDPG, on its own observation: the logits of a discrete action
    ``[B, act]`` (relaxed by the Gumbel-softmax), or ``(mean, log_std)`` of a continuous one
    squashed by a tanh (:meth:`rl.MADDPG.sample`). ReLU MLP, 64 x 64 as in the paper."""

    def __init__(self, obs_dim: int, act_dim: int, hidden: Sequence[int] = (64, 64), continuous: bool = False) -> None:
        super().__init__()
        self.continuous = continuous
        self.net = mlp(obs_dim, hidden, 2 * act_dim if continuous else act_dim, nn.ReLU)

    def forward(self, obs: torch.Tensor) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
        out = self.net(obs)
        if self.continuous:
            mean, log_std = out.chunk(2, dim=-1)
            return mean, log_std
        return out


class CentralisedCritic(Model):
    """MADDPG's critic ``Q_i(x, a_1, ..., a_N)``: a ReLU MLP over every agent's observation and
    action, one value per row ``[B]``."""

    def __init__(self, in_dim: int, hidden: Sequence[int] = (64, 64)) -> None:
        super().__init__()
        self.net = mlp(in_dim, hidden, 1, nn.ReLU)

    def forward(self, obs: Sequence[torch.Tensor], actions: Sequence[torch.Tensor]) -> torch.Tensor:
        return self.net(torch.cat([*obs, *actions], dim=-1)).squeeze(-1)


class MLPPolicy(Model):
    """A deterministic MLP policy for evolution strategies: ``argmax`` of logits for a Discrete
    action space, ``bias + scale * tanh(out)`` inside a bounded Box.

    :meth:`batched_forward` evaluates ``K`` different parameter vectors (rows of a flat
    ``[K, d]`` matrix, in the order of :meth:`flat_parameters`) on ``K`` observations in one pass
    of batched matmuls: one call per time step for a whole ES population.
    """

    scale: torch.Tensor
    bias: torch.Tensor

    def __init__(
        self,
        observation_space: gym.Space,
        action_space: gym.Space,
        hidden: Sequence[int] = (32,),
    ) -> None:
        super().__init__()
        self.discrete = isinstance(action_space, gym.spaces.Discrete)
        if isinstance(action_space, gym.spaces.Discrete):
            out = int(action_space.n)
            scale, bias = torch.ones(out), torch.zeros(out)
        else:
            box = _box(action_space, "MLPPolicy")
            low = torch.as_tensor(box.low, dtype=torch.float32).flatten()
            high = torch.as_tensor(box.high, dtype=torch.float32).flatten()
            out, scale, bias = int(low.numel()), (high - low) / 2, (high + low) / 2
        self.register_buffer("scale", scale)
        self.register_buffer("bias", bias)
        self.sizes = [_flat_dim(observation_space), *(int(h) for h in hidden), out]
        layers = [nn.Linear(a, b) for a, b in itertools.pairwise(self.sizes)]
        for layer in layers:  # small, scale-free initial weights: an ES starts near zero
            nn.init.normal_(layer.weight, std=1.0 / np.sqrt(layer.in_features))
            nn.init.zeros_(layer.bias)
        self.layers = nn.ModuleList(layers)

    def _head(self, out: torch.Tensor) -> torch.Tensor:
        return out.argmax(-1) if self.discrete else self.bias + self.scale * torch.tanh(out)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        """Actions for a batch of observations ``[B, obs]``, with this model's own parameters."""
        h = obs.reshape(obs.shape[0], -1)
        for i, layer in enumerate(self.layers):
            h = layer(h)
            if i < len(self.layers) - 1:
                h = torch.tanh(h)
        return self._head(h)

    @property
    def num_parameters(self) -> int:
        """``d``: the length of the flat parameter vector."""
        return sum(p.numel() for p in self.parameters())

    def flat_parameters(self) -> torch.Tensor:
        """All parameters as one vector ``[d]`` (weights then bias, layer by layer)."""
        return torch.nn.utils.parameters_to_vector(self.parameters()).detach()

    def set_flat_parameters(self, flat: torch.Tensor) -> None:
        """Load a vector produced by :meth:`flat_parameters`."""
        with torch.no_grad():
            torch.nn.utils.vector_to_parameters(torch.as_tensor(flat, dtype=torch.float32), self.parameters())

    def batched_forward(self, flat: torch.Tensor, obs: torch.Tensor) -> torch.Tensor:
        """Row ``k`` of the result is the action of parameters ``flat[k]`` on ``obs[k]``."""
        k = flat.shape[0]
        h = obs.reshape(k, 1, -1)
        offset = 0
        for i, (a, b) in enumerate(itertools.pairwise(self.sizes)):
            w = flat[:, offset : offset + a * b].reshape(k, b, a)
            offset += a * b
            bias = flat[:, offset : offset + b].reshape(k, 1, b)
            offset += b
            h = torch.baddbmm(bias, h, w.transpose(1, 2))
            if i < len(self.sizes) - 2:
                h = torch.tanh(h)
        return self._head(h.squeeze(1))
