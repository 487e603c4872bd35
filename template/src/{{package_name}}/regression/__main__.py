"""Command line: ``python -m <package>.regression fit --config configs/regression.yaml``;
``fit`` and ``predict`` as ``run.cli.DataExampleCLI`` says.
"""

from collections.abc import Sequence

from lightning.pytorch.callbacks import Callback

from ..run.cli import DataExampleCLI
from .data import RegressionData
from .module import RegressionModule
from .predict import PredictionWriter


class RegressionCLI(DataExampleCLI):
    from_data = ("num_features", "target_mean", "target_std", "feature_mean", "feature_std")
    from_data += ("feature_columns", "categories")
    predicted = "CSV"


def main(args: list[str] | None = None, callbacks: Sequence[Callback] = ()) -> RegressionCLI:
    """Run the subcommand in ``args`` (default: the command line) with extra ``callbacks``."""
    return RegressionCLI.launch(
        model_class=RegressionModule,
        data_class=RegressionData,
        summary_metrics=("val_r2", "val_mae", "val_loss"),
        callbacks=[PredictionWriter(), *callbacks],
        args=args,
        package=__package__,
    )


if __name__ == "__main__":
    main()
