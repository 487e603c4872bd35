"""Command line: ``python -m <package>.regression fit --config configs/regression.yaml``.

LightningCLI builds the DataModule first and hands its ``num_features`` and target scale to
the model, so the YAML never repeats what the data already says.
"""

from lightning.pytorch.callbacks import ModelCheckpoint
from lightning.pytorch.cli import LightningArgumentParser, LightningCLI

from ..run_summary import RunSummary
from .data import RegressionData
from .module import RegressionModule


class RegressionCLI(LightningCLI):
    def add_arguments_to_parser(self, parser: LightningArgumentParser) -> None:
        for name in ("num_features", "target_mean", "target_std"):
            parser.link_arguments(f"data.{name}", f"model.{name}", apply_on="instantiate")


def main(args: list[str] | None = None) -> RegressionCLI:
    """Parse ``args`` (default: the command line) and run the chosen subcommand."""
    return RegressionCLI(
        RegressionModule,
        RegressionData,
        seed_everything_default=0,
        trainer_defaults={
            "callbacks": [
                ModelCheckpoint(
                    monitor="val_loss", filename="best-{epoch}-{val_loss:.4f}", save_last=True
                ),
                RunSummary(metrics=("val_r2", "val_mae", "val_loss")),
            ],
        },
        save_config_kwargs={"overwrite": True},
        args=args,
    )


if __name__ == "__main__":
    main()
