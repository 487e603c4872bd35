"""The sequence DataModule: padded batches of variable-length sequences, read from a *long*
table (one row per step; ``docs/sequence.md``), by default the shipped Japanese Vowels set:
nine speakers saying /ae/, 640 utterances of 7 to 29 steps of 12 LPC cepstrum
coefficients; the task is to name the speaker.

Sequences are split at random, whole. A batch holds each sequence from its first step,
zeros after its end, and ``keep`` saying which steps are real: every consumer takes that
mask (``core/masks.py``), so padding can change nothing.

The data: "Japanese Vowels" by M. Kudo, J. Toyama and M. Shimbo (Pattern Recognition
Letters 20, 1999), from the UCI Machine Learning Repository
(https://archive.ics.uci.edu/ml/datasets/Japanese+Vowels), which licenses it CC BY 4.0
(https://creativecommons.org/licenses/by/4.0/); copied from the aeon package's files.
Changed: one long table (``utterance``, ``step``, ``speaker``, ``lpc_1`` to ``lpc_12``),
values rounded to 6 decimals, speakers ``1`` to ``9`` named ``speaker_1`` to ``speaker_9``;
utterances 1 to 270 were the original training set.
"""

from pathlib import Path
from typing import Any, Literal

import lightning as L
import numpy as np
import pandas as pd
import torch
from lightning.pytorch.utilities import rank_zero_info
from torch.utils.data import DataLoader, DistributedSampler

from ..core.masks import real_steps
from ..core.shapes import Bool, Float, Tensor
from ..run.errors import UserError
from .module import Batch, SequenceClassifier

SHIPPED = Path(__file__).with_name("japanese_vowels.csv.gz")
Missing = Literal["error", "drop"]


def _plain(value: Any) -> Any:
    return value.item() if isinstance(value, np.generic) else value


def _first_text(column: pd.Series, name: object) -> str:
    """A left-out text column, named with its first cell that is not a number, so that a
    typo in a numeric column shows."""
    if pd.api.types.is_numeric_dtype(column):
        return ""
    numbers = pd.Series(pd.to_numeric(column, errors="coerce"))
    cells = pd.Series(column.loc[numbers.isna() & column.notna()])
    if cells.empty:
        return ""
    return f"{name} (text: {cells.iloc[0]!r} in data row {int(cells.index[0]) + 1})"


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
    if not path.is_file():
        raise UserError(f"{path}: no such file")
    parquet = path.suffix == ".parquet"
    try:
        frame = pd.read_parquet(path) if parquet else pd.read_csv(path)
    except (ValueError, OSError, ImportError, pd.errors.ParserError) as error:
        if parquet and isinstance(error, ImportError):  # pandas found no Parquet engine
            hint = "Parquet needs pyarrow or fastparquet: pip install -e '.[parquet]'"
            raise UserError(f"{path}: {hint}") from None
        reason = (str(error).splitlines() or [type(error).__name__])[0]
        raise UserError(f"{path}: not a readable table ({reason})") from None
    frame = frame.reset_index(drop=True)  # positions, whatever index a Parquet file kept
    named = [column for column in (sequence, order, target) if column is not None]
    if len(set(named)) < len(named):
        raise UserError(f"--data.sequence, --data.order and --data.target name {named}: one each")
    if feature_columns is None:
        others = [column for column in frame.columns if column not in named]
        feature_columns = [str(c) for c in others if pd.api.types.is_numeric_dtype(frame[c])]
        if not feature_columns:
            raise UserError(f"{path}: no numeric column left for features besides {named}")
        left_out = [note for column in others if (note := _first_text(frame[column], column))]
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
        if text := _first_text(frame[order], repr(order)):
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
    """Sequences stacked from their first step, zeros after each one's end, and the mask of
    real steps."""
    lengths = torch.tensor([len(sequence) for sequence in steps])
    padded = torch.nn.utils.rnn.pad_sequence(steps, batch_first=True)
    return padded, real_steps(lengths, padded.shape[1])


def collate(items: list[tuple[Tensor, int]]) -> Batch:
    features, keep = pad([steps for steps, _ in items])
    return features, keep, torch.tensor([label for _, label in items])


class SequenceData(L.LightningDataModule):
    def __init__(
        self,
        csv_path: Path | None = None,
        target: str = "speaker",
        sequence: str = "utterance",
        order: str | None = None,
        predict_csv: Path | None = None,
        missing: Missing = "error",
        val_fraction: float = 0.2,
        batch_size: int = 32,
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
            val_fraction: Share of sequences held out for validation, drawn at random.
            batch_size: Sequences per optimizer step, over all processes together.
            seed: Seed of the train/validation split and of every epoch's training order.
        """
        super().__init__()
        if not 0.0 < val_fraction < 1.0:
            raise UserError(f"--data.val_fraction must be in (0, 1), got {val_fraction}")
        if batch_size < 1:
            raise UserError(f"--data.batch_size must be at least 1, got {batch_size}")
        self.sequence, self.order, self.batch_size, self.seed = sequence, order, batch_size, seed
        self.missing: Missing = missing
        self.predict_csv = Path(predict_csv) if predict_csv else None
        if self.predict_csv:
            return  # predict reads its table once the checkpoint has said which features
        path = SHIPPED if csv_path is None else Path(csv_path)
        if csv_path is None and order is None:
            order = "step"  # the shipped table's; left unnamed, it would be read as a feature
        names, steps, labels, self.feature_columns = read_sequences(
            path, sequence, order, target, missing
        )
        generator = torch.Generator().manual_seed(seed)
        shuffled = torch.randperm(len(names), generator=generator).tolist()
        num_val = max(1, round(val_fraction * len(shuffled)))
        val, train = shuffled[:num_val], shuffled[num_val:]
        if not train:
            raise UserError(f"{path}: {len(shuffled)} sequences leave none for training")
        self.classes = sorted(set(labels), key=str)
        for split, other, name in ((train, val, "training"), (val, train, "validation")):
            if only := {labels[i] for i in split} - {labels[i] for i in other}:
                raise UserError(
                    f"{path}: class {_plain(sorted(only, key=str)[0])!r} is in the {name} "
                    f"split only; every class needs sequences in both (more data, or "
                    "another --data.seed or --data.val_fraction)"
                )
        index = {label: position for position, label in enumerate(self.classes)}
        self.num_features = len(self.feature_columns)
        training_steps = torch.cat([steps[i] for i in train]).double()
        std = training_steps.std(dim=0) if len(training_steps) > 1 else torch.ones(1)
        self.feature_mean = training_steps.mean(dim=0).tolist()
        self.feature_std = torch.where(std > 0, std, 1.0).expand(self.num_features).tolist()
        self.train_set = [(steps[i], index[labels[i]]) for i in train]
        self.val_set = [(steps[i], index[labels[i]]) for i in val]

    def train_dataloader(self) -> DataLoader:
        return self._loader(self.train_set, shuffle=True)

    def val_dataloader(self) -> DataLoader:
        return self._loader(self.val_set, shuffle=False)

    def predict_dataloader(self) -> DataLoader:
        """The predict table's sequences, in the table's order, each with its position."""
        assert self.predict_csv is not None and self.trainer is not None
        model = self.trainer.lightning_module
        assert isinstance(model, SequenceClassifier)
        self.predicted_names, steps, _, _ = read_sequences(
            self.predict_csv, self.sequence, self.order, None, self.missing, model.feature_columns
        )
        if not steps:
            raise UserError(f"{self.predict_csv}: no sequence to predict")
        if self.sequence in ("prediction", "confidence"):
            raise UserError(
                f"--data.sequence {self.sequence!r} is a column predictions.csv writes; "
                "rename it first"
            )
        return self._loader([(sequence, row) for row, sequence in enumerate(steps)])

    def _loader(self, items: list[tuple[Tensor, int]], shuffle: bool = False) -> DataLoader:
        """This process's batches, ``batch_size`` over all processes. A DistributedSampler
        even in one process: Lightning swaps in none of its own, and epoch ``k``'s order is
        seeded by ``seed + k`` alone, so a resumed run sees the batches a whole one would."""
        world, rank = (
            (self.trainer.world_size, self.trainer.global_rank) if self.trainer else (1, 0)
        )
        per_process, rest = divmod(self.batch_size, world)
        if rest:
            raise UserError(
                f"--data.batch_size {self.batch_size} does not split over {world} processes"
            )
        dataset: Any = items  # a list is a map-style dataset: items by position
        shard = DistributedSampler(dataset, world, rank, shuffle, self.seed)
        return DataLoader(dataset, batch_size=per_process, sampler=shard, collate_fn=collate)
