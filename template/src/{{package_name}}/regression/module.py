"""The regression LightningModule: an MLP trained with a typed MSE on a standardised target.

It standardises raw encoded features with the training split's statistics, kept as
hyperparameters with the column order and category levels, and ``forward`` answers in the
target's units: a checkpoint alone predicts real values from raw rows.
"""

import lightning as L

from ..core.losses import mse_loss
from ..core.metrics import mean_absolute_error, r2_score
from ..core.nets import Activation, ScalarMLP
from ..core.shapes import Float, Tensor, compiled, typechecked
from ..core.standardise import Standardise
from ..run import ranges
from ..run.schedule import adamw_cosine
from ..run.validation import Column, gathered
from .predict import PredictChunk

Batch = tuple[Float[Tensor, "batch feature"], Float[Tensor, " batch"]]


class RegressionModule(L.LightningModule):
    def __init__(
        self,
        num_features: ranges.PositiveInt = 8,
        hidden_sizes: tuple[ranges.PositiveInt, ...] = (128, 128),
        activation: Activation = "silu",
        learning_rate: ranges.PositiveFloat = 3e-3,
        weight_decay: ranges.NonNegativeFloat = 0.0,
        target_mean: float = 0.0,
        target_std: ranges.PositiveFloat = 1.0,
        feature_mean: list[float] | None = None,
        feature_std: list[ranges.PositiveFloat] | None = None,
        feature_columns: list[str] | None = None,
        categories: dict[str, list[str]] | None = None,
        torch_threads: ranges.PositiveInt | None = None,
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
            torch_threads: CPU threads; none: ``OMP_NUM_THREADS``, else 1 (run/threads.py).
            compile: Run the network through ``torch.compile``; its shapes stay checked at
                the compiled boundary.
            compile_backend: ``torch.compile`` backend; ``aot_eager`` skips code generation
                (quick to start, for tests).
        """
        ranges.check(RegressionModule.__init__, locals())
        super().__init__()
        self.save_hyperparameters()  # the flat arguments, for checkpoints and the CLI
        self.learning_rate, self.weight_decay = learning_rate, weight_decay
        self.target_mean, self.target_std = target_mean, target_std
        self.standardise = Standardise(num_features, feature_mean, feature_std)
        self.net = ScalarMLP(num_features, hidden_sizes, activation)
        self._compiled_net = compiled(self.net, backend=compile_backend) if compile else None
        self._val_predictions, self._val_targets = Column(), Column()
        # The epoch's training loss in one float32 scalar (a list per step grows the process,
        # a bf16 sum stops growing), logged once an epoch: self.log costs about a step's compute.
        self._train_loss_sum: Tensor | float = 0.0
        self._train_rows = 0

    @typechecked
    def forward(self, x: Float[Tensor, "batch feature"]) -> Float[Tensor, " batch"]:
        return self._net_prediction(x) * self.target_std + self.target_mean

    def _net_prediction(self, x: Float[Tensor, "batch feature"]) -> Float[Tensor, " batch"]:
        """The network's answer, in standard units: for standardised features."""
        return (self._compiled_net or self.net)(self.standardise(x))

    def _standard_target(self, y: Float[Tensor, " batch"]) -> Float[Tensor, " batch"]:
        return (y - self.target_mean) / self.target_std

    def training_step(self, batch: Batch, batch_idx: int) -> Tensor:
        x, y = batch
        loss = mse_loss(self._net_prediction(x), self._standard_target(y))
        self._train_loss_sum = self._train_loss_sum + loss.detach().float() * len(y)
        self._train_rows += len(y)
        return loss

    def validation_step(self, batch: Batch, batch_idx: int) -> None:
        x, y = batch
        self._val_predictions.append(self(x))
        self._val_targets.append(y)

    def on_validation_epoch_end(self) -> None:
        prediction, target = self._val_predictions.take(), self._val_targets.take()
        prediction, target = gathered(self, prediction), gathered(self, target)
        # Equal on every process by now; sync_dist only tells Lightning so.
        loss = mse_loss(self._standard_target(prediction), self._standard_target(target))
        self.log("val_loss", loss, sync_dist=True)
        self.log("val_r2", r2_score(prediction, target), sync_dist=True)
        self.log("val_mae", mean_absolute_error(prediction, target), sync_dist=True)

    def on_train_epoch_end(self) -> None:
        if self._train_rows:
            self.log("train_loss", self._train_loss_sum / self._train_rows, sync_dist=True)
        self._train_loss_sum, self._train_rows = 0.0, 0

    def predict_step(self, batch: PredictChunk, batch_idx: int) -> Float[Tensor, " batch"]:
        """Every row of the chunk; ``PredictionWriter`` empties those with a missing cell."""
        return self(batch.features)

    def configure_optimizers(self):
        return adamw_cosine(self, self.learning_rate, self.weight_decay)
