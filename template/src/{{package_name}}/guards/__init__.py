"""Runtime guards for the shape mistakes that annotations cannot see.

- :mod:`.broadcast`: :class:`BroadcastGuard` and :class:`BroadcastError`; torch only, so it
  can be copied into plain PyTorch code.
- :mod:`.callbacks`: the Lightning callbacks, :class:`BroadcastGuardCallback` and
  :class:`NonFiniteLocator` (with :class:`NonFiniteError`).
"""

from .broadcast import BroadcastError, BroadcastGuard
from .callbacks import BroadcastGuardCallback, NonFiniteError, NonFiniteLocator

__all__ = [
    "BroadcastError",
    "BroadcastGuard",
    "BroadcastGuardCallback",
    "NonFiniteError",
    "NonFiniteLocator",
]
