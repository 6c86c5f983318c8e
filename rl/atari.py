"""Atari: the standard 84x84 preprocessing and the Nature-DQN convolutional actor-critic.

Needs the ``atari`` extra (``pip install .[atari]``: ale-py, which ships the ROMs, and
opencv-python-headless for the resizing).
"""

from __future__ import annotations

from collections.abc import Sequence

import gymnasium as gym
import torch
from torch import nn

from rl import distributions
from rl.networks import ActorCriticModel

__all__ = ["AtariEnv", "ConvActorCritic"]


class AtariEnv:
    """A picklable env factory: ``ALE/<Game>-v5`` with no sticky actions, then 30 no-op starts,
    frame skip 4 (max over the last two frames), 84x84 grayscale, 4 frames stacked."""

    def __init__(self, env_id: str = "ALE/Pong-v5", frame_skip: int = 4, stack: int = 4) -> None:
        self.env_id = env_id
        self.frame_skip = frame_skip
        self.stack = stack

    def __call__(self) -> gym.Env:
        import ale_py
        from gymnasium.wrappers import AtariPreprocessing, FrameStackObservation

        gym.register_envs(ale_py)
        env = gym.make(self.env_id, frameskip=1, repeat_action_probability=0.0)
        env = AtariPreprocessing(env, frame_skip=self.frame_skip, screen_size=84, grayscale_obs=True, noop_max=30)
        return FrameStackObservation(env, self.stack)


class ConvActorCritic(ActorCriticModel):
    """Nature-DQN torso (3 conv layers, 512 units) with a categorical policy head and a value head.

    Observations are ``uint8 [B, stack, 84, 84]``; they are scaled to [0, 1] inside. An
    :class:`rl.ActorCriticModel` like :class:`rl.ActorCritic` (``act``, ``greedy``, ``value``,
    ``evaluate``), so PolicyGradient, A2C, PPO and IMPALA use it unchanged.
    """

    def __init__(self, observation_space: gym.Space, action_space: gym.Space, hidden: int = 512) -> None:
        super().__init__()
        if not isinstance(action_space, gym.spaces.Discrete):
            raise TypeError(f"ConvActorCritic: needs a discrete action space, got {action_space}")
        if observation_space.shape is None:
            raise TypeError(f"ConvActorCritic: needs stacked frames [stack, 84, 84], got {observation_space}")
        channels = int(observation_space.shape[0])
        self.torso = nn.Sequential(
            nn.Conv2d(channels, 32, 8, stride=4),
            nn.ReLU(),
            nn.Conv2d(32, 64, 4, stride=2),
            nn.ReLU(),
            nn.Conv2d(64, 64, 3, stride=1),
            nn.ReLU(),
            nn.Flatten(),
            nn.Linear(64 * 7 * 7, hidden),
            nn.ReLU(),
        )
        self.policy = nn.Linear(hidden, int(action_space.n))
        self.baseline = nn.Linear(hidden, 1)
        nn.init.orthogonal_(self.policy.weight, 0.01)
        nn.init.zeros_(self.policy.bias)

    def _features(self, obs: torch.Tensor) -> tuple[torch.Tensor, Sequence[int]]:
        lead = obs.shape[:-3]
        x = obs.reshape(-1, *obs.shape[-3:]).to(torch.float32) / 255.0
        return self.torso(x), lead

    def act(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        h, _ = self._features(obs)
        action, log_prob = distributions.categorical_sample(self.policy(h))
        return action, log_prob, self.baseline(h).squeeze(-1)

    def greedy(self, obs: torch.Tensor) -> torch.Tensor:
        h, _ = self._features(obs)
        return self.policy(h).argmax(-1)

    def value(self, obs: torch.Tensor) -> torch.Tensor:
        h, lead = self._features(obs)
        return self.baseline(h).reshape(*lead)

    def evaluate(self, obs: torch.Tensor, action: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        h, lead = self._features(obs)
        logits = self.policy(h).reshape(*lead, -1)
        return (
            distributions.categorical_log_prob(logits, action),
            distributions.categorical_entropy(logits),
            self.baseline(h).reshape(*lead),
        )


def frames(env_steps: int, frame_skip: int = 4) -> int:
    """Emulator frames behind ``env_steps`` agent steps."""
    return int(env_steps * frame_skip)
