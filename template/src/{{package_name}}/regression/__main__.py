"""Command line: ``python -m <package>.regression fit --config configs/regression.yaml``.

LightningCLI builds the DataModule first and hands its ``num_features`` and target scale to
the model, so the YAML never repeats what the data already says.

Checkpoints go to ``<default_root_dir>/checkpoints``, one folder for every run under that
root, rather than into each run's ``lightning_logs/version_N``: a rerun after a crash logs
to a new version, and ``--ckpt_path last`` must still find the crashed run's
``last.ckpt``, written at the end of every epoch.
"""

from lightning.pytorch.callbacks import ModelCheckpoint
from lightning.pytorch.cli import LightningArgumentParser

from ..cli import ExampleCLI, OneLineErrorParser, checkpoint_dir, processes_released
from ..errors import user_errors
from ..guards import BroadcastGuardCallback, NonFiniteLocator
from ..preemption import SlurmRequeue
from ..run_summary import RunSummary
from ..tracking import WandbRunId, link_logs_to_run_root
from .data import RegressionData
from .module import RegressionModule


class RegressionCLI(ExampleCLI):
    def add_arguments_to_parser(self, parser: LightningArgumentParser) -> None:
        for name in ("num_features", "target_mean", "target_std"):
            parser.link_arguments(f"data.{name}", f"model.{name}", apply_on="instantiate")
        parser.add_lightning_class_args(ModelCheckpoint, "checkpoint")
        parser.set_defaults(
            {
                "checkpoint.monitor": "val_loss",
                "checkpoint.filename": "best-{epoch}-{val_loss:.4f}",
                "checkpoint.save_last": True,
            }
        )
        parser.link_arguments("trainer.default_root_dir", "checkpoint.dirpath", checkpoint_dir)
        link_logs_to_run_root(parser)


def main(args: list[str] | None = None) -> RegressionCLI:
    """Parse ``args`` (default: the command line) and run the chosen subcommand."""
    with processes_released(), user_errors():
        return RegressionCLI(
            RegressionModule,
            RegressionData,
            seed_everything_default=0,
            trainer_defaults={
                "callbacks": [
                    RunSummary(metrics=("val_r2", "val_mae", "val_loss")),
                    WandbRunId(),
                    BroadcastGuardCallback(),
                    NonFiniteLocator(),
                    SlurmRequeue(),
                ]
            },
            save_config_kwargs={"overwrite": True},
            parser_class=OneLineErrorParser,
            args=args,
        )


if __name__ == "__main__":
    main()
