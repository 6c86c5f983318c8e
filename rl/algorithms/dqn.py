"""DQN (Mnih et al. 2015) with a target network and double Q-learning (van Hasselt et al. 2016).

    a*  = argmax_a Q(s', a; theta)                         (online net picks, double DQN)
    y   = r + gamma * (1 - terminated) * Q(s', a*; theta^-)  (target net evaluates)
    loss = (Q(s, a; theta) - y)^2        (or Huber, as in the Nature paper, with loss="huber")

A batch with importance ``weights`` (a :class:`rl.PrioritizedReplay`'s) weighs each sample's loss
by them (Schaul et al. 2016); :attr:`DQN.td_errors` holds ``y - Q(s, a)`` for its priorities.

The default is the squared error. On CartPole the Huber loss diverges: its gradient is capped at
1, so the few terminal transitions (about 4% of the data, target 1) cannot pull down the values
that the many bootstrapped transitions push up, and Q grows past ``1 / (1 - gamma)``
(measured: mean Q about 10^4 after 3000 updates on a fixed random-policy buffer, against about
45 with the squared error).

``theta^-`` follows ``theta`` every ``target_update_interval`` updates, hard (``tau = 1``) or
softly (``theta^- <- (1 - tau) theta^- + tau theta``); with ``target_update_interval=None``, only
when the caller says so (:meth:`DQN.sync_target`). Acting is epsilon-greedy; the training
loop sets :attr:`DQN.epsilon`.
"""

from __future__ import annotations

import copy

import numpy as np
import torch
from torch.nn.functional import mse_loss, smooth_l1_loss

from rl.algorithm import Algorithm, PolicyStep, check_gamma
from rl.algorithms._off_policy import check_tau
from rl.networks import QNetwork
from rl.storage import Transition

__all__ = ["DQN"]


class DQN(Algorithm):
    """Double DQN with a target network and epsilon-greedy exploration."""

    saved_attributes = ("_updates",)  # the target network's schedule counts on it

    model: QNetwork

    def __init__(
        self,
        model: QNetwork,
        lr: float = 1e-3,
        gamma: float = 0.99,
        target_update_interval: int | None = 10,
        tau: float = 1.0,
        double_q: bool = True,
        max_grad_norm: float | None = 10.0,
        epsilon: float = 1.0,
        loss: str = "mse",
        fused: bool | None = None,
    ) -> None:
        super().__init__(model, fused)
        check_tau(tau)
        if target_update_interval is not None and target_update_interval < 1:
            raise ValueError(
                f"target_update_interval must be >= 1 (updates between target updates), got {target_update_interval}"
            )
        self.target_model = copy.deepcopy(model)
        self.target_model.requires_grad_(False)
        self.gamma = check_gamma(gamma)
        self.target_update_interval = target_update_interval
        self.tau = tau
        self.double_q = double_q
        self.max_grad_norm = max_grad_norm
        if loss not in ("mse", "huber"):
            raise ValueError(f"unknown loss {loss!r} (mse or huber)")
        self.loss = loss
        self.epsilon = epsilon
        """Probability of a uniformly random action in :meth:`sample`."""
        self.optimizer = torch.optim.Adam(model.parameters(), lr=lr, fused=True)
        self._updates = 0
        self.td_errors: np.ndarray = np.zeros(0, np.float32)
        """The last batch's TD errors ``y - Q(s, a)``, for a prioritised replay's priorities."""

    def sample(self, obs: torch.Tensor) -> PolicyStep:
        """Epsilon-greedy actions (no log-prob, no value)."""
        greedy = self.model(obs).argmax(-1)
        explore = torch.rand(greedy.shape) < self.epsilon
        random = torch.randint(self.model.num_actions, greedy.shape)
        return PolicyStep(torch.where(explore, random, greedy), None, None)

    def predict(self, obs: torch.Tensor) -> torch.Tensor:
        """Greedy actions."""
        return self.model(obs).argmax(-1)

    def learn(self, batch: Transition[torch.Tensor]) -> dict[str, float]:
        """One TD update on a batch of transitions (tensors)."""
        q = self.model(batch.obs).gather(1, batch.actions.long().unsqueeze(1)).squeeze(1)
        with torch.no_grad():
            next_q_target = self.target_model(batch.next_obs)
            if self.double_q:
                next_action = self.model(batch.next_obs).argmax(-1, keepdim=True)
            else:
                next_action = next_q_target.argmax(-1, keepdim=True)
            next_q = next_q_target.gather(1, next_action).squeeze(1)
            target = batch.rewards + self.gamma * (~batch.terminated).float() * next_q
        weights = getattr(batch, "weights", None)  # a prioritised replay's importance weights
        if weights is None:
            loss = mse_loss(q, target) if self.loss == "mse" else smooth_l1_loss(q, target)
        else:
            per_sample = (q - target).square() if self.loss == "mse" else smooth_l1_loss(q, target, reduction="none")
            loss = (weights * per_sample).mean()
        self.td_errors = (target - q).detach().numpy()

        grad_norm = self._step(loss, self.max_grad_norm)

        self._updates += 1
        if self.target_update_interval is not None and self._updates % self.target_update_interval == 0:
            self.sync_target()
        return {"td_loss": loss.item(), "q_mean": float(q.detach().mean()), "grad_norm": float(grad_norm)}

    def sync_target(self) -> None:
        """``theta^-`` one step towards ``theta``: ``theta^- <- (1 - tau) theta^- + tau theta``."""
        self.model.sync_weights_to(self.target_model, decay=1.0 - self.tau)
