"""rl.ops against slow references written in the papers' notation, on random inputs."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from rl import ops


def _random_inputs(seed: int, num_steps: int = 7, num_envs: int = 3) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    done = rng.random((num_steps, num_envs)) < 0.2
    return {
        "log_rhos": rng.normal(0.0, 0.7, (num_steps, num_envs)),
        "discounts": 0.9 * (~done),
        "rewards": rng.normal(size=(num_steps, num_envs)),
        "values": rng.normal(size=(num_steps, num_envs)),
        "bootstrap_value": rng.normal(size=num_envs),
    }


def vtrace_reference(
    log_rhos: np.ndarray,
    discounts: np.ndarray,
    rewards: np.ndarray,
    values: np.ndarray,
    bootstrap_value: np.ndarray,
    rho_bar: float,
    pg_rho_bar: float,
) -> tuple[np.ndarray, np.ndarray]:
    """Espeholt et al. 2018, eq. (1), summed term by term, one (s, b) at a time.

    v_s = V(x_s) + sum_{t=s}^{T-1} (prod_{i=s}^{t-1} gamma_i) (prod_{i=s}^{t-1} c_i) delta_t V,
    delta_t V = rho_t (r_t + gamma_t V(x_{t+1}) - V(x_t)), rho_t = min(rho_bar, pi/mu), c_i = min(1, pi/mu).
    """
    num_steps, num_envs = rewards.shape
    v = np.concatenate([values, bootstrap_value[None]], axis=0)  # V(x_0..x_T)
    pi_over_mu = np.exp(log_rhos)
    rho = np.minimum(rho_bar, pi_over_mu)
    c = np.minimum(1.0, pi_over_mu)
    vs = np.zeros((num_steps, num_envs))
    for b in range(num_envs):
        for s in range(num_steps):
            total = v[s, b]
            for t in range(s, num_steps):
                weight = 1.0
                for i in range(s, t):
                    weight *= discounts[i, b] * c[i, b]
                delta = rho[t, b] * (rewards[t, b] + discounts[t, b] * v[t + 1, b] - v[t, b])
                total += weight * delta
            vs[s, b] = total
    vs_next = np.concatenate([vs[1:], bootstrap_value[None]], axis=0)
    pg_rho = np.minimum(pg_rho_bar, pi_over_mu)
    pg_adv = pg_rho * (rewards + discounts * vs_next - values)
    return vs, pg_adv


def gae_reference(
    rewards: np.ndarray, values: np.ndarray, bootstrap_value: np.ndarray, discounts: np.ndarray, lam: float
) -> tuple[np.ndarray, np.ndarray]:
    """Schulman et al. 2016, eq. (16): A_t = sum_l (prod of gamma*lambda up to l) delta_{t+l}."""
    num_steps, num_envs = rewards.shape
    v = np.concatenate([values, bootstrap_value[None]], axis=0)
    delta = rewards + discounts * v[1:] - v[:-1]
    adv = np.zeros((num_steps, num_envs))
    for b in range(num_envs):
        for t in range(num_steps):
            weight = 1.0
            for k in range(num_steps - t):
                adv[t, b] += weight * delta[t + k, b]
                weight *= discounts[t + k, b] * lam
    return adv, adv + values


def _t(x: np.ndarray) -> torch.Tensor:
    return torch.as_tensor(x, dtype=torch.float64)


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("rho_bar,pg_rho_bar", [(1.0, 1.0), (2.0, 0.5), (None, None)])
def test_vtrace_matches_paper(seed: int, rho_bar: float | None, pg_rho_bar: float | None) -> None:
    x = _random_inputs(seed)
    out = ops.vtrace(**{k: _t(v) for k, v in x.items()}, clip_rho_threshold=rho_bar, clip_pg_rho_threshold=pg_rho_bar)
    vs, pg = vtrace_reference(**x, rho_bar=rho_bar or np.inf, pg_rho_bar=pg_rho_bar or np.inf)
    np.testing.assert_allclose(out.vs.numpy(), vs, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(out.pg_advantages.numpy(), pg, rtol=1e-10, atol=1e-10)


def test_vtrace_on_policy_is_n_step_return() -> None:
    """With pi == mu (log_rhos = 0) and no clipping active, v_s is the n-step bootstrapped return."""
    x = _random_inputs(0)
    x["log_rhos"] = np.zeros_like(x["log_rhos"])
    out = ops.vtrace(_t(x["log_rhos"]), _t(x["discounts"]), _t(x["rewards"]), _t(x["values"]), _t(x["bootstrap_value"]))
    returns = ops.discounted_returns(_t(x["rewards"]), _t(x["discounts"]), _t(x["bootstrap_value"]))
    np.testing.assert_allclose(out.vs.numpy(), returns.numpy(), atol=1e-10)


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("lam", [0.0, 0.8, 1.0])
def test_gae_matches_paper(seed: int, lam: float) -> None:
    x = _random_inputs(seed)
    out = ops.gae(_t(x["rewards"]), _t(x["values"]), _t(x["bootstrap_value"]), _t(x["discounts"]), lam)
    adv, ret = gae_reference(x["rewards"], x["values"], x["bootstrap_value"], x["discounts"], lam)
    np.testing.assert_allclose(out.advantages.numpy(), adv, atol=1e-10)
    np.testing.assert_allclose(out.returns.numpy(), ret, atol=1e-10)


def test_discounted_returns_by_hand() -> None:
    rewards = _t(np.array([[1.0], [2.0], [3.0]]))
    discounts = _t(np.array([[0.5], [0.0], [0.5]]))  # episode ends at t = 1
    returns = ops.discounted_returns(rewards, discounts, _t(np.array([10.0])))
    np.testing.assert_allclose(returns.numpy()[:, 0], [1 + 0.5 * 2, 2, 3 + 0.5 * 10])


# -- off-policy targets ------------------------------------------------------------------------


def test_td_target_bootstraps_truncation_not_termination() -> None:
    r = _t(np.array([1.0, 1.0, 1.0]))
    terminated = torch.tensor([False, True, False])  # the third is a truncation: not terminal
    y = ops.td_target(r, terminated, _t(np.array([10.0, 10.0, 10.0])), 0.9)
    np.testing.assert_allclose(y.numpy(), [10.0, 1.0, 10.0])


def clipped_double_q_reference(
    r: np.ndarray, d: np.ndarray, q1: np.ndarray, q2: np.ndarray, gamma: float, logp: np.ndarray, alpha: float
) -> np.ndarray:
    """y = r + gamma (1 - d) (min(Q'_1, Q'_2) - alpha log pi(a'|s')), one transition at a time."""
    return np.array([r[i] + gamma * (1 - d[i]) * (min(q1[i], q2[i]) - alpha * logp[i]) for i in range(len(r))])


@pytest.mark.parametrize("alpha", [0.0, 0.2])
def test_clipped_double_q_target_matches_paper(alpha: float) -> None:
    rng = np.random.default_rng(0)
    n = 20
    r, q1, q2, logp = rng.normal(size=n), rng.normal(size=n), rng.normal(size=n), rng.normal(size=n)
    d = rng.random(n) < 0.3
    y = ops.clipped_double_q_target(_t(r), torch.as_tensor(d), _t(q1), _t(q2), 0.99, _t(logp) if alpha else None, alpha)
    np.testing.assert_allclose(y.numpy(), clipped_double_q_reference(r, d, q1, q2, 0.99, logp, alpha), atol=1e-12)


def test_smoothed_target_action_clips_noise_then_action() -> None:
    mu = _t(np.array([[0.0, 1.9], [-1.9, 0.5]]))
    noise = _t(np.array([[0.7, 0.3], [-0.2, -2.0]]))
    low, high = _t(np.array([-2.0, -2.0])), _t(np.array([2.0, 2.0]))
    out = ops.smoothed_target_action(mu, noise, 0.5, low, high)
    # clip(noise, -0.5, 0.5) = [[.5, .3], [-.2, -.5]]; then clip(mu + eps, -2, 2)
    np.testing.assert_allclose(out.numpy(), [[0.5, 2.0], [-2.0, 0.0]])


def test_weighted_mse_is_the_importance_weighted_squared_td_error() -> None:
    rng = np.random.default_rng(0)
    q, y, w = rng.normal(size=30), rng.normal(size=30), rng.random(30)
    reference = sum(w[i] * (q[i] - y[i]) ** 2 for i in range(30)) / 30
    np.testing.assert_allclose(ops.weighted_mse(_t(q), _t(y), _t(w)).item(), reference, rtol=1e-12)
    uniform = ops.weighted_mse(_t(q), _t(y), torch.ones(30, dtype=torch.float64))
    torch.testing.assert_close(uniform, torch.nn.functional.mse_loss(_t(q), _t(y)))


def test_tanh_gaussian_log_prob_matches_change_of_variables() -> None:
    """Against the naive float64 formula, torch.distributions' TanhTransform, and a density that
    integrates to 1 over (-1, 1)."""
    rng = np.random.default_rng(0)
    mean, log_std = _t(rng.normal(size=(50, 3))), _t(rng.normal(0, 0.5, size=(50, 3)))
    u = mean + torch.randn(50, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(0)) * log_std.exp()
    ours = ops.tanh_gaussian_log_prob(u, mean, log_std)
    normal = torch.distributions.Normal(mean, log_std.exp())
    naive = (normal.log_prob(u) - torch.log(1 - torch.tanh(u) ** 2)).sum(-1)
    np.testing.assert_allclose(ours.numpy(), naive.numpy(), rtol=1e-9, atol=1e-9)
    squashed = torch.distributions.TransformedDistribution(normal, [torch.distributions.TanhTransform()])
    a = torch.tanh(u).clamp(-1 + 1e-12, 1 - 1e-12)
    np.testing.assert_allclose(ours.numpy(), squashed.log_prob(a).sum(-1).numpy(), rtol=1e-6, atol=1e-6)
    # 1-D density of a = tanh(u), u ~ N(0.3, 0.8^2): integrates to 1 (midpoint rule in u).
    grid = torch.linspace(-8, 8, 20001, dtype=torch.float64)
    du = grid[1] - grid[0]
    logp = ops.tanh_gaussian_log_prob(grid[:, None], _t(np.array([0.3])), _t(np.log([0.8])))
    da = (1 - torch.tanh(grid) ** 2) * du
    assert float((logp.exp() * da).sum()) == pytest.approx(1.0, abs=1e-6)
    # Finite far in the tails, in float32.
    far = ops.tanh_gaussian_log_prob(torch.tensor([[30.0]]), torch.tensor([[30.0]]), torch.tensor([[0.0]]))
    assert torch.isfinite(far).all()


def test_soft_update_is_polyak_averaging() -> None:
    rng = np.random.default_rng(0)
    target = [torch.as_tensor(rng.normal(size=s)) for s in [(3, 4), (4,)]]
    source = [torch.as_tensor(rng.normal(size=s)) for s in [(3, 4), (4,)]]
    expected = [0.005 * s + 0.995 * t for s, t in zip(source, target, strict=True)]
    ops.soft_update_(target, source, 0.005)
    for t, e in zip(target, expected, strict=True):
        np.testing.assert_allclose(t.numpy(), e.numpy(), atol=1e-12)
    with pytest.raises(ValueError):
        ops.soft_update_(target, source, 1.5)


# -- evolution strategies -------------------------------------------------------------------------


def centered_ranks_reference(x: np.ndarray) -> np.ndarray:
    """The OpenAI-ES code's compute_centered_ranks, restated (rank in [0, n-1], / (n-1), - 0.5),
    with tied values sharing the mean of their ranks."""
    flat = x.ravel()
    order = sorted(range(len(flat)), key=lambda i: flat[i])
    ranks = np.empty(len(flat))
    for i in order:
        ranks[i] = np.mean([r for r, j in enumerate(order) if flat[j] == flat[i]])
    return (ranks / (len(flat) - 1) - 0.5).reshape(x.shape)


def test_centered_ranks_matches_reference_and_ignores_scale() -> None:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(7, 2))
    x[3, 1] = x[0, 0]  # a tie
    out = ops.centered_ranks(_t(x))
    np.testing.assert_allclose(out.numpy(), centered_ranks_reference(x))
    assert out.min() == -0.5 and out.max() == 0.5 and abs(float(out.sum())) < 1e-12
    assert out[3, 1] == out[0, 0]
    np.testing.assert_allclose(ops.centered_ranks(_t(np.exp(3 * x) + 100)).numpy(), out.numpy())


def test_mirrored_pairs_that_tie_add_nothing_to_the_es_gradient() -> None:
    """Solved CartPole: most pairs hit the time limit on both sides. Only the pair whose returns
    differ may move the parameters (distinct ranks for ties used to move them along every pair)."""
    returns_pos = np.array([500.0, 500.0, 500.0, 500.0, 100.0])
    returns_neg = np.array([500.0, 500.0, 500.0, 500.0, 200.0])
    u = ops.centered_ranks(_t(np.stack([returns_pos, returns_neg])))
    np.testing.assert_array_equal((u[0] - u[1])[:4].numpy(), 0.0)
    assert float(u[0, 4] - u[1, 4]) < 0
    eps = torch.eye(5, dtype=torch.float64)
    g = ops.es_gradient(u[0], u[1], eps, sigma=0.1)
    np.testing.assert_array_equal(g[:4].numpy(), 0.0)
    assert float(g[4]) < 0


def test_es_gradient_matches_sum_and_is_unbiased_on_a_quadratic() -> None:
    rng = np.random.default_rng(0)
    n, d, sigma = 5, 3, 0.1
    up, um, eps = rng.normal(size=n), rng.normal(size=n), rng.normal(size=(n, d))
    reference = sum((up[i] - um[i]) * eps[i] for i in range(n)) / (2 * n * sigma)
    np.testing.assert_allclose(ops.es_gradient(_t(up), _t(um), _t(eps), sigma).numpy(), reference, atol=1e-12)
    # f(theta) = -|theta - c|^2: grad = -2 (theta - c); antithetic differences are exactly linear.
    theta, c = np.array([0.5, -1.0, 2.0]), np.array([1.0, 1.0, 1.0])
    eps = np.random.default_rng(1).normal(size=(20_000, 3))

    def f(th: np.ndarray) -> np.ndarray:
        return -((th - c) ** 2).sum(-1)

    g = ops.es_gradient(_t(f(theta + sigma * eps)), _t(f(theta - sigma * eps)), _t(eps), sigma).numpy()
    np.testing.assert_allclose(g, -2 * (theta - c), atol=0.06)
