"""The regression DataModule: a seeded synthetic set by default, the user's CSV on request,
and a new CSV to predict from a checkpoint.

Data is read and split when the module is built, so a bad path or column fails before any
training and the CLI can hand the model what the data says.
"""

from pathlib import Path
from typing import TYPE_CHECKING

import lightning as L
import torch
from lightning.pytorch.utilities import rank_zero_info
from torch.utils.data import DataLoader, Subset, TensorDataset

from ..core.shapes import Float, Tensor
from ..run import ranges
from ..run.data import batches, checkpoint_hparams, column_stats, split
from ..run.errors import UserError
from .predict import PredictChunks
from .table import Encoding, Missing, TableOptions, fit_encoding, read_header, read_table

if TYPE_CHECKING:
    SyntheticWidth = int
else:
    SyntheticWidth = ranges.number_range(int, 5)  # the synthetic target reads the first five


class RegressionData(L.LightningDataModule):
    def __init__(
        self,
        csv_path: Path | None = None,
        target: str | None = None,
        predict_csv: Path | None = None,
        missing: Missing = "error",
        categorical: list[str] | None = None,
        max_levels: ranges.PositiveInt = 32,
        sep: str = ",",
        thousands: str | None = None,
        decimal: str = ".",
        synthetic_samples: ranges.PositiveInt = 8192,
        synthetic_features: SyntheticWidth = 8,
        synthetic_noise: ranges.NonNegativeFloat = 0.1,
        val_fraction: ranges.OpenUnitInterval = 0.2,
        batch_size: ranges.PositiveInt = 256,
        seed: int = 0,
    ) -> None:
        """
        Args:
            csv_path: CSV file to train on (unset: the synthetic set).
            target: Name of the column to predict (required with ``csv_path``).
            predict_csv: CSV file to predict, for ``predict`` only: the checkpoint says how
                to encode its rows.
            missing: What a missing cell in a used column does: ``error`` refuses the file,
                ``drop`` leaves the row out.
            categorical: Text columns to one-hot encode; other text columns are left out.
            max_levels: Levels kept per categorical column, the most frequent in the
                training split; rarer levels encode as all zeros.
            sep: Field separator of the CSV files.
            thousands: Thousands mark in numbers (``","`` reads ``"1,234"``); none by default.
            decimal: Decimal mark (``","`` for ``"3,5"``), not ``sep`` nor ``thousands``.
            synthetic_samples: Rows of the synthetic set.
            synthetic_features: Input columns of the synthetic set.
            synthetic_noise: Standard deviation of the synthetic target's noise.
            val_fraction: Share of rows held out for validation, drawn at random.
            batch_size: Rows per optimizer step over all processes: each of N loads 1/N.
            seed: Seed of the synthetic data, the split and every epoch's training order.
        """
        ranges.check(RegressionData.__init__, locals())
        super().__init__()
        if (csv_path is None) != (target is None):
            raise UserError("--data.csv_path and --data.target go together: give both or neither")
        self.batch_size, self.seed, self.val_fraction = batch_size, seed, val_fraction
        self.options = TableOptions(sep=sep, thousands=thousands, decimal=decimal)
        self.predict_csv = None if predict_csv is None else Path(predict_csv)
        if self.predict_csv is not None:
            read_header(self.predict_csv, self.options, "--data.predict_csv")  # before the model
            return  # predict encodes rows as the checkpoint says: nothing to read or fit here

        if csv_path is None or target is None:
            x, y = make_synthetic_regression(
                synthetic_samples, synthetic_features, synthetic_noise, seed
            )
            encoding = Encoding([f"x{index}" for index in range(x.shape[1])], {})
            val_rows, train_rows = self._split(len(y), "--data.synthetic_samples")
        else:
            path, categorical = Path(csv_path), list(categorical or [])
            frame, columns, summary = read_table(path, target, self.options, categorical, missing)
            val_rows, train_rows = self._split(len(frame), str(csv_path))
            train = frame.iloc[train_rows.numpy()]
            encoding, capped = fit_encoding(train, columns, categorical, max_levels)
            x = torch.from_numpy(encoding.encode(frame, path)[0])
            y = torch.tensor(frame[target].to_numpy(dtype="float64")).float()
            rank_zero_info(summary + "".join(f"; {note}" for note in capped))

        # What the model is built from (RegressionCLI.from_data), and a checkpoint keeps.
        self.num_features = x.shape[1]
        self.feature_columns, self.categories = encoding.columns, encoding.categories
        self.feature_mean, self.feature_std = (s.tolist() for s in column_stats(x, train_rows))
        self.target_mean, self.target_std = map(float, column_stats(y, train_rows))
        # Raw features, which the model standardises itself. A split takes a tensor of rows, a
        # batch at a time (``[:]``: every row): a list of ints would outweigh a narrow table.
        table = TensorDataset(x, y)
        self.train_set = Subset(table, train_rows)  # pyright: ignore[reportArgumentType]
        self.val_set = Subset(table, val_rows)  # pyright: ignore[reportArgumentType]

    def _split(self, rows: int, source: str) -> tuple[Tensor, Tensor]:
        val, train = split(rows, self.val_fraction, torch.Generator().manual_seed(self.seed))
        if not len(train):
            raise UserError(
                f"{source}: {rows} data rows, and --data.val_fraction={self.val_fraction} "
                f"holds out {len(val)}, leaving none for training"
            )
        return val, train

    def train_dataloader(self) -> DataLoader:
        return batches(self.train_set, self.batch_size, self.trainer, True, self.seed)

    def val_dataloader(self) -> DataLoader:
        return batches(self.val_set, self.batch_size, self.trainer, False, self.seed)

    def predict_dataloader(self) -> DataLoader:
        """``--data.predict_csv`` in chunks, encoded as the checkpoint's model says."""
        assert self.predict_csv is not None, "the CLI refuses a predict without the file"
        hp = checkpoint_hparams(self.trainer)
        encoding = Encoding(hp.feature_columns, hp.categories or {})
        return DataLoader(PredictChunks(self.predict_csv, encoding, self.options), batch_size=None)


def make_synthetic_regression(
    num_samples: int, num_features: int = 8, noise_std: float = 0.1, seed: int = 0
) -> tuple[Float[Tensor, "batch feature"], Float[Tensor, " batch"]]:
    """Seeded Gaussian inputs and a target that mixes a sine, a product, a square and a
    saturation of the first five, which a linear model cannot fit and an MLP can; features
    past the fifth are distractors."""
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(num_samples, num_features, generator=generator)
    # Summed in place, term by term, through one scratch column: the same numbers as the
    # one-line expression, without a column-sized temporary per operation.
    y = torch.mul(x[:, 0], 2.0).sin_()
    term = torch.mul(x[:, 1], x[:, 2]).mul_(0.5)
    y += term
    y += torch.mul(x[:, 3], x[:, 3], out=term).mul_(0.3)
    y += torch.mul(x[:, 4], 2.0, out=term).tanh_()
    y += torch.randn(num_samples, generator=generator, out=term).mul_(noise_std)
    return x, y
