"""When a run first counts as solved: the rolling mean of finished episodes' returns."""

from collections.abc import Sequence


def first_solved(returns: Sequence[float], threshold: float, window: int) -> int | None:
    """Index of the first episode at which the mean of the last ``window`` returns reaches
    ``threshold``; None if it never does. Fewer than ``window`` episodes never count.
    """
    total = 0.0
    for index, value in enumerate(returns):
        total += value
        if index >= window:
            total -= returns[index - window]
        if index + 1 >= window and total / window >= threshold:
            return index
    return None
