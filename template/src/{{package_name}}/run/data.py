"""What the examples' data modules share: a seeded split, the training split's statistics,
each process's batches (epoch ``k``'s order seeded by ``seed + k`` alone, so a resumed run
sees an uninterrupted one's; a batch size counts the items of a step over every process, so
N processes take one's batches), the columns a predict run reads, and where it writes.
"""

import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import lightning as L
import torch
from lightning.pytorch.utilities.parsing import AttributeDict
from torch.utils.data import DataLoader, Dataset, DistributedSampler

from ..core.shapes import Float, Int, Tensor
from .errors import UserError


def positions(count: int) -> torch.dtype:
    """4-byte positions where they fit (a narrow table holds nearly as many bytes of
    indices as of data); ``randperm`` draws the same permutation in either type."""
    return torch.int32 if count <= torch.iinfo(torch.int32).max else torch.int64


def split(
    count: int, val_fraction: float, generator: torch.Generator, most: int | None = None
) -> tuple[Int[Tensor, " val"], Int[Tensor, " train"]]:
    """Positions ``0 .. count - 1`` in an order drawn from ``generator``: ``val_fraction`` of
    them for validation, at least 1 and at most ``most``, the rest for training."""
    num_val = min(max(1, round(val_fraction * count)), count if most is None else most)
    order = torch.randperm(count, generator=generator, dtype=positions(count))
    return order[:num_val], order[num_val:]


def column_stats(
    values: Float[Tensor, " row *feature"], rows: Int[Tensor, " split"], chunk: int = 8192
) -> tuple[Float[Tensor, " *feature"], Float[Tensor, " *feature"]]:
    """Mean and standard deviation of ``values[rows]``, in float64 a chunk of rows at a time
    so that a large table is never copied whole; 1 where the deviation is zero or undefined."""
    total = torch.zeros(values.shape[1:], dtype=torch.float64)
    for part in rows.split(chunk):
        total += values[part].double().sum(dim=0)
    mean = total / len(rows)
    squares = torch.zeros_like(total)
    for part in rows.split(chunk):
        squares += ((values[part].double() - mean) ** 2).sum(dim=0)
    std = (squares / max(len(rows) - 1, 1)).sqrt().float()
    return mean.float(), torch.where(std > 0, std, torch.ones_like(std))


def per_process(batch_size: int, world: int) -> int:
    """A process's share of ``batch_size``, or a :class:`UserError` if it does not divide:
    the CLI asks before a fit starts its processes, the loader again when it is built."""
    if batch_size % world:
        raise UserError(f"--data.batch_size {batch_size} does not split over {world} processes")
    return batch_size // world


def batches(
    dataset: Dataset, batch_size: int, trainer: L.Trainer | None, shuffle: bool, seed: int
) -> DataLoader:
    """This process's batches of ``dataset``, which takes a tensor of positions and returns
    a whole batch: a per-item sampler would cost a ``__getitem__`` per item and a collate."""
    world, rank = (trainer.world_size, trainer.global_rank) if trainer else (1, 0)
    sampler = ShardBatches(dataset, per_process(batch_size, world), world, rank, shuffle, seed)
    return DataLoader(dataset, sampler=sampler, batch_size=None)  # each item a whole batch


class ShardBatches(DistributedSampler):
    """The positions a ``DistributedSampler`` gives this process, as tensors of ``batch_size``.
    A ``DistributedSampler`` even in one process, so that Lightning calls ``set_epoch`` on it
    and swaps in none of its own (a ``BatchSampler`` around one would hide both); the order
    is a tensor, several times smaller than the parent's list of Python ints."""

    def __init__(self, dataset: Dataset, batch_size: int, *args: Any) -> None:
        super().__init__(dataset, *args)
        self.batch_size = batch_size

    def __iter__(self) -> Iterator[Tensor]:  # pyright: ignore[reportIncompatibleMethodOverride]
        # A generator, so the order is drawn at the first batch, after Lightning's
        # set_epoch: a resumed run makes its iterator before that call.
        count = len(self.dataset)  # type: ignore[arg-type]
        if self.shuffle:
            generator = torch.Generator().manual_seed(self.seed + self.epoch)
            order = torch.randperm(count, generator=generator, dtype=positions(count))
        else:
            order = torch.arange(count, dtype=positions(count))
        # The parent's order: padded by wrapping around to total_size, then every
        # num_replicas-th position from this rank.
        if self.num_replicas > 1:
            order = order[torch.arange(self.rank, self.total_size, self.num_replicas) % count]
        yield from order.split(self.batch_size)

    def __len__(self) -> int:
        return math.ceil(self.num_samples / self.batch_size)


def checkpoint_hparams(trainer: L.Trainer | None) -> AttributeDict:
    """The hyperparameters of the model a predict run built from its checkpoint, which say
    what columns to read and how: the data module asks the trainer, not the model's class."""
    model = trainer.lightning_module if trainer else None
    if model is None or not model.hparams.get("feature_columns"):
        raise UserError("the checkpoint does not say which columns its model reads")
    return AttributeDict(model.hparams)  # read as attributes: hp.feature_columns


def predictions_csv(trainer: L.Trainer) -> Path:
    """Where a predict run writes: ``predictions.csv`` in its log folder, made here."""
    path = Path(trainer.log_dir or trainer.default_root_dir) / "predictions.csv"
    path.parent.mkdir(parents=True, exist_ok=True)
    return path
