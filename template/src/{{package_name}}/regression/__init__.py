"""Regression example: an MLP fitted to a seeded synthetic set or to the user's CSV
(``python -m <package>.regression fit --config configs/regression.yaml``).
"""

from .data import RegressionData
from .module import RegressionModule

__all__ = ["RegressionData", "RegressionModule"]
