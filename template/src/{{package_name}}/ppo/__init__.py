"""PPO example: an actor-critic trained on gymnasium vector environments by Lightning.

Run it with ``python -m <package>.ppo fit --config configs/ppo.yaml``. ``PPOModule`` is
the algorithm; ``PPOReporting`` (a callback the command line installs) its metrics,
evaluations and summary.
"""

from .module import PPOModule
from .reporting import PPOReporting

__all__ = ["PPOModule", "PPOReporting"]
