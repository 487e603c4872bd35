"""Command line: ``python -m <package>.ppo fit --config configs/ppo.yaml``.

``last.ckpt`` is written after every rollout to ``<default_root_dir>/checkpoints``, shared by
the root's runs: a rerun after a crash (a new ``version_N``) finds it with ``--ckpt_path last``.
"""

from collections.abc import Sequence

from lightning.pytorch.callbacks import Callback

from ..run.cli import ExampleCLI
from .module import PPOModule
from .reporting import PPOReporting


class PPOCLI(ExampleCLI):
    notices = (
        ".*IterableDataset.*has `__len__` defined.*",
        ".*does not have many workers.*",
        ".*resuming from a checkpoint that ended before the epoch.*",
        ".*no pre-optimization state was saved.*",
    )
    """Lightning's hints that do not apply here: the rollout stream's length is on purpose
    (no prefetch), rollouts are collected in this process, and resuming within the epoch,
    after a rollout's update, is the normal case."""
    guarded_steps = 2
    # A rollout ends with at least one optimizer step, so "every step" saves once per
    # rollout, at its end; only the last checkpoint is kept.
    checkpoint_defaults = {"save_last": True, "save_top_k": 0, "every_n_train_steps": 1}


def main(args: list[str] | None = None, callbacks: Sequence[Callback] = ()) -> PPOCLI:
    """Run the subcommand in ``args`` (default: the command line) with extra ``callbacks``."""
    # One epoch is one pass over the rollout stream: the whole budget; the module logs once
    # per rollout, so every step is logged.
    return PPOCLI.launch(
        model_class=PPOModule,
        callbacks=[PPOReporting(), *callbacks],
        args=args,
        package=__package__,
        max_epochs=1,
        log_every_n_steps=1,
    )


if __name__ == "__main__":
    main()
