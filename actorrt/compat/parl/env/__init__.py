"""PARL's ``parl.env``: gym wrappers PARL's scripts use, on gymnasium.

- ``CompatWrapper`` (``compat_wrappers``): gymnasium's API as old gym's (``reset()`` gives the
  observation, ``step()`` four values, ``seed()``);
- ``ActionMappingWrapper`` (``continuous_wrappers``): actions in [-1, 1] mapped to the box;
- ``VectorEnv`` (``vector_env``): a list of environments stepped together, reset when done;
- ``atari_wrappers`` (``wrap_deepmind``, ``MonitorEnv``, ``get_wrapper_by_cls``) and
  ``mujoco_wrappers`` (``wrap_rms``), imported when used.

Every wrapper here is a ``gym.Wrapper`` as the runner gives gym (``actorrt.compat.parl._gym``):
a name it does not have is looked up on what it wraps. What differs from PARL is in docs/parl.md.
"""

from __future__ import annotations

from actorrt.compat.parl.env.compat_wrappers import CompatWrapper
from actorrt.compat.parl.env.continuous_wrappers import ActionMappingWrapper
from actorrt.compat.parl.env.vector_env import VectorEnv

__all__ = ["ActionMappingWrapper", "CompatWrapper", "VectorEnv"]
