"""Predict a new CSV from a checkpoint, ``CHUNK_ROWS`` rows at a time, so that the file's
size is bounded by the disk, not the memory: each chunk is encoded as the checkpoint's model
was trained, and :class:`PredictionWriter` appends it to ``predictions.csv``.
"""

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

import lightning as L
import numpy as np
import pandas as pd
import torch
from lightning.pytorch.callbacks import Callback
from torch.utils.data import IterableDataset

from ..core.shapes import Bool, Float, Tensor
from ..run.data import predictions_csv
from ..run.errors import UserError
from ..run.tables import reading
from .table import Encoding, TableOptions, read_csv, read_header

CHUNK_ROWS = 65536


class PredictChunk(NamedTuple):
    rows: pd.DataFrame
    features: Float[Tensor, "batch feature"]
    complete: Bool[Tensor, " batch"]
    unseen: int


class PredictChunks(IterableDataset):
    def __init__(self, path: Path, encoding: Encoding, options: TableOptions) -> None:
        self.path, self.encoding, self.options = path, encoding, options
        header = read_header(path, options, "--data.predict_csv")
        if absent := [name for name in encoding.columns if name not in header]:
            raise UserError(
                f"{path}: no column {', '.join(map(repr, absent))}; the model reads "
                f"{encoding.columns}"
            )
        if "prediction" in header:
            raise UserError(f"{path}: already has a column 'prediction'; rename it first")

    def __iter__(self) -> Iterator[PredictChunk]:
        chunks = read_csv(self.path, self.options, list(self.encoding.categories), CHUNK_ROWS)
        assert not isinstance(chunks, pd.DataFrame)
        while True:
            with reading(self.path):  # a parse error part-way through
                chunk = next(chunks, None)
            if chunk is None:
                return
            chunk.columns = [str(name).strip() for name in chunk.columns]
            chunk.index = chunk.index + 1  # data rows, for messages
            features, complete, unseen = self.encoding.encode(chunk, self.path)
            yield PredictChunk(
                chunk, torch.from_numpy(features), torch.from_numpy(complete), unseen
            )


class PredictionWriter(Callback):
    """Append each predicted chunk to ``predictions.csv``; print its path and the counts of
    incomplete rows and unseen levels at the end."""

    def on_predict_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self.path = predictions_csv(trainer)
        self.rows = self.incomplete = self.unseen = 0
        if trainer.is_global_zero:
            self.path.unlink(missing_ok=True)

    def on_predict_batch_end(self, trainer, pl_module, outputs, batch, batch_idx, dataloader_idx=0):
        # Every process reads the whole file; one writes it.
        if not (trainer.is_global_zero and isinstance(batch, PredictChunk)):
            return
        values = outputs.detach().float().cpu().numpy()
        complete = batch.complete.cpu().numpy()
        options = getattr(getattr(trainer, "datamodule", None), "options", TableOptions())
        batch.rows.assign(prediction=np.where(complete, values, np.nan)).to_csv(
            self.path,
            mode="a",
            header=self.rows == 0,
            index=False,
            sep=options.sep,
            decimal=options.decimal,
        )
        self.rows += len(complete)
        self.incomplete += int((~complete).sum())
        self.unseen += batch.unseen

    def on_predict_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if not trainer.is_global_zero:
            return
        incomplete = "a missing feature cell; their prediction is empty"
        unseen = "a category level the training split did not have; it is encoded as all zeros"
        for count, what in ((self.incomplete, incomplete), (self.unseen, unseen)):
            if count:
                print(f"warning: {count} of {self.rows} rows have {what}", file=sys.stderr)
        print(f"predictions of {self.rows} rows: {self.path}", flush=True)
