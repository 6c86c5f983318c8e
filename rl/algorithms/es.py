"""OpenAI-ES: evolution strategies as a scalable alternative to RL (Salimans et al. 2017, Algorithm 2).

    for each generation:
        draw n noise vectors eps_i ~ N(0, I) (offsets into a shared noise table)
        evaluate F(theta + sigma eps_i) and F(theta - sigma eps_i)      (antithetic pairs)
        u = centered_ranks(all 2n returns)                               (fitness shaping)
        g = 1 / (2 n sigma) sum_i (u_i^+ - u_i^-) eps_i
        theta <- Adam(theta, -g + l2 * theta)                            (ascend g; weight decay)

Every process builds the same :class:`NoiseTable` from the same seed, so a perturbation travels
as one integer (its offset in the table), never as a ``d``-dimensional vector: workers receive
``theta`` once per generation and their offsets, and return only returns. The maths is in
:func:`rl.ops.centered_ranks` and :func:`rl.ops.es_gradient`; evaluation (which steps
environments) is the workers' job (:mod:`rl.learners.es`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from rl import ops
from rl.algorithm import Algorithm, PolicyStep
from rl.networks import MLPPolicy

__all__ = ["ES", "NoiseTable", "PolicySearch"]


class NoiseTable:
    """``size`` standard-normal float32 values drawn from ``seed``: identical in every process.

    A perturbation of a ``d``-dimensional vector is the slice ``[i, i + d)`` for an offset ``i``.
    Building it costs ``size`` normal draws (about 0.1 s for the default 2**22, 16 MiB).
    """

    def __init__(self, size: int = 2**22, seed: int = 123) -> None:
        self.size = int(size)
        self.seed = seed
        self.noise = np.random.default_rng(seed).standard_normal(self.size, dtype=np.float32)

    def get(self, offset: int, dim: int) -> np.ndarray:
        """The noise vector at ``offset`` (a view, ``[dim]``)."""
        return self.noise[offset : offset + dim]

    def stack(self, offsets: Sequence[int] | np.ndarray, dim: int) -> np.ndarray:
        """``[len(offsets), dim]``: the noise vectors at these offsets."""
        return np.stack([self.get(int(i), dim) for i in offsets]) if len(offsets) else np.zeros((0, dim), np.float32)

    def sample_offsets(self, rng: np.random.Generator, dim: int, n: int) -> np.ndarray:
        """``n`` offsets drawn uniformly among those with a full ``dim``-long slice."""
        if dim > self.size:
            raise ValueError(f"noise table of {self.size} values for {dim} parameters")
        return rng.integers(0, self.size - dim + 1, size=n)


class PolicySearch(Algorithm):
    """What ES and CMA-ES share: a deterministic :class:`rl.MLPPolicy` acting with ``theta`` (they
    explore in parameter space, not with action noise), ``theta`` as a flat vector, and no batch
    update (they learn by ``ask`` / ``tell`` on returns)."""

    model: MLPPolicy
    label = "ES"
    """The method's name in errors."""

    def sample(self, obs: torch.Tensor) -> PolicyStep:
        """``pi_theta(obs)`` (no exploration noise)."""
        return PolicyStep(self.model(obs), None, None)

    def predict(self, obs: torch.Tensor) -> torch.Tensor:
        """``pi_theta(obs)``."""
        return self.model(obs)

    def theta(self) -> np.ndarray:
        """The current parameter vector ``[d]`` (float32), as loaded in the model."""
        return self.model.flat_parameters().numpy().copy()

    def learn(self, batch: object) -> dict[str, float]:
        """No batch update: use ``ask`` / ``tell``."""
        raise TypeError(f"{self.label} learns by ask()/tell() on returns, not from batches")


class ES(PolicySearch):
    """OpenAI-ES on the flat parameter vector of an :class:`rl.MLPPolicy`.

    :meth:`ask` draws a generation's noise offsets; the caller evaluates ``theta +- sigma eps``
    (see :meth:`population`) and hands the returns to :meth:`tell`, which takes one optimizer
    step. :meth:`sample` and :meth:`predict` both act with ``theta`` (the policy is deterministic).
    """

    saved_attributes = ("rng", "generation")  # the noise offsets drawn next

    def __init__(
        self,
        model: MLPPolicy,
        noise: NoiseTable,
        population: int = 64,
        sigma: float = 0.1,
        lr: float = 0.03,
        l2_coeff: float = 0.005,
        seed: int = 0,
    ) -> None:
        super().__init__(model)
        if population < 2 or population % 2:
            raise ValueError(f"population must be even and >= 2 (antithetic pairs), got {population}")
        if not sigma > 0:
            raise ValueError(f"sigma (the perturbations' scale) must be > 0, got {sigma}")
        self.noise = noise
        self.num_pairs = population // 2
        self.sigma = sigma
        self.l2_coeff = l2_coeff
        self.dim = model.num_parameters
        self.optimizer = torch.optim.Adam(model.parameters(), lr=lr)
        self.rng = np.random.default_rng(seed)
        self.generation = 0

    # -- the generation ----------------------------------------------------------------------
    def ask(self) -> np.ndarray:
        """This generation's ``n`` noise offsets (one per antithetic pair)."""
        return self.noise.sample_offsets(self.rng, self.dim, self.num_pairs)

    def population(self, theta: np.ndarray, offsets: np.ndarray) -> np.ndarray:
        """``[2m, d]`` for ``m`` offsets: rows ``theta + sigma eps_i`` then ``theta - sigma eps_i``."""
        eps = self.noise.stack(offsets, self.dim)
        return np.concatenate([theta + self.sigma * eps, theta - self.sigma * eps]).astype(np.float32)

    def tell(self, offsets: np.ndarray, returns_pos: np.ndarray, returns_neg: np.ndarray) -> dict[str, float]:
        """One Adam step along the shaped antithetic gradient estimate; returns statistics."""
        for name, values in (("returns_pos", returns_pos), ("returns_neg", returns_neg)):
            if np.shape(values) != (len(offsets),):
                raise ValueError(f"tell: {name} has shape {np.shape(values)}; one return per offset: ({len(offsets)},)")
            if not np.isfinite(values).all():
                raise ValueError(f"tell: {name} holds non-finite returns (a failed episode?): {np.asarray(values)}")
        returns = torch.as_tensor(np.stack([returns_pos, returns_neg]), dtype=torch.float64)
        utilities = ops.centered_ranks(returns)
        eps = torch.from_numpy(self.noise.stack(offsets, self.dim)).to(torch.float64)
        g = ops.es_gradient(utilities[0], utilities[1], eps, self.sigma)
        theta = self.model.flat_parameters().to(torch.float64)
        step_direction = (-g + self.l2_coeff * theta).to(torch.float32)  # Adam minimises
        offset = 0
        for p in self.model.parameters():
            n = p.numel()
            p.grad = step_direction[offset : offset + n].reshape(p.shape).clone()
            offset += n
        self.optimizer.step()
        self.generation += 1
        return {
            "return_mean": float(returns.mean()),
            "return_max": float(returns.max()),
            "grad_norm": float(g.norm()),
            "theta_norm": float(theta.norm()),
        }
