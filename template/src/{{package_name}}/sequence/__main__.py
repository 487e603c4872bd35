"""Command line: ``python -m <package>.sequence fit --config configs/sequence.yaml``;
``fit`` and ``predict`` as ``run.cli.DataExampleCLI`` says. ``predict`` runs on one device
and writes ``predictions.csv`` (``docs/sequence.md``) in the run's log folder.
"""

from collections.abc import Sequence

import pandas as pd
import torch
from lightning.pytorch.callbacks import BasePredictionWriter, Callback

from ..run.cli import DataExampleCLI
from ..run.data import predictions_csv
from ..run.errors import UserError
from .data import SequenceData
from .module import SequenceClassifier


class PredictionWriter(BasePredictionWriter):
    """Write ``predictions.csv``, one row per sequence of the predict table, and print its path."""

    def write_on_epoch_end(self, trainer, pl_module, predictions, batch_indices) -> None:
        data = getattr(trainer, "datamodule", None)
        if not (trainer.is_global_zero and isinstance(data, SequenceData) and predictions):
            return
        assert isinstance(pl_module, SequenceClassifier)
        rows, predicted, confidence = map(torch.cat, zip(*predictions, strict=True))
        path = predictions_csv(trainer)
        frame = pd.DataFrame({data.sequence: [data.predicted_names[row] for row in rows.tolist()]})
        frame["prediction"] = [pl_module.classes[index] for index in predicted.tolist()]
        frame["confidence"] = confidence.numpy()
        frame.to_csv(path, index=False)
        print(path)


class SequenceCLI(DataExampleCLI):
    from_data = ("num_features", "classes", "feature_mean", "feature_std", "feature_columns")
    predicted = "table"

    def before_predict(self) -> None:
        super().before_predict()
        if self.trainer.world_size > 1:  # one process holds the whole table and writes it
            raise UserError("predict runs on one device: --trainer.devices 1")


def main(args: list[str] | None = None, callbacks: Sequence[Callback] = ()) -> SequenceCLI:
    """Run the subcommand in ``args`` (default: the command line) with extra ``callbacks``."""
    return SequenceCLI.launch(
        model_class=SequenceClassifier,
        data_class=SequenceData,
        summary_metrics=("val_accuracy", "val_loss"),
        callbacks=[PredictionWriter("epoch"), *callbacks],
        args=args,
        package=__package__,
    )


if __name__ == "__main__":
    main()
