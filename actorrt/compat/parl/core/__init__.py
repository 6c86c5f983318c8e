"""PARL's ``parl.core``: the torch backend's ``Model``, ``Algorithm`` and ``Agent`` are in
:mod:`actorrt.compat.parl.core.torch` (PARL 2.x with ``PARL_BACKEND=torch``; no other backend
is carried). Importing it imports torch and ``rl``."""
