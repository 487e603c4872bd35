"""PPO example: an actor-critic trained on gymnasium vector environments by Lightning
(``python -m <package>.ppo fit --config configs/ppo.yaml``)."""

from .module import PPOModule
from .reporting import PPOReporting

__all__ = ["PPOModule", "PPOReporting"]
