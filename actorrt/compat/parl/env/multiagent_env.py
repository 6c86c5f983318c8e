"""PARL's ``parl.env.multiagent_env.MAenv``: the multi-agent particle environments (MPE) with
PARL's interface, on ``mpe2`` (the MPE of today's PettingZoo family; PARL's wrapper needed
PettingZoo 1.17, which does not install on Python 3.11).

``MAenv(scenario_name, continuous_actions=False)`` gives per-agent lists: ``observation_space``,
``action_space``, ``obs_shape_n``, ``act_shape_n`` (sizes), ``n``, ``agents_name``; ``reset()``
returns the list of observations, ``step(action_n)`` the lists ``(obs_n, reward_n, done_n,
info_n)``. A discrete action is given as a vector (its argmax is taken: MADDPG's relaxed
actions), a continuous one in ``[-1, 1]`` (mapped onto the space's bounds). An episode ends
after 25 steps (``done`` true for every agent). Imports ``mpe2`` (``pip install mpe2``).
"""

from __future__ import annotations

import importlib
from typing import Any

import numpy as np

__all__ = ["MAenv", "ScenarioEnv", "scenario_names"]

# PARL's scenarios and their settings; mpe2's module of each (PettingZoo 1.17's versions were v2/v3).
_SCENARIOS: dict[str, tuple[str, dict[str, Any]]] = {
    "simple": ("simple_v3", {}),
    "simple_adversary": ("simple_adversary_v3", {"N": 2}),
    "simple_crypto": ("simple_crypto_v3", {}),
    "simple_push": ("simple_push_v3", {}),
    "simple_speaker_listener": ("simple_speaker_listener_v4", {}),
    "simple_spread": ("simple_spread_v3", {"N": 3, "local_ratio": 0}),
    "simple_tag": ("simple_tag_v3", {"num_good": 1, "num_adversaries": 3, "num_obstacles": 2}),
    "simple_world_comm": (
        "simple_world_comm_v3",
        {"num_good": 2, "num_adversaries": 4, "num_obstacles": 1, "num_food": 2, "num_forests": 2},
    ),
}
MAX_CYCLES = 25


def scenario_names() -> list[str]:
    """The scenarios ``MAenv`` knows."""
    return list(_SCENARIOS)


def MAenv(scenario_name: str, continuous_actions: bool = False, render_mode: str | None = None) -> ScenarioEnv:
    """The scenario as PARL's MAenv built it (25 steps an episode). ``render_mode="human"``
    opens a window for ``render()`` (PARL's ``--show``)."""
    if scenario_name not in _SCENARIOS:
        raise ValueError(f"MAenv: unknown scenario {scenario_name!r} (the scenarios: {', '.join(_SCENARIOS)})")
    module_name, kwargs = _SCENARIOS[scenario_name]
    try:
        module = importlib.import_module(f"mpe2.{module_name}")
    except ImportError as e:
        raise ImportError("MAenv needs the multi-agent particle environments: pip install mpe2") from e
    env = module.parallel_env(
        max_cycles=MAX_CYCLES, continuous_actions=continuous_actions, render_mode=render_mode, **kwargs
    )
    return ScenarioEnv(env, continuous_actions)


def _size(space: Any) -> int:
    """A space's size as PARL's ``get_shape``: a Box's length, a Discrete's number of actions."""
    if hasattr(space, "n"):
        return int(space.n)
    shape = tuple(space.shape)
    if len(shape) != 1:
        raise TypeError(f"MAenv: a space of shape {shape} (only flat Box and Discrete spaces are carried)")
    return int(shape[0])


class ScenarioEnv:
    """A PettingZoo parallel environment with PARL's list interface (what ``MAenv`` returns)."""

    def __init__(self, env: Any, continuous_actions: bool = False) -> None:
        self.env = env
        self.continuous_actions = continuous_actions
        self.agents_name: list[str] = list(env.possible_agents)
        self.observation_space = [env.observation_space(a) for a in self.agents_name]
        self.action_space = [env.action_space(a) for a in self.agents_name]
        self.n = len(self.agents_name)
        self.obs_shape_n = [_size(s) for s in self.observation_space]
        self.act_shape_n = [_size(s) for s in self.action_space]

    def get_shape(self, input_space: Any) -> int:
        """A space's size (PARL's name)."""
        return _size(input_space)

    def reset(self, seed: int | None = None) -> list[np.ndarray]:
        """A new episode; every agent's observation."""
        obs, _ = self.env.reset(seed=seed)
        return [obs[a] for a in self.agents_name]

    def step(self, actions: list[np.ndarray]) -> tuple[list[np.ndarray], list[float], list[bool], list[dict[str, Any]]]:
        """Every agent's action (a vector each); every agent's ``(obs, reward, done, info)`` as four lists."""
        if len(actions) != self.n:
            raise ValueError(f"MAenv.step: {len(actions)} actions for {self.n} agents")
        action_dict: dict[str, Any] = {}
        for name, act, space in zip(self.agents_name, actions, self.action_space, strict=True):
            act = np.asarray(act)
            if self.continuous_actions:
                if not (np.all(act <= 1.0 + 1e-3) and np.all(act >= -1.0 - 1e-3)):
                    raise ValueError(f"MAenv.step: {name}'s action should be in [-1, 1], got {act}")
                low, high = space.low, space.high
                action_dict[name] = np.clip(low + (act + 1.0) * (high - low) / 2.0, low, high).astype(space.dtype)
            else:
                action_dict[name] = int(np.argmax(act))
        obs, rewards, terminations, truncations, infos = self.env.step(action_dict)
        return (
            [obs[a] for a in self.agents_name],
            [float(rewards[a]) for a in self.agents_name],
            [bool(terminations[a] or truncations[a]) for a in self.agents_name],
            [infos.get(a, {}) for a in self.agents_name],
        )

    def render(self) -> Any:
        """Draw the world (the environment must be made with ``render_mode``)."""
        if self.env.render_mode is None:
            raise RuntimeError('MAenv.render: make the environment with MAenv(name, render_mode="human") to render')
        return self.env.render()

    def close(self) -> None:
        """Close the environment (and its window)."""
        self.env.close()
