"""PPO example: an actor-critic trained on gymnasium vector environments by Lightning.

Run it with ``python -m <package>.ppo fit --config configs/ppo.yaml``.
"""

from .module import PPOModule

__all__ = ["PPOModule"]
