"""Command line: ``python -m <package>.ppo fit --config configs/ppo.yaml``."""

import warnings

from lightning.pytorch.cli import LightningCLI

from ..run_summary import RunSummary
from .module import PPOModule

# The rollout stream reports a length on purpose (it switches off prefetching), and
# rollouts are collected in this process, so these two hints do not apply.
warnings.filterwarnings("ignore", ".*IterableDataset.*has `__len__` defined.*")
warnings.filterwarnings("ignore", ".*does not have many workers.*")


def main(args: list[str] | None = None) -> LightningCLI:
    """Parse ``args`` (default: the command line) and run the chosen subcommand."""
    return LightningCLI(
        PPOModule,
        seed_everything_default=0,
        # One epoch is one pass over the rollout stream: the whole budget.
        trainer_defaults={"max_epochs": 1, "callbacks": [RunSummary(metrics=())]},
        save_config_kwargs={"overwrite": True},
        args=args,
    )


if __name__ == "__main__":
    main()
