"""PPO example: an actor-critic trained on gymnasium vector environments by Lightning.

Run it with ``python -m <package>.ppo fit --config configs/ppo.yaml``. ``PPOModule`` is
the algorithm, and logs its statistics; ``PPOReporting`` (a callback the command line
installs) adds the evaluations and the summary.
"""

from .module import PPOModule
from .reporting import PPOReporting

__all__ = ["PPOModule", "PPOReporting"]
