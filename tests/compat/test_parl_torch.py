"""PARL's torch API on ``rl`` (``actorrt.compat.parl``'s ``Model``, ``Algorithm``, ``Agent`` and
``algorithms``): each algorithm's PARL-facing contract (constructor, ``learn``'s return values,
``predict``/``sample`` shapes, ``sync_target``) and its update against a slow reference of PARL's
maths, written out here from PARL's documented formulas."""

from __future__ import annotations

import copy
import math
import subprocess
import sys
from pathlib import Path
from typing import Any, cast

import gymnasium as gym
import numpy as np
import pytest
import torch
from torch import nn
from torch.distributions import Categorical, Normal

import actorrt.compat.parl as parl
import rl
from actorrt.compat.parl import algorithms
from actorrt.compat.parl.core.torch import Agent, Algorithm, Model
from tests.compat import parl_models as models
from tests.compat.parl_models import ACT, OBS

B = 16


def _close(a: nn.Module, b: nn.Module, rtol: float = 1e-5, atol: float = 1e-6) -> None:
    for (name, x), y in zip(a.state_dict().items(), b.state_dict().values(), strict=True):
        torch.testing.assert_close(x, y, rtol=rtol, atol=atol, msg=name)


def _batch(seed: int = 0) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return {
        "obs": torch.randn(B, OBS, generator=g),
        "action": torch.rand(B, ACT, generator=g) * 2 - 1,
        "reward": torch.randn(B, 1, generator=g),
        "next_obs": torch.randn(B, OBS, generator=g),
        "terminal": (torch.rand(B, 1, generator=g) < 0.3).float(),
    }


# -- parl.Model, parl.Algorithm, parl.Agent ------------------------------------------------------


def test_the_names_resolve_lazily_to_the_torch_api() -> None:
    assert parl.Model is Model and parl.Algorithm is Algorithm and parl.Agent is Agent
    assert parl.algorithms is algorithms and parl.algorithms.SAC is algorithms.SAC
    assert issubclass(Model, rl.Model) and issubclass(Model, nn.Module)


def test_importing_the_compat_layer_does_not_import_torch() -> None:
    code = "import sys, actorrt.compat.parl as p; assert 'torch' not in sys.modules and 'rl' not in sys.modules; p.Model; assert 'torch' in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


def test_unknown_and_left_out_names_say_so() -> None:
    with pytest.raises(AttributeError, match=r"parl\.nonesuch .*docs/parl\.md"):
        _ = parl.nonesuch
    with pytest.raises(AttributeError, match=r"QMIX is not carried: .*StarCraft.*docs/parl\.md"):
        _ = parl.algorithms.QMIX
    with pytest.raises(AttributeError, match=r"Sac is none of .*SAC"):
        _ = parl.algorithms.Sac


def test_sync_weights_to_is_parls_soft_update_of_parameters() -> None:
    torch.manual_seed(0)
    model, target = models.Gaussian(), models.Gaussian()
    target.register_buffer("count", torch.tensor(7.0))
    model.register_buffer("count", torch.tensor(1.0))
    before = copy.deepcopy(target)
    model.sync_weights_to(target, decay=0.3)
    for (name, t), b, m in zip(target.named_parameters(), before.parameters(), model.parameters(), strict=True):
        torch.testing.assert_close(t, 0.3 * b + 0.7 * m, msg=name)
    assert float(target.get_buffer("count")) == 7.0  # buffers are left alone, as in PARL
    model.sync_weights_to(target)  # decay 0: a copy
    for t, m in zip(target.parameters(), model.parameters(), strict=True):
        assert torch.equal(t, m)


@pytest.mark.parametrize(
    ("target", "error", "message"),
    [
        ("self", ValueError, "itself"),
        ("other_class", TypeError, "Logits.*Gaussian"),
        ("not_a_model", TypeError, "parl.Model"),
    ],
)
def test_sync_weights_to_refuses_what_it_cannot_do(target: str, error: type[Exception], message: str) -> None:
    model = models.Gaussian()
    other: Any = {"self": model, "other_class": models.Logits(), "not_a_model": nn.Linear(2, 2)}[target]
    with pytest.raises(error, match=message):
        model.sync_weights_to(other)
    with pytest.raises(ValueError, match="decay"):
        model.sync_weights_to(models.Gaussian(), decay=1.5)


def test_weights_travel_as_numpy_and_deepcopy_copies() -> None:
    a, b = models.QValues(), models.QValues()
    weights = a.get_weights()
    assert all(isinstance(w, np.ndarray) for w in weights.values())
    b.set_weights(weights)
    _close(a, b, 0, 0)
    c = copy.deepcopy(a)
    assert all(x is not y for x, y in zip(a.parameters(), c.parameters(), strict=True))
    alg = algorithms.DQN(a, gamma=0.9, lr=1e-3)
    assert set(alg.get_weights()) == set(weights)  # the model's only, not the target's
    alg.set_weights(models.QValues().get_weights())


def test_algorithm_and_agent_want_their_kind() -> None:
    not_a_model: Any = nn.Linear(2, 2)
    with pytest.raises(TypeError, match=r"parl\.Model"):
        Algorithm(not_a_model)
    with pytest.raises(TypeError, match=r"parl\.Algorithm"):
        Agent(not_a_model)
    with pytest.raises(TypeError, match="no method policy_and_value"):
        algorithms.A2C(models.Gaussian(), {"learning_rate": 1e-3, "vf_loss_coeff": 0.5})
    with pytest.raises(TypeError, match="gamma must be a float"):
        algorithms.DQN(models.QValues(), gamma=None, lr=1e-3)
    with pytest.raises(NotImplementedError):
        Agent(Algorithm(models.QValues())).learn()


def test_agent_saves_and_restores_the_models_state(tmp_path: Path) -> None:
    agent = Agent(algorithms.DQN(models.QValues(), gamma=0.9, lr=1e-3))
    path = tmp_path / "deep" / "folder" / "model.ckpt"
    agent.save(str(path))
    fresh = Agent(algorithms.DQN(models.QValues(), gamma=0.9, lr=1e-3))
    fresh.restore(str(path))
    _close(agent.alg.model, fresh.alg.model, 0, 0)
    other = models.QValues()
    fresh.restore(str(path), model=other)
    _close(agent.alg.model, other, 0, 0)
    with pytest.raises(FileNotFoundError, match="no saved model"):
        fresh.restore(str(tmp_path / "missing"))
    fresh.eval()
    assert not fresh.training and not fresh.alg.model.training
    fresh.train()
    assert fresh.training and fresh.alg.model.training
    assert torch.get_num_threads() == 1  # as PARL's agent module set it


# -- on-policy ----------------------------------------------------------------------------------


def test_policy_gradient() -> None:
    torch.manual_seed(0)
    model = models.Probs()
    ref = copy.deepcopy(model)
    alg = algorithms.PolicyGradient(model, lr=0.01)
    obs, action, ret = torch.randn(B, OBS), torch.randint(0, ACT, (B,)), torch.randn(B)
    assert alg.predict(obs[0]).shape == (ACT,) and alg.predict(obs).shape == (B, ACT)
    loss = alg.learn(obs, action, ret)
    # PARL's maths: mean(-log Categorical(probs).log_prob(a) * G), Adam (torch's defaults).
    opt = torch.optim.Adam(ref.parameters(), lr=0.01)
    ref_loss = (-Categorical(ref(obs)).log_prob(action) * ret).mean()
    opt.zero_grad()
    ref_loss.backward()
    opt.step()
    assert loss.shape == () and loss.item() == pytest.approx(ref_loss.item(), rel=1e-5)
    _close(model, ref)


@pytest.mark.parametrize("double", [False, True])
def test_dqn_and_ddqn(double: bool) -> None:
    torch.manual_seed(0)
    model = models.QValues()
    cls = algorithms.DDQN if double else algorithms.DQN
    alg = cls(model, gamma=0.9, lr=1e-3)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.1)  # the target (a copy at construction) now differs
    ref, ref_target = copy.deepcopy(model), copy.deepcopy(alg.target_model)
    b = _batch()
    action = torch.randint(0, ACT, (B, 1))
    assert alg.predict(b["obs"]).shape == (B, ACT)
    loss = alg.learn(b["obs"], action, b["reward"], b["next_obs"], b["terminal"])
    assert isinstance(loss, float)
    with torch.no_grad():
        next_q = ref_target(b["next_obs"])
        if double:
            best = next_q.gather(1, ref(b["next_obs"]).argmax(1, keepdim=True))
        else:
            best = next_q.max(1, keepdim=True)[0]
        y = b["reward"] + (1 - b["terminal"]) * 0.9 * best
    opt = torch.optim.Adam(ref.parameters(), lr=1e-3)
    ref_loss = ((ref(b["obs"]).gather(1, action) - y) ** 2).mean()
    opt.zero_grad()
    ref_loss.backward()
    opt.step()
    assert loss == pytest.approx(ref_loss.item(), rel=1e-5)
    _close(model, ref)
    _close(alg.target_model, ref_target, 0, 0)  # the target moves only at sync_target
    alg.sync_target()
    _close(alg.target_model, model, 0, 0)
    assert alg.optimizer.param_groups[0]["lr"] == 1e-3  # scripts decay it there


def test_a2c() -> None:
    torch.manual_seed(0)
    model = models.Logits()
    ref = copy.deepcopy(model)
    alg = algorithms.A2C(model, {"learning_rate": 1e-3, "vf_loss_coeff": 0.5})
    obs, actions = torch.randn(B, OBS), torch.randint(0, ACT, (B,))
    adv, targets = torch.randn(B), torch.randn(B)
    total, pi, vf, ent = alg.learn(obs, actions, adv, targets, lr=0.05, entropy_coeff=-0.01)
    # PARL's maths: sums over the batch; entropy_coeff < 0; grads clipped to 40; lr given per call.
    logits = ref.policy(obs)
    ref_pi = -(torch.log_softmax(logits, 1).gather(1, actions[:, None]).squeeze(1) * adv).sum()
    ref_vf = 0.5 * ((ref.value(obs) - targets) ** 2).sum()
    ref_ent = Categorical(logits=logits).entropy().sum()
    ref_total = ref_pi + 0.5 * ref_vf - 0.01 * ref_ent
    opt = torch.optim.Adam(ref.parameters(), lr=0.05)
    ref_total.backward()
    nn.utils.clip_grad_norm_(ref.parameters(), 40.0)
    opt.step()
    for got, want in ((total, ref_total), (pi, ref_pi), (vf, ref_vf), (ent, ref_ent)):
        assert isinstance(got, torch.Tensor) and got.item() == pytest.approx(want.item(), rel=1e-5)
    _close(model, ref)
    sampled, values = alg.sample(obs)
    assert sampled.shape == (B,) and sampled.dtype == torch.int64 and values.shape == (B,)
    probs, _ = alg.prob_and_value(obs)
    torch.testing.assert_close(probs.sum(1), torch.ones(B))
    assert alg.predict(obs).shape == (B,) and alg.value(obs).shape == (B,)


@pytest.mark.parametrize("continuous", [False, True])
@pytest.mark.parametrize("clipped_value", [True, False])
def test_ppo(continuous: bool, clipped_value: bool) -> None:
    torch.manual_seed(0)
    model: Model = models.Gaussian() if continuous else models.Logits()
    ref: Any = copy.deepcopy(model)
    alg = algorithms.PPO(
        model, clip_param=0.2, entropy_coef=0.01, initial_lr=3e-3, continuous_action=continuous,
        use_clipped_value_loss=clipped_value,
    )  # fmt: skip
    obs = torch.randn(B, OBS)
    value, action, logprob, entropy = (x.detach() for x in alg.sample(obs))  # as PARL's agent takes them
    assert action.shape == ((B, ACT) if continuous else (B,)) and logprob.shape == entropy.shape == (B,)
    assert alg.predict(obs).shape == ((B, ACT) if continuous else (B, 1))
    old_value = value.reshape(-1) + 0.3
    ret, adv = torch.randn(B), torch.randn(B)
    old_logprob = logprob - 0.1
    v_loss, a_loss, e_loss = alg.learn(obs, action, old_value, ret, old_logprob, adv, lr=1e-3)
    # PARL's maths: ratio clipped at 1 +- 0.2, value loss 0.5 * max(unclipped, clipped) (coef 0.5),
    # advantages normalised, grads clipped to 0.5, Adam eps 1e-5, lr given.
    if continuous:
        mean, std = ref.policy(obs)
        dist: Any = Normal(mean, std)
        new_logprob, ent = dist.log_prob(action).sum(1), dist.entropy().sum(1).mean()
    else:
        dist = Categorical(logits=ref.policy(obs))
        new_logprob, ent = dist.log_prob(action), dist.entropy().mean()
    norm = (adv - adv.mean()) / (adv.std() + 1e-8)
    ratio = torch.exp(new_logprob - old_logprob)
    ref_a = -torch.min(ratio * norm, ratio.clamp(0.8, 1.2) * norm).mean()
    v = ref.value(obs).reshape(-1)
    if clipped_value:
        v_clipped = old_value + (v - old_value).clamp(-0.2, 0.2)
        ref_v = 0.5 * torch.max((v - ret) ** 2, (v_clipped - ret) ** 2).mean()
    else:
        ref_v = 0.5 * ((ret - v) ** 2).mean()
    opt = torch.optim.Adam(ref.parameters(), lr=1e-3, eps=1e-5)
    (ref_v * 0.5 + ref_a - ent * 0.01).backward()
    nn.utils.clip_grad_norm_(ref.parameters(), 0.5)
    opt.step()
    assert (v_loss, a_loss, e_loss) == pytest.approx((ref_v.item(), ref_a.item(), ent.item()), rel=1e-4, abs=1e-6)
    _close(model, ref)


# -- off-policy ---------------------------------------------------------------------------------


def _sync(target: nn.Module, model: nn.Module, tau: float) -> None:
    with torch.no_grad():
        for t, m in zip(target.parameters(), model.parameters(), strict=True):
            t.copy_((1 - tau) * t + tau * m)


def test_ddpg() -> None:
    torch.manual_seed(0)
    model = models.ActorCritic(twin=False)
    alg = algorithms.DDPG(model, gamma=0.99, tau=0.1, actor_lr=1e-3, critic_lr=2e-3)
    assert alg.target_model is not model and type(alg.target_model) is type(model)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.05)
    ref, ref_target = copy.deepcopy(model), copy.deepcopy(alg.target_model)
    b = _batch()
    losses = alg.learn(**b)
    assert losses is not None
    critic_loss, actor_loss = losses
    # PARL's order: the critic onto y = r + gamma (1 - t) Q'(s', mu'(s')), the actor, then all targets.
    with torch.no_grad():
        y = b["reward"] + (1 - b["terminal"]) * 0.99 * ref_target.value(b["next_obs"], ref_target.policy(b["next_obs"]))
    c_opt = torch.optim.Adam(ref.get_critic_params(), lr=2e-3)
    a_opt = torch.optim.Adam(ref.get_actor_params(), lr=1e-3)
    ref_c = ((ref.value(b["obs"], b["action"]) - y) ** 2).mean()
    c_opt.zero_grad()
    ref_c.backward()
    c_opt.step()
    ref_a = -ref.value(b["obs"], ref.policy(b["obs"])).mean()
    a_opt.zero_grad()
    ref_a.backward()
    a_opt.step()
    _sync(ref_target, ref, 0.1)
    assert critic_loss.item() == pytest.approx(ref_c.item(), rel=1e-5)
    assert actor_loss.item() == pytest.approx(ref_a.item(), rel=1e-5)
    _close(model, ref)
    _close(alg.target_model, ref_target)
    assert alg.predict(b["obs"]).shape == (B, ACT)
    alg.sync_target(decay=0)
    _close(alg.target_model, model, 0, 0)


def test_td3_delays_the_actor_and_the_targets() -> None:
    torch.manual_seed(0)
    model = models.ActorCritic(twin=True)
    alg = algorithms.TD3(model, gamma=0.99, tau=0.1, actor_lr=1e-3, critic_lr=1e-3)
    alg.sync_target(decay=0)
    target: Any = alg.target_model
    ref, ref_target = copy.deepcopy(model), copy.deepcopy(target)
    c_opt = torch.optim.Adam(ref.get_critic_params(), lr=1e-3)
    a_opt = torch.optim.Adam(ref.get_actor_params(), lr=1e-3)
    for it in (1, 2):
        b = _batch(it)
        torch.manual_seed(it)
        alg.learn(**b)  # returns nothing, as PARL's
        assert alg.total_it == it
        torch.manual_seed(it)
        with torch.no_grad():
            noise = (torch.randn_like(b["action"]) * 0.2).clamp(-0.5, 0.5)
            next_action = (ref_target.policy(b["next_obs"]) + noise).clamp(-1, 1)
            q1, q2 = ref_target.value(b["next_obs"], next_action)
            y = b["reward"] + (1 - b["terminal"]) * 0.99 * torch.min(q1, q2)
        c1, c2 = ref.value(b["obs"], b["action"])
        c_opt.zero_grad()
        (((c1 - y) ** 2).mean() + ((c2 - y) ** 2).mean()).backward()
        c_opt.step()
        if it % 2 == 0:
            a_opt.zero_grad()
            (-ref.Q1(b["obs"], ref.policy(b["obs"])).mean()).backward()
            a_opt.step()
            _sync(ref_target, ref, 0.1)
        _close(model, ref)
        _close(alg.target_model, ref_target)
        if it == 1:
            _close(model.actor_model, target.actor_model, 0, 0)  # no actor step yet


def _sac_reference(ref: models.ActorCritic, ref_target: Any, b: dict[str, torch.Tensor], alpha: float) -> None:
    """PARL's SAC step: reparameterised tanh-Gaussian (log-density with ``log(1 - a^2 + 1e-6)``),
    soft target with the fixed alpha, critic, then actor; the critic's noise drawn first."""
    noise_next, noise_now = torch.randn(B, ACT), torch.randn(B, ACT)

    def sample(obs: torch.Tensor, eps: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        mean, log_std = ref.policy(obs)
        u = mean + log_std.exp() * eps
        a = torch.tanh(u)
        log_prob = Normal(mean, log_std.exp()).log_prob(u) - torch.log(1 - a.pow(2) + 1e-6)
        return a, log_prob.sum(1, keepdim=True)

    with torch.no_grad():
        a_next, logp_next = sample(b["next_obs"], noise_next)
        q1, q2 = ref_target.value(b["next_obs"], a_next)
        y = b["reward"] + 0.99 * (1 - b["terminal"]) * (torch.min(q1, q2) - alpha * logp_next)
    c1, c2 = ref.value(b["obs"], b["action"])
    c_opt = torch.optim.Adam(ref.get_critic_params(), lr=3e-4)
    c_opt.zero_grad()
    (((c1 - y) ** 2).mean() + ((c2 - y) ** 2).mean()).backward()
    c_opt.step()
    a, logp = sample(b["obs"], noise_now)
    q1, q2 = ref.value(b["obs"], a)
    a_opt = torch.optim.Adam(ref.get_actor_params(), lr=3e-4)
    a_opt.zero_grad()
    (alpha * logp - torch.min(q1, q2)).mean().backward()
    a_opt.step()


@pytest.mark.parametrize("name", ["SAC", "OAC"])
def test_sac_and_oac_learn(name: str) -> None:
    torch.manual_seed(0)
    model = models.ActorCritic(twin=True, gaussian=True)
    kwargs: dict[str, float] = {"beta": 4.66, "delta": 23.53} if name == "OAC" else {}
    alg = getattr(algorithms, name)(model, gamma=0.99, tau=0.1, alpha=0.2, actor_lr=3e-4, critic_lr=3e-4, **kwargs)
    alg.sync_target(decay=0)
    ref, ref_target = copy.deepcopy(model), cast(models.ActorCritic, copy.deepcopy(alg.target_model))
    b = _batch()
    torch.manual_seed(5)
    critic_loss, actor_loss = alg.learn(**b)
    assert critic_loss.shape == () and actor_loss.shape == ()
    torch.manual_seed(5)
    _sac_reference(ref, ref_target, b, 0.2)
    _sync(ref_target.critic_model, ref.critic_model, 0.1)
    # PARL's log-density adds 1e-6 inside the log; rl's is exact: equal to about 1e-6 here.
    _close(model, ref, rtol=1e-4, atol=1e-5)
    _close(cast(models.ActorCritic, alg.target_model).critic_model, ref_target.critic_model, rtol=1e-4, atol=1e-5)
    action, log_prob = alg.sample(b["obs"])
    assert action.shape == (B, ACT) and log_prob.shape == (B, 1) and action.abs().max() <= 1
    torch.testing.assert_close(alg.predict(b["obs"]), torch.tanh(model.policy(b["obs"])[0]))


def test_oac_explores_as_parls() -> None:
    """PARL's steps, one observation: u ~ N(mu, s), g = grad_u Q_UB(s, tanh u), mu_E = u +
    sqrt(2 delta) S g / (sqrt(sum g^2 S) + 1e-5), a = tanh(N(mu_E, s))."""
    torch.manual_seed(0)
    model = models.ActorCritic(twin=True, gaussian=True)
    alg = algorithms.OAC(model, gamma=0.99, tau=0.005, alpha=0.2, beta=4.66, delta=23.53, actor_lr=3e-4, critic_lr=3e-4)
    obs = torch.randn(1, OBS)
    torch.manual_seed(3)
    got = alg.get_optimistic_exploration_action(obs)
    torch.manual_seed(3)
    mean, log_std = model.policy(obs)
    std = log_std.exp()
    u = (mean + std * torch.randn_like(mean)).detach().requires_grad_(True)
    q1, q2 = model.value(obs, torch.tanh(u))
    (g,) = torch.autograd.grad(((q1 + q2) / 2 + 4.66 * (q1 - q2).abs() / 2).sum(), u)
    sigma = std.detach() ** 2
    mu_e = u.detach() + math.sqrt(2 * 23.53) * sigma * g / (torch.sqrt((g**2 * sigma).sum()) + 1e-5)
    want = torch.tanh(mu_e + std.detach() * torch.randn_like(mu_e))
    assert got.shape == (1, ACT)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("continuous", [False, True])
def test_maddpg(continuous: bool) -> None:
    """One agent of two: PARL's order (actor, then critic onto the given target), grads clipped
    to 0.5, the policy regulariser 1e-3 mean(out^2), then every target parameter."""
    torch.manual_seed(0)
    obs_dims, act_dims = [OBS, 2], [ACT, 2]
    spaces = (
        [gym.spaces.Box(0.0, 1.0, (d,)) for d in act_dims] if continuous else [gym.spaces.Discrete(d) for d in act_dims]
    )
    model = models.MultiAgent(OBS, ACT, sum(obs_dims) + sum(act_dims), continuous)
    alg = algorithms.MADDPG(model, agent_index=0, act_space=spaces, gamma=0.95, tau=0.01, actor_lr=0.01, critic_lr=0.01)
    assert alg.continuous_actions is continuous
    _close(alg.target_model, model, 0, 0)  # synced at construction
    obs_n = [torch.randn(B, d) for d in obs_dims]
    act_n = [torch.softmax(torch.randn(B, d), 1) for d in act_dims]
    target_q = torch.randn(B)
    assert alg.predict(obs_n[0]).shape == (B, ACT) and alg.sample(obs_n[0], use_target_model=True).shape == (B, ACT)
    assert alg.Q(obs_n, act_n).shape == (B,) and alg.Q(obs_n, act_n, use_target_model=True).shape == (B,)
    ref, ref_target = copy.deepcopy(model), copy.deepcopy(alg.target_model)
    torch.manual_seed(2)
    critic_cost = alg.learn(obs_n, act_n, target_q)
    torch.manual_seed(2)
    a_opt = torch.optim.Adam(ref.get_actor_params(), lr=0.01)
    c_opt = torch.optim.Adam(ref.get_critic_params(), lr=0.01)
    out = ref.policy(obs_n[0])
    if continuous:
        mean, log_std = out
        mine = torch.tanh(mean + log_std.exp() * torch.randn(mean.shape))
        flat = torch.cat(out, -1)
    else:
        mine = torch.softmax(out - torch.log(-torch.log(torch.rand_like(out))), -1)
        flat = out
    loss = -ref.value([obs_n[0], obs_n[1]], [mine, act_n[1]]).mean() + 1e-3 * (flat**2).mean()
    a_opt.zero_grad()
    loss.backward()
    nn.utils.clip_grad_norm_(ref.get_actor_params(), 0.5)
    a_opt.step()
    ref_c = ((ref.value(obs_n, act_n) - target_q) ** 2).mean()
    c_opt.zero_grad()
    ref_c.backward()
    nn.utils.clip_grad_norm_(ref.get_critic_params(), 0.5)
    c_opt.step()
    _sync(ref_target, ref, 0.01)
    assert critic_cost.item() == pytest.approx(ref_c.item(), rel=1e-5)
    _close(model, ref)
    _close(alg.target_model, ref_target)
    with pytest.raises(TypeError, match="act_space"):
        algorithms.MADDPG(model, agent_index=0, act_space=None, gamma=0.95, tau=0.01, actor_lr=0.01, critic_lr=0.01)
