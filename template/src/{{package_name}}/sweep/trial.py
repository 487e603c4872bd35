"""One trial of a sweep: an ordinary ``fit`` of the example, run in this process by the
example's own ``main`` with the sampled values as ``--key=value`` after the user's arguments,
in ``trial_<number>/`` of the study's folder.
"""

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import lightning as L
import optuna
from lightning.pytorch.callbacks import Callback

from ..run.errors import UserError
from .space import SearchSpace, overrides
from .storage import this_worker

Main = Callable[..., Any]
"""An example's ``main(args, callbacks)``."""


class TrialReporter(Callback):
    """Reports the objective after every validation (regression, sequence) or evaluation (PPO:
    the callback that keeps ``evaluations`` has it in its ``summary_extras``). When the pruner
    says stop, the trainer stops, so the run still ends cleanly and writes ``summary.json``."""

    def __init__(self, trial: optuna.Trial, key: str) -> None:
        self.trial, self.key = trial, key
        self.pruned_at: int | None = None
        self.seen = 0  # evaluations reported

    def on_validation_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        value = trainer.callback_metrics.get(self.key)
        if not trainer.sanity_checking and value is not None:
            self.report(trainer, float(value), trainer.current_epoch)

    def on_train_batch_end(self, trainer: L.Trainer, pl_module: L.LightningModule, *_: Any) -> None:
        for callback in trainer.callbacks:  # type: ignore[attr-defined]
            evaluations = getattr(callback, "evaluations", None) or []
            extras = getattr(callback, "summary_extras", None)
            if len(evaluations) > self.seen and callable(extras):  # a new evaluation
                self.seen = len(evaluations)
                values = extras(trainer, pl_module)
                if isinstance(values, dict) and values.get(self.key) is not None:
                    self.report(trainer, float(values[self.key]), int(evaluations[-1][0]))

    def report(self, trainer: L.Trainer, value: float, step: int) -> None:
        if self.pruned_at is None:
            self.trial.report(value, step)
            if self.trial.should_prune():
                self.pruned_at, trainer.should_stop = step, True


def run(
    trial: optuna.Trial, space: SearchSpace, main: Main, fit_args: Sequence[str], folder: Path
) -> float:
    """Fit the example with ``fit_args`` and ``trial``'s values; return the objective from its
    ``summary.json``. Raises :class:`optuna.TrialPruned` once a pruned run has ended, and
    :class:`UserError` when the run refuses its arguments or has no value for the objective."""
    trial.set_user_attr("worker", this_worker())
    sampled = overrides(space.sample(trial))
    root = folder / f"trial_{trial.number}"
    reporter = TrialReporter(trial, space.key)
    try:
        cli = main(
            ["fit", *fit_args, *sampled, f"--trainer.default_root_dir={root}"], callbacks=[reporter]
        )
    except SystemExit as stop:
        # The run printed its refusal, a UserError (the exit's context): the sweep's last line
        # repeats it, with the trial's values.
        reason = f"the run ended with status {stop.code} before it trained"
        if isinstance(stop.__context__, UserError):
            reason = str(stop.__context__)
        raise UserError(f"trial {trial.number} ({' '.join(sampled)}): {reason}") from None
    log_dir = Path(cli.trainer.log_dir or root)
    trial.set_user_attr("log_dir", str(log_dir))
    summary = json.loads((log_dir / "summary.json").read_text())
    value = summary.get(space.key)
    if not isinstance(value, int | float):
        numbers = [key for key, item in summary.items() if isinstance(item, int | float)]
        why = "null" if space.key in summary else "not there"
        raise UserError(
            f"--space {space.path}: objective.key {space.key!r} is {why} in "
            f"{log_dir / 'summary.json'}; its numbers are {', '.join(numbers)}"
        )
    if reporter.pruned_at is not None:
        raise optuna.TrialPruned(f"at step {reporter.pruned_at}; {space.key} {value:.4g}")
    return float(value)
