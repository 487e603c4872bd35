"""Validation metrics over the whole split, each row once, under DDP too: those of a single
process on the same weights.
"""

import lightning as L
import torch
from einops import rearrange
from torch.utils.data import DataLoader

from ..core.shapes import Float, Tensor


class Column:
    """A split's values, a batch at a time: what a list of tensors and ``torch.cat`` do, in
    one tensor that doubles when full, since thousands of small tensors fragment the heap and
    grow the process. At least float32, so that metrics over bf16 are summed in full."""

    def __init__(self) -> None:
        self._values, self._length = torch.empty(0), 0  # float32: the narrowest it gets

    def append(self, batch: Float[Tensor, " batch"]) -> None:
        """Copy ``batch`` in after the values so far; a wider dtype widens the column."""
        end = self._length + len(batch)
        dtype = torch.promote_types(batch.dtype, self._values.dtype)
        if end > len(self._values) or dtype != self._values.dtype:
            grown = batch.new_empty(max(2 * end, 4096), dtype=dtype)
            grown[: self._length] = self._values[: self._length]
            self._values = grown
        self._values[self._length : end] = batch
        self._length = end

    def take(self) -> Float[Tensor, " row"]:
        """Every value appended, in order; the column starts empty again."""
        if not self._length:
            raise RuntimeError("take() before any append(): the split had no batches")
        values, self._values, self._length = self._values[: self._length], torch.empty(0), 0
        return values


def gathered(module: L.LightningModule, values: Float[Tensor, " row"]) -> Float[Tensor, " row"]:
    """Every process's ``values`` in the split's order: process ``r`` had rows ``r, r +
    world, ...`` and, to even out the shards, a few repeats from the start, which the split's
    length cuts off. One process's values are already in order."""
    if module.trainer.world_size == 1:
        return values
    everyone = module.all_gather(values)
    assert isinstance(everyone, Tensor)
    in_order = rearrange(everyone, "world row -> (row world)")
    loader = module.trainer.val_dataloaders
    if isinstance(loader, DataLoader):
        in_order = in_order[: len(loader.dataset)]  # type: ignore[arg-type]
    return in_order
