"""CMA-ES: the covariance matrix adaptation evolution strategy (Hansen & Ostermeier 2001; Hansen,
"The CMA Evolution Strategy: A Tutorial", 2016), on the flat parameter vector of a policy.

    for each generation:
        x_k = m + sigma B D z_k,  z_k ~ N(0, I),  k = 1..lambda       (B D D B^T = C)
        evaluate F(x_k)                                                (returns of whole episodes)
        m     <- weighted mean of the best mu candidates
        p_c, p_sigma <- evolution paths of the mean's steps
        C     <- rank-one (p_c) and rank-mu (best steps) updates
        sigma <- sigma exp((|p_sigma| / E|N(0, I)| - 1) c_sigma / d_sigma)

The strategy itself is pycma's (``cma.CMAEvolutionStrategy``, by the method's author), not
rewritten here: :class:`CMAES` adapts it to :class:`rl.Algorithm` (``ask`` / ``tell`` on returns,
the policy acting with the distribution's mean). Unlike :class:`rl.ES` it needs whole candidate
vectors (``C`` is learnt, so a seed no longer names a perturbation): fine for the small policies
CMA-ES suits (its cost per generation grows with ``d^2``).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from rl.algorithms.es import PolicySearch
from rl.networks import MLPPolicy

__all__ = ["CMAES"]


class CMAES(PolicySearch):
    """CMA-ES on the flat parameter vector of an :class:`rl.MLPPolicy`.

    :meth:`ask` returns a generation's candidates ``[population, d]``; the caller evaluates them
    and hands their returns to :meth:`tell`, which updates the search distribution and loads its
    mean into the model (what :meth:`predict` acts with). ``population=None`` takes CMA-ES's
    default ``4 + floor(3 ln d)``. ``diagonal=True`` learns a diagonal covariance only (sep-CMA,
    linear cost in ``d``; for larger policies).

    Checkpoints (``Agent.save``) hold the model, i.e. the mean; :meth:`Agent.restore` restarts the
    search from that mean with ``sigma``.
    """

    saved_attributes = ("generation",)

    label = "CMA-ES"

    def __init__(
        self,
        model: MLPPolicy,
        sigma: float = 0.5,
        population: int | None = None,
        diagonal: bool = False,
        seed: int = 0,
    ) -> None:
        super().__init__(model)
        if sigma <= 0:
            raise ValueError(f"sigma must be > 0, got {sigma}")
        if population is not None and population < 2:
            raise ValueError(f"population must be >= 2, got {population}")
        self.sigma0 = float(sigma)
        self.population_size = population
        self.diagonal = diagonal
        self.seed = seed
        self.dim = model.num_parameters
        self.generation = 0
        self._strategy: Any = None

    def _search(self) -> Any:
        """The pycma strategy, started (lazily, so that a restored mean is the start) at the model."""
        if self._strategy is None:
            import cma

            options: dict[str, Any] = {"seed": self.seed + 1, "verbose": -9, "CMA_diagonal": self.diagonal}
            if self.population_size is not None:
                options["popsize"] = self.population_size
            x0 = self.model.flat_parameters().to(torch.float64).numpy()
            self._strategy = cma.CMAEvolutionStrategy(x0, self.sigma0, options)
        return self._strategy

    @property
    def population(self) -> int:
        """Candidates per generation (``lambda``)."""
        return int(self._search().popsize)

    @property
    def sigma(self) -> float:
        """The current overall step size."""
        return float(self._search().sigma)

    # -- the generation (acting, theta and learn: PolicySearch's; theta is the mean) ---------
    def ask(self) -> np.ndarray:
        """This generation's candidates ``[population, d]`` (float32)."""
        return np.asarray(self._search().ask(), dtype=np.float64).astype(np.float32)

    def tell(self, candidates: np.ndarray, returns: np.ndarray) -> dict[str, float]:
        """Update the distribution with the candidates' returns (higher is better) and load the
        new mean into the model. ``candidates`` must be what :meth:`ask` gave, in any order
        matching ``returns``."""
        candidates = np.asarray(candidates, dtype=np.float64)
        returns = np.asarray(returns, dtype=np.float64)
        if candidates.shape != (len(returns), self.dim):
            raise ValueError(f"tell needs [n, {self.dim}] candidates for n returns, got {candidates.shape}")
        if not np.all(np.isfinite(returns)):
            raise ValueError("tell got a non-finite return")
        strategy = self._search()
        strategy.tell(list(candidates), list(-returns))  # pycma minimises
        self.model.set_flat_parameters(torch.as_tensor(strategy.mean, dtype=torch.float32))
        self.generation += 1
        return {
            "return_mean": float(returns.mean()),
            "return_max": float(returns.max()),
            "sigma": float(strategy.sigma),
            "theta_norm": float(np.linalg.norm(strategy.mean)),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Load a checkpoint; the search restarts from its mean (see the class docstring)."""
        super().load_state_dict(state)
        self._strategy = None
