"""Command line: ``python -m <package>.regression fit --config configs/regression.yaml``.

``fit``: LightningCLI builds the DataModule first and hands the model what the data says
(its width, statistics, columns and category levels), so the YAML never repeats it.

``predict --ckpt_path FILE --data.predict_csv FILE``: the model is built from the
checkpoint alone. The predict parser has no links from the data, which would override the
file's hyperparameters with whatever the data module holds: a model of another width.
"""

from collections.abc import Sequence

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
from ..run.errors import user_errors
from ..run.guards import BroadcastGuardCallback, NonFiniteLocator
from ..run.summary import RunSummary
from ..run.tracking import link_logs_to_run_root
from .data import RegressionData
from .module import RegressionModule
from .predict import PredictionWriter

# What the model is built from in fit, validate and test: attributes of the data module.
FROM_DATA = (
    "num_features",
    "target_mean",
    "target_std",
    "feature_mean",
    "feature_std",
    "feature_columns",
    "categories",
)


class RegressionCLI(ExampleCLI):
    def add_arguments_to_parser(self, parser: LightningArgumentParser) -> None:
        # The predict parser is built with links_from_data=False (main's parser_kwargs).
        if getattr(parser, "links_from_data", True):
            for name in FROM_DATA:
                parser.link_arguments(f"data.{name}", f"model.{name}", apply_on="instantiate")
        add_checkpoints(parser)
        link_logs_to_run_root(parser)

    def before_instantiate_classes(self) -> None:
        """Refuse a predict that could not use the checkpoint, or a predict file elsewhere."""
        super().before_instantiate_classes()
        config = self.config[str(self.subcommand)]
        check_predict(str(self.subcommand), config.ckpt_path, config.data.predict_csv, "CSV")


def main(args: list[str] | None = None, callbacks: Sequence[Callback] = ()) -> RegressionCLI:
    """Parse ``args`` (default: the command line) and run the chosen subcommand, with
    ``callbacks`` added to the trainer's (a sweep's trial adds its reporter)."""
    with processes_released(), user_errors(), quiet_third_parties():
        return RegressionCLI(
            RegressionModule,
            RegressionData,
            seed_everything_default=0,
            trainer_defaults={
                "callbacks": [
                    RunSummary(metrics=("val_r2", "val_mae", "val_loss")),
                    BroadcastGuardCallback(),
                    NonFiniteLocator(),
                    PredictionWriter(),
                    *callbacks,
                ]
            },
            save_config_kwargs={"overwrite": True},
            parser_class=OneLineErrorParser,
            # The usage and tip lines name the command as typed, not __main__.py.
            parser_kwargs={
                "prog": f"python -m {__package__}",
                "predict": {"links_from_data": False},
            },
            args=args,
        )


if __name__ == "__main__":
    main()
