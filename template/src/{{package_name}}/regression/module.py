"""The regression LightningModule: an MLP trained with a typed MSE on a standardised target.

It standardises raw encoded features with the training split's statistics, kept as
hyperparameters with the column order and category levels, and ``forward`` answers in the
target's units: a checkpoint alone predicts real values from raw rows. Validation metrics
are computed once per epoch over the whole split, gathered from every process under DDP,
so they are those of a single process on the same weights.
"""

import math

import lightning as L
import torch
from einops import rearrange
from torch.utils.data import DataLoader

from ..core.losses import mse_loss
from ..core.metrics import mean_absolute_error, r2_score
from ..core.nets import Activation, ScalarMLP
from ..core.shapes import Float, Tensor, compiled, typechecked
from ..run.errors import UserError
from .predict import PredictChunk

Batch = tuple[Float[Tensor, "batch feature"], Float[Tensor, " batch"]]


class RegressionModule(L.LightningModule):
    def __init__(
        self,
        num_features: int = 8,
        hidden_sizes: tuple[int, ...] = (128, 128),
        activation: Activation = "silu",
        learning_rate: float = 3e-3,
        weight_decay: float = 0.0,
        target_mean: float = 0.0,
        target_std: float = 1.0,
        feature_mean: list[float] | None = None,
        feature_std: list[float] | None = None,
        feature_columns: list[str] | None = None,
        categories: dict[str, list[str]] | None = None,
        compile: bool = False,
        compile_backend: str = "inductor",
    ) -> None:
        """The data's width, statistics, columns and levels are linked from the data module.

        Args:
            hidden_sizes: Width of each hidden layer.
            activation: Non-linearity between layers.
            learning_rate: Peak AdamW learning rate, cosine-annealed to zero over the run's
                optimizer steps.
            weight_decay: AdamW weight decay.
            feature_mean: Training-split mean of each input column (none: 0).
            feature_std: Its standard deviation (none: 1).
            compile: Run the network through ``torch.compile``; its shapes stay checked at
                the compiled boundary.
            compile_backend: ``torch.compile`` backend; ``aot_eager`` skips code generation
                (quick to start, for tests).
        """
        super().__init__()
        self.save_hyperparameters()  # the flat arguments, for checkpoints and the CLI
        self.learning_rate, self.weight_decay = learning_rate, weight_decay
        self.target_mean, self.target_std = target_mean, target_std
        self.feature_columns: list[str] = list(feature_columns or [])
        self.categories: dict[str, list[str]] = dict(categories or {})
        for name, stats in (("feature_mean", feature_mean), ("feature_std", feature_std)):
            if stats is not None and len(stats) != num_features:
                raise ValueError(f"{name} has {len(stats)} values, num_features={num_features}")
        # Buffers, so they move with the model; not saved: the hyperparameters hold them.
        mean, std = feature_mean or [0.0] * num_features, feature_std or [1.0] * num_features
        self.feature_mean: Tensor
        self.feature_std: Tensor
        self.register_buffer("feature_mean", torch.tensor(mean), persistent=False)
        self.register_buffer("feature_std", torch.tensor(std), persistent=False)

        self.net = ScalarMLP(num_features, hidden_sizes, activation)
        self._compiled_net = compiled(self.net, backend=compile_backend) if compile else None
        self._val_predictions, self._val_targets = Column(), Column()
        # The epoch's summed training loss, one scalar: a list of a scalar per step grows
        # the process by kilobytes a step on a large table.
        self._train_loss_sum: Tensor | float = 0.0
        self._train_rows = 0

    @typechecked
    def forward(self, x: Float[Tensor, "batch feature"]) -> Float[Tensor, " batch"]:
        return self._net_prediction(x) * self.target_std + self.target_mean

    def _net_prediction(self, x: Float[Tensor, "batch feature"]) -> Float[Tensor, " batch"]:
        """The network's answer, in standard units: for standardised features."""
        return (self._compiled_net or self.net)((x - self.feature_mean) / self.feature_std)

    def _standardise(self, y: Float[Tensor, " batch"]) -> Float[Tensor, " batch"]:
        return (y - self.target_mean) / self.target_std

    def training_step(self, batch: Batch, batch_idx: int) -> Tensor:
        x, y = batch
        loss = mse_loss(self._net_prediction(x), self._standardise(y))
        # Summed here in float32 (a bf16 sum would stop growing), logged once an epoch: a
        # self.log call costs about a step's compute.
        self._train_loss_sum = self._train_loss_sum + loss.detach().float() * len(y)
        self._train_rows += len(y)
        return loss

    def validation_step(self, batch: Batch, batch_idx: int) -> None:
        x, y = batch
        self._val_predictions.append(self(x))
        self._val_targets.append(y)

    def on_validation_epoch_end(self) -> None:
        prediction, target = self._val_predictions.take(), self._val_targets.take()
        if self.trainer.world_size > 1:
            prediction, target = self._gather(prediction), self._gather(target)
        # Equal on every process by now; sync_dist only tells Lightning so.
        loss = mse_loss(self._standardise(prediction), self._standardise(target))
        self.log("val_loss", loss, sync_dist=True)
        self.log("val_r2", r2_score(prediction, target), sync_dist=True)
        self.log("val_mae", mean_absolute_error(prediction, target), sync_dist=True)

    def on_train_epoch_end(self) -> None:
        if self._train_rows:
            self.log("train_loss", self._train_loss_sum / self._train_rows, sync_dist=True)
        self._train_loss_sum, self._train_rows = 0.0, 0

    def _gather(self, values: Float[Tensor, " batch"]) -> Float[Tensor, " batch"]:
        """Every process's rows in the split's order: process ``r`` had rows ``r, r + world,
        ...`` and, to even out the shards, a few repeats from the start, which the split's
        length cuts off."""
        gathered = self.all_gather(values)
        assert isinstance(gathered, Tensor)
        in_order = rearrange(gathered, "world batch -> (batch world)")
        loader = self.trainer.val_dataloaders
        if isinstance(loader, DataLoader):
            in_order = in_order[: len(loader.dataset)]  # type: ignore[arg-type]
        return in_order

    def predict_step(self, batch: PredictChunk, batch_idx: int) -> Float[Tensor, " batch"]:
        """Every row of the chunk; ``PredictionWriter`` empties those with a missing cell."""
        return self(batch.features)

    def configure_optimizers(self):
        optimizer = torch.optim.AdamW(
            self.parameters(), lr=self.learning_rate, weight_decay=self.weight_decay
        )
        total_steps = self.trainer.estimated_stepping_batches
        if not math.isfinite(total_steps):
            raise UserError(
                "the cosine schedule needs a length: set --trainer.max_epochs or "
                "--trainer.max_steps"
            )
        schedule = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, max(1, int(total_steps)))
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": schedule, "interval": "step"}}


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
