"""The sequence DataModule: padded batches of variable-length sequences, read from a *long*
table (one row per step; ``docs/sequence.md``), by default the shipped Japanese Vowels set:
nine speakers saying /ae/, 640 utterances of 7 to 29 steps of 12 LPC cepstrum
coefficients; the task is to name the speaker.

Each class's sequences are split at random, whole, so every class is in both splits. A
batch holds each sequence from its first step, zeros after its end, and ``keep`` saying
which steps are real: every consumer takes that mask (``core/masks.py``), so padding can
change nothing.

The data: "Japanese Vowels" by M. Kudo, J. Toyama and M. Shimbo (Pattern Recognition
Letters 20, 1999), from the UCI Machine Learning Repository
(https://archive.ics.uci.edu/ml/datasets/Japanese+Vowels), which licenses it CC BY 4.0
(https://creativecommons.org/licenses/by/4.0/); copied from the aeon package's files.
Changed: one long table (``utterance``, ``step``, ``speaker``, ``lpc_1`` to ``lpc_12``),
values rounded to 6 decimals, speakers ``1`` to ``9`` named ``speaker_1`` to ``speaker_9``;
utterances 1 to 270 were the original training set.
"""

from pathlib import Path
from typing import Any

import lightning as L
import numpy as np
import pandas as pd
import torch
from lightning.pytorch.utilities import rank_zero_info
from torch.utils.data import DataLoader, Dataset

from ..core.masks import real_steps
from ..core.shapes import Bool, Float, Int, Tensor
from ..run import ranges
from ..run.data import batches, checkpoint_hparams, column_stats, split
from ..run.errors import UserError
from ..run.tables import Missing, numeric, reading, text_column

SHIPPED = Path(__file__).with_name("japanese_vowels.csv.gz")
Batch = tuple[
    Float[Tensor, "batch time feature"], Bool[Tensor, "batch time"], Int[Tensor, " batch"]
]
"""Padded features, the real steps, and each sequence's class index (or its row in the
table, for predict)."""


def _plain(value: Any) -> Any:
    return value.item() if isinstance(value, np.generic) else value


def read_sequences(
    path: Path,
    sequence: str,
    order: str | None,
    target: str | None,
    missing: Missing,
    feature_columns: list[str] | None = None,
) -> tuple[list[Any], list[Float[Tensor, "time feature"]], list[Any], list[str]]:
    """Each sequence's name, steps and label (none without a ``target``), and the feature
    columns of a long table, or a :class:`UserError` naming what is wrong. The features are
    ``feature_columns`` (a checkpoint's, for predict), or else every other numeric column."""
    if not path.is_file():  # the table to predict comes with its checkpoint's feature columns
        option = "--data.csv_path" if feature_columns is None else "--data.predict_csv"
        raise UserError(f"{option} {path}: no such file")
    try:
        with reading(path):
            frame = pd.read_parquet(path) if path.suffix == ".parquet" else pd.read_csv(path)
    except ImportError:  # pandas found no Parquet engine
        hint = "Parquet needs pyarrow or fastparquet: pip install -e '.[parquet]'"
        raise UserError(f"{path}: {hint}") from None
    frame.index = pd.RangeIndex(1, len(frame) + 1)  # data rows, whatever a Parquet file kept
    named = [column for column in (sequence, order, target) if column is not None]
    if len(set(named)) < len(named):
        raise UserError(f"--data.sequence, --data.order and --data.target name {named}: one each")
    if feature_columns is None:
        others = [column for column in frame.columns if column not in named]
        feature_columns = [str(c) for c in others if pd.api.types.is_numeric_dtype(frame[c])]
        if not feature_columns:
            raise UserError(f"{path}: no numeric column left for features besides {named}")
        left_out = [text_column(frame[c]) for c in others if str(c) not in feature_columns]
        rank_zero_info(
            f"{path}: {len(feature_columns)} feature columns"
            + (f"; left out: {', '.join(left_out)}" if left_out else "")
        )
    if absent := [column for column in [*named, *feature_columns] if column not in frame.columns]:
        known = ", ".join(map(str, frame.columns))
        raise UserError(f"{path}: no column {', '.join(map(repr, absent))}; it has {known}")
    frame = pd.DataFrame(frame.loc[:, [*named, *feature_columns]])
    features = pd.DataFrame(frame.loc[:, feature_columns].apply(pd.to_numeric, errors="coerce"))
    gaps = pd.Series(features.isna().any(axis=1) | frame.loc[:, named].isna().any(axis=1))
    if gaps.any() and missing == "error":
        raise UserError(
            f"{path}: data row {gaps.to_numpy().argmax() + 1} has a missing or non-numeric value "
            f"({int(gaps.sum())} such rows); --data.missing drop leaves them out"
        )
    if gaps.any():
        if lost := set(frame[sequence].dropna()) - set(frame.loc[~gaps, sequence]):
            raise UserError(
                f"{path}: sequence {_plain(sorted(lost, key=str)[0])!r} has no row left "
                f"after --data.missing drop ({len(lost)} such sequences)"
            )
        frame, features = frame.loc[~gaps], features.loc[~gaps]
    if target is not None:
        labels = pd.Series(frame.groupby(sequence, sort=False)[target].unique())
        if len(mixed := labels.loc[labels.map(len) > 1]):
            first, second = map(_plain, mixed.iloc[0][:2])
            raise UserError(
                f"{path}: sequence {_plain(mixed.index[0])!r} has more than one {target!r}: "
                f"{first!r} and {second!r}; the target is one label per sequence"
            )
    if order is not None:
        if not numeric(frame[order]):
            text = text_column(frame[order])
            raise UserError(f"{path}: --data.order column {text}; steps are ordered by numbers")
        if len(repeated := frame.loc[frame.duplicated(subset=[sequence, order])]):
            raise UserError(
                f"{path}: sequence {_plain(repeated[sequence].iloc[0])!r} has {order!r} "
                f"{_plain(repeated[order].iloc[0])!r} twice; each step needs its own place"
            )
        frame = frame.sort_values(by=[sequence, order], kind="stable")
        features = features.loc[frame.index]
    values = features.to_numpy(dtype=np.float32)
    groups = frame.groupby(sequence, sort=False).indices
    return (
        [_plain(name) for name in groups],
        [torch.from_numpy(values[rows]) for rows in groups.values()],
        [_plain(frame[target].iloc[rows[0]]) for rows in groups.values()] if target else [],
        feature_columns,
    )


def pad(
    steps: list[Float[Tensor, "time feature"]],
) -> tuple[Float[Tensor, "batch time feature"], Bool[Tensor, "batch time"]]:
    """Stacked sequences, zero-padded after each one's end, and the mask of real steps."""
    lengths = torch.tensor([len(sequence) for sequence in steps])
    padded = torch.nn.utils.rnn.pad_sequence(steps, batch_first=True)
    return padded, real_steps(lengths, padded.shape[1])


class Sequences(Dataset):
    """``(steps, label)`` items, indexed by a tensor of positions: a whole padded batch."""

    def __init__(self, items: list[tuple[Tensor, int]]) -> None:
        self.items = items

    def __len__(self) -> int:
        return len(self.items)

    def __getitem__(self, index: Tensor) -> Batch:
        picked = [self.items[position] for position in index.tolist()]
        features, keep = pad([steps for steps, _ in picked])
        return features, keep, torch.tensor([label for _, label in picked])


class SequenceData(L.LightningDataModule):
    def __init__(
        self,
        csv_path: Path | None = None,
        target: str = "speaker",
        sequence: str = "utterance",
        order: str | None = None,
        predict_csv: Path | None = None,
        missing: Missing = "error",
        val_fraction: ranges.OpenUnitInterval = 0.2,
        batch_size: ranges.PositiveInt = 32,
        seed: int = 0,
    ) -> None:
        """
        Args:
            csv_path: Long table to train on (CSV, or Parquet with the [parquet] extra): one row per
                step. Leave unset for the shipped Japanese Vowels set.
            target: Column of the class label (numbers or text), the same on every row of a
                sequence.
            sequence: Column naming the sequence a row belongs to.
            order: Column giving the steps' order within a sequence; None keeps the
                table's row order (the shipped set is ordered by its ``step`` column).
            predict_csv: Table to predict, for the ``predict`` subcommand only; it needs the
                feature columns the checkpoint was trained on, ``sequence`` and ``order``.
            missing: What a row with a missing or non-numeric value does: ``error`` refuses
                the table, ``drop`` leaves the row out.
            val_fraction: Share of each class's sequences held out for validation, drawn at
                random: at least 1 and all but 1 of the class's.
            batch_size: Sequences per optimizer step, over all processes together.
            seed: Seed of the train/validation split and of every epoch's training order.
        """
        ranges.check(SequenceData.__init__, locals())
        super().__init__()
        self.sequence, self.order, self.batch_size, self.seed = sequence, order, batch_size, seed
        self.missing: Missing = missing
        self.predict_csv = Path(predict_csv) if predict_csv else None
        if self.predict_csv:
            return  # predict reads its table once the checkpoint has said which features
        path = SHIPPED if csv_path is None else Path(csv_path)
        if csv_path is None and order is None:
            order = "step"  # the shipped table's; left unnamed, it would be read as a feature
        _, steps, labels, self.feature_columns = read_sequences(
            path, sequence, order, target, missing
        )
        self.classes = sorted(set(labels), key=str)
        index = {label: position for position, label in enumerate(self.classes)}
        val, train = self._split([index[label] for label in labels], val_fraction, path)
        rank_zero_info(
            f"{path}: {len(labels)} sequences of {len(self.classes)} classes, {len(val)} "
            f"({100 * len(val) / len(labels):.1f}%) held out for validation, stratified by class"
        )
        self.num_features = len(self.feature_columns)
        training_steps = torch.cat([steps[i] for i in train])
        mean, std = column_stats(training_steps, torch.arange(len(training_steps)))
        self.feature_mean, self.feature_std = mean.tolist(), std.tolist()
        self.train_set = [(steps[i], index[labels[i]]) for i in train]
        self.val_set = [(steps[i], index[labels[i]]) for i in val]

    def _split(self, classes: list[int], val_fraction: float, path: Path) -> tuple[list, list]:
        generator = torch.Generator().manual_seed(self.seed)
        val, train = [], []
        for label, name in enumerate(self.classes):
            members = torch.tensor([i for i, c in enumerate(classes) if c == label])
            if len(members) < 2:
                raise UserError(
                    f"{path}: class {name!r} has a single sequence; every class needs one "
                    "to train on and one to validate"
                )
            held, kept = split(len(members), val_fraction, generator, len(members) - 1)
            val += members[held].tolist()
            train += members[kept].tolist()
        return sorted(val), sorted(train)

    def train_dataloader(self) -> DataLoader:
        return batches(Sequences(self.train_set), self.batch_size, self.trainer, True, self.seed)

    def val_dataloader(self) -> DataLoader:
        return batches(Sequences(self.val_set), self.batch_size, self.trainer, False, self.seed)

    def predict_dataloader(self) -> DataLoader:
        """The predict table's sequences, in the table's order, each with its position."""
        assert self.predict_csv is not None
        columns = checkpoint_hparams(self.trainer).feature_columns
        self.predicted_names, steps, _, _ = read_sequences(
            self.predict_csv, self.sequence, self.order, None, self.missing, columns
        )
        if not steps:
            raise UserError(f"{self.predict_csv}: no sequence to predict")
        if self.sequence in ("prediction", "confidence"):
            raise UserError(
                f"--data.sequence {self.sequence!r} is a column predictions.csv writes; "
                "rename it first"
            )
        items = [(sequence, row) for row, sequence in enumerate(steps)]
        return batches(Sequences(items), self.batch_size, self.trainer, False, self.seed)
