"""Command line: ``python -m <package>.ppo fit --config configs/ppo.yaml``.

``last.ckpt`` is written after every rollout to ``<default_root_dir>/checkpoints``, shared by
the root's runs: a rerun after a crash (a new ``version_N``) finds it with ``--ckpt_path last``.
"""

from collections.abc import Sequence

from lightning.pytorch.callbacks import Callback, ModelCheckpoint
from lightning.pytorch.cli import LightningArgumentParser

from ..run import cli
from ..run.errors import user_errors
from ..run.guards import BroadcastGuardCallback, NonFiniteLocator
from ..run.summary import RunSummary
from ..run.tracking import link_logs_to_run_root
from .module import PPOModule
from .reporting import PPOReporting

HINTS = (
    ".*IterableDataset.*has `__len__` defined.*",
    ".*does not have many workers.*",
    ".*resuming from a checkpoint that ended before the epoch.*",
    ".*no pre-optimization state was saved.*",
)
"""Lightning's hints that do not apply here, hidden while the command runs: the rollout
stream's length is on purpose (no prefetch), rollouts are collected in this process, and
resuming within the epoch, after a rollout's update, is the normal case."""


class PPOCLI(cli.ExampleCLI):
    def add_arguments_to_parser(self, parser: LightningArgumentParser) -> None:
        parser.add_lightning_class_args(ModelCheckpoint, "checkpoint")
        # A rollout ends with at least one optimizer step, so "every step" saves once per
        # rollout, at its end; only the last checkpoint is kept.
        defaults = {"save_last": True, "save_top_k": 0, "every_n_train_steps": 1}
        parser.set_defaults({f"checkpoint.{key}": value for key, value in defaults.items()})
        parser.link_arguments("trainer.default_root_dir", "checkpoint.dirpath", cli.checkpoint_dir)
        link_logs_to_run_root(parser)


def main(args: list[str] | None = None, callbacks: Sequence[Callback] = ()) -> PPOCLI:
    """Parse ``args`` (default: the command line) and run the chosen subcommand, with
    ``callbacks`` added to the trainer's (a sweep's trial adds its reporter)."""
    with cli.processes_released(), user_errors(), cli.quiet_third_parties(*HINTS):
        return PPOCLI(
            PPOModule,
            seed_everything_default=0,
            # One epoch is one pass over the rollout stream: the whole budget.
            trainer_defaults={
                "max_epochs": 1,
                "log_every_n_steps": 1,  # the module logs once per rollout: every one
                "callbacks": [
                    RunSummary(metrics=()),
                    PPOReporting(),
                    BroadcastGuardCallback(steps=2),
                    NonFiniteLocator(),
                    *callbacks,
                ],
            },
            save_config_kwargs={"overwrite": True},
            parser_kwargs={"prog": f"python -m {__package__}"},  # not __main__.py in usage lines
            args=args,
        )


if __name__ == "__main__":
    main()
