"""The sequence classifier: a small Transformer encoder over padded batches, pooled over
each sequence's real steps.

Attention attends real keys only and pooling averages real steps only, so padding changes
no output (``tests/test_behaviour.py``). The feature statistics and class labels are
hyperparameters, so a checkpoint alone predicts a new table, in the labels' own values.
"""

import math
from typing import Any

import lightning as L
import torch
from einops import rearrange
from lightning.pytorch.utilities.parsing import AttributeDict
from torch import nn

from ..core import masks
from ..core.attention import SelfAttention
from ..core.losses import cross_entropy_loss
from ..core.shapes import Bool, Float, Int, Tensor, compiled, typechecked
from ..core.standardise import Standardise
from ..run import ranges
from ..run.errors import UserError
from ..run.schedule import adamw_cosine
from ..run.validation import Column, gathered
from .data import Batch


@typechecked
def sinusoids(steps: int, width: int) -> Float[Tensor, "time feature"]:
    """Fixed positional features, sines and cosines of geometrically spaced frequencies: any
    length works, and position ``t`` means the same in every sequence."""
    frequencies = torch.exp(torch.arange(0, width, 2) * (-math.log(10_000.0) / width))
    angles = rearrange(torch.arange(steps), "t -> t 1") * rearrange(frequencies, "f -> 1 f")
    waves = torch.stack([angles.sin(), angles.cos()], dim=-1)
    return rearrange(waves, "t f two -> t (f two)")[:, :width]


class EncoderBlock(nn.Module):
    """Pre-norm Transformer block: self-attention, then a position-wise MLP, each residual."""

    def __init__(self, width: int, heads: int, dropout: float = 0.0) -> None:
        super().__init__()
        self.attention_norm, self.mlp_norm = nn.LayerNorm(width), nn.LayerNorm(width)
        self.attention = SelfAttention(width, heads, dropout=dropout)
        self.mlp = nn.Sequential(
            nn.Linear(width, 4 * width), nn.GELU(), nn.Linear(4 * width, width), nn.Dropout(dropout)
        )

    @typechecked
    def forward(
        self, x: Float[Tensor, "batch time feature"], keep: Bool[Tensor, "batch 1 1 time"]
    ) -> Float[Tensor, "batch time feature"]:
        x = x + self.attention(self.attention_norm(x), keep)
        return x + self.mlp(self.mlp_norm(x))


class SequenceEncoder(nn.Module):
    """Raw padded features to class logits; padding is read by nothing."""

    def __init__(
        self,
        num_features: int,
        num_classes: int,
        width: int,
        heads: int,
        layers: int,
        dropout: float = 0.0,
    ) -> None:
        super().__init__()
        self.embed = nn.Linear(num_features, width)
        self.blocks = nn.ModuleList(EncoderBlock(width, heads, dropout) for _ in range(layers))
        self.norm = nn.LayerNorm(width)
        self.head = nn.Linear(width, num_classes)

    @typechecked
    def forward(
        self, features: Float[Tensor, "batch time feature"], keep: Bool[Tensor, "batch time"]
    ) -> Float[Tensor, "batch class"]:
        x = self.embed(features)
        x = x + rearrange(sinusoids(x.shape[1], x.shape[2]).to(x), "t f -> 1 t f")
        attend = masks.key_padding(keep)
        for block in self.blocks:
            x = block(x, attend)
        return self.head(masks.masked_time_mean(self.norm(x), keep))


class SequenceClassifier(L.LightningModule):
    hparams: AttributeDict  # type: ignore[assignment]  # what save_hyperparameters stores

    def __init__(
        self,
        num_features: ranges.PositiveInt = 12,
        classes: list[Any] | None = None,
        feature_mean: list[float] | None = None,
        feature_std: list[ranges.PositiveFloat] | None = None,
        feature_columns: list[str] | None = None,
        width: ranges.PositiveInt = 64,
        heads: ranges.PositiveInt = 4,
        layers: ranges.PositiveInt = 2,
        dropout: ranges.ClosedOpenUnitInterval = 0.1,
        learning_rate: ranges.PositiveFloat = 1e-3,
        weight_decay: ranges.NonNegativeFloat = 0.01,
        torch_threads: ranges.PositiveInt | None = None,
        compile: bool = False,
        compile_backend: str = "inductor",
    ) -> None:
        """
        Args:
            num_features: Feature columns; the CLI links it from the data.
            classes: The class labels, in the order of the logits; linked likewise.
            feature_mean: Training steps' mean of each feature (none: 0); linked likewise.
            feature_std: Their standard deviation (none: 1); linked likewise.
            feature_columns: The table columns the features come from; linked likewise,
                for predict.
            width: Features of each step inside the encoder; a multiple of ``heads``.
            heads: Attention heads.
            layers: Encoder blocks.
            dropout: Dropout in attention and in each block's MLP, while training.
            learning_rate: Peak AdamW learning rate, cosine-annealed to zero.
            weight_decay: AdamW weight decay.
            torch_threads: CPU threads; none: ``OMP_NUM_THREADS``, else 1 (run/threads.py).
            compile: Run the encoder through ``torch.compile``; its shapes stay checked at
                the compiled boundary.
            compile_backend: ``torch.compile`` backend; ``aot_eager`` skips code generation.
        """
        ranges.check(SequenceClassifier.__init__, locals())
        super().__init__()
        self.save_hyperparameters()  # the flat arguments, for checkpoints and the CLI
        self.classes: list[Any] = list(classes or range(2))
        if width % heads:
            raise UserError(f"--model.width {width} does not split into {heads} heads")
        self.standardise = Standardise(num_features, feature_mean, feature_std)
        self.encoder = SequenceEncoder(
            num_features, len(self.classes), width, heads, layers, dropout
        )
        # A function, not a module: the encoder's weights are registered once, as encoder.*.
        self._compiled = compiled(self.encoder, backend=compile_backend) if compile else None
        self._val_losses, self._val_correct = Column(), Column()

    @typechecked
    def forward(
        self, features: Float[Tensor, "batch time feature"], keep: Bool[Tensor, "batch time"]
    ) -> Float[Tensor, "batch class"]:
        standard = torch.where(rearrange(keep, "b t -> b t 1"), self.standardise(features), 0.0)
        return (self._compiled or self.encoder)(standard, keep)

    def training_step(self, batch: Batch, batch_idx: int) -> Tensor:
        features, keep, labels = batch
        loss = cross_entropy_loss(self(features, keep), labels)
        self.log("train_loss", loss, batch_size=len(labels))
        return loss

    def validation_step(self, batch: Batch, batch_idx: int) -> None:
        features, keep, labels = batch
        logits = self(features, keep)
        losses = nn.functional.cross_entropy(logits, labels, reduction="none")
        self._val_losses.append(losses)
        self._val_correct.append((logits.argmax(dim=-1) == labels).to(losses.dtype))

    def on_validation_epoch_end(self) -> None:
        loss = gathered(self, self._val_losses.take()).mean()
        accuracy = gathered(self, self._val_correct.take()).mean()
        # Gathered already: the same on every process, which sync_dist only confirms.
        self.log_dict({"val_loss": loss, "val_accuracy": accuracy}, sync_dist=True)

    def predict_step(
        self, batch: Batch, batch_idx: int
    ) -> tuple[Int[Tensor, " batch"], Int[Tensor, " batch"], Float[Tensor, " batch"]]:
        """Each sequence's row in the table, predicted class index, and its probability."""
        features, keep, rows = batch
        probabilities = self(features, keep).float().softmax(dim=-1)  # bf16 has no NumPy type
        confidence, predicted = probabilities.max(dim=-1)
        return rows, predicted, confidence

    def configure_optimizers(self) -> Any:
        return adamw_cosine(self, self.hparams.learning_rate, self.hparams.weight_decay)
