"""The sequence example: a Transformer encoder classifying padded, variable-length sequences:
``python -m <package>.sequence fit --config configs/sequence.yaml`` (``docs/sequence.md``).
"""

from .data import SequenceData
from .module import SequenceClassifier

__all__ = ["SequenceClassifier", "SequenceData"]
