"""Command line: ``python -m <package>.sequence fit --config configs/sequence.yaml``.

``fit``: LightningCLI builds the DataModule first and hands the model what the data says
(its feature columns and statistics, the class labels), so the YAML never repeats it.

``predict --ckpt_path FILE --data.predict_csv FILE``: the model is built from the
checkpoint alone (the predict parser has no links from the data), and ``predictions.csv``,
one row per sequence, lands in the run's log folder: the sequence column, ``prediction``
in the labels' own values and ``confidence``, its probability. Predict on one device.
"""

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import lightning as L
import pandas as pd
import torch
from lightning.pytorch.callbacks import Callback
from lightning.pytorch.cli import LightningArgumentParser

from ..run.cli import (
    ExampleCLI,
    OneLineErrorParser,
    add_checkpoints,
    check_predict,
    processes_released,
    quiet_third_parties,
)
from ..run.errors import UserError, user_errors
from ..run.guards import BroadcastGuardCallback, NonFiniteLocator
from ..run.summary import RunSummary
from ..run.tracking import link_logs_to_run_root
from .data import SequenceData
from .module import SequenceClassifier

FROM_DATA = ("num_features", "classes", "feature_mean", "feature_std", "feature_columns")
"""What the model is built from in fit and validate: attributes of the data module."""


class PredictionWriter(Callback):
    """Write ``predictions.csv``, one row per sequence of the predict table, and print its path."""

    def on_predict_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self.parts: list[tuple[torch.Tensor, ...]] = []

    def on_predict_batch_end(
        self,
        trainer: L.Trainer,
        pl_module: L.LightningModule,
        outputs: Any,
        batch: Any,
        batch_idx: int,
        dataloader_idx: int = 0,
    ) -> None:
        self.parts.append(tuple(output.cpu() for output in outputs))

    def on_predict_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        data = getattr(trainer, "datamodule", None)
        if not (trainer.is_global_zero and isinstance(data, SequenceData) and self.parts):
            return
        assert isinstance(pl_module, SequenceClassifier)
        rows, predicted, confidence = (
            torch.cat(column) for column in zip(*self.parts, strict=True)
        )
        frame = pd.DataFrame(
            {
                data.sequence: [data.predicted.names[row] for row in rows.tolist()],
                "prediction": [pl_module.classes[index] for index in predicted.tolist()],
                "confidence": confidence.numpy(),
            }
        )
        path = Path(trainer.log_dir or trainer.default_root_dir) / "predictions.csv"
        path.parent.mkdir(parents=True, exist_ok=True)
        frame.to_csv(path, index=False)
        print(path)


class SequenceCLI(ExampleCLI):
    def add_arguments_to_parser(self, parser: LightningArgumentParser) -> None:
        if getattr(parser, "links_from_data", True):  # predict's parser has none
            for name in FROM_DATA:
                parser.link_arguments(f"data.{name}", f"model.{name}", apply_on="instantiate")
        add_checkpoints(parser)
        link_logs_to_run_root(parser)

    def before_instantiate_classes(self) -> None:
        """Refuse a predict that could not use the checkpoint, or a predict table elsewhere."""
        super().before_instantiate_classes()
        config = self.config[str(self.subcommand)]
        check_predict(str(self.subcommand), config.ckpt_path, config.data.predict_csv, "table")

    def before_predict(self) -> None:
        super().before_predict()
        if self.trainer.world_size > 1:  # one process holds the whole table and writes it
            raise UserError("predict runs on one device: --trainer.devices 1")


def main(args: list[str] | None = None, callbacks: Sequence[Callback] = ()) -> SequenceCLI:
    """Parse ``args`` (default: the command line) and run the chosen subcommand, with
    ``callbacks`` added to the trainer's (a sweep's trial adds its reporter)."""
    with processes_released(), user_errors(), quiet_third_parties():
        return SequenceCLI(
            SequenceClassifier,
            SequenceData,
            seed_everything_default=0,
            trainer_defaults={
                "callbacks": [
                    RunSummary(metrics=("val_accuracy", "val_loss")),
                    BroadcastGuardCallback(),
                    NonFiniteLocator(),
                    PredictionWriter(),
                    *callbacks,
                ]
            },
            save_config_kwargs={"overwrite": True},
            parser_class=OneLineErrorParser,
            parser_kwargs={
                "prog": f"python -m {__package__}",
                "predict": {"links_from_data": False},
            },
            args=args,
        )


if __name__ == "__main__":
    main()
