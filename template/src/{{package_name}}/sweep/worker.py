"""A sweep's worker, which runs trials until the study holds ``--trials`` finished ones: a
module of its own, so that a spawned worker process can import :func:`work`."""

import time
import warnings
from dataclasses import dataclass
from importlib import import_module
from importlib.util import find_spec
from pathlib import Path

import optuna
import torch
from optuna.trial import TrialState

from ..run.errors import UserError, user_errors
from ..run.guards import NonFiniteError
from . import space, storage, trial

PACKAGE = str(__package__).rpartition(".")[0]
EXAMPLES = [name for name in ("regression", "ppo", "sequence") if find_spec(f"{PACKAGE}.{name}")]


@dataclass(frozen=True)
class Settings:
    """What every worker needs; plain values, so a spawned worker receives them."""

    example: str
    space_path: Path
    fit_args: tuple[str, ...]
    study: str
    storage: str
    trials: int
    seed: int
    folder: Path


def work(settings: Settings, worker: int) -> None:
    """One worker: run trials until the study has ``settings.trials`` finished ones."""
    with user_errors(), warnings.catch_warnings():
        # Each trial hands the example's main its own arguments on purpose, while the
        # sweep's are in sys.argv; LightningCLI's warning about the two does not apply.
        warnings.filterwarnings("ignore", "LightningCLI's args parameter is intended", UserWarning)
        search = space.load(settings.space_path)
        fit_main = example_main(settings.example)
        study = optuna.load_study(
            study_name=settings.study,
            storage=storage.open_storage(settings.storage),
            pruner=search.pruner,
        )
        refusals: list[UserError] = []
        failed_in_a_row = 0

        def objective(run: optuna.Trial) -> float:
            # A sampler seeded by --seed and the trial's number: trial n draws what it would
            # draw with any number of workers, or after a resume. It is set after Optuna called
            # the old one's before_trial, which TPE does not use. TPE's defaults are pinned to
            # Optuna 4's (Optuna 5 made it multivariate, with a constant liar).
            run.study.sampler = optuna.samplers.TPESampler(
                seed=(settings.seed * 1_000_003 + run.number) % 2**32,
                multivariate=False,
                constant_liar=False,
            )
            try:
                return trial.run(run, search, fit_main, settings.fit_args, settings.folder)
            except UserError as error:  # raised once the trial has ended: no traceback
                refusals.append(error)
                return float("nan")

        def after_trial(study: optuna.Study, finished: optuna.trial.FrozenTrial) -> None:
            nonlocal failed_in_a_row
            failed_in_a_row = failed_in_a_row + 1 if finished.state == TrialState.FAIL else 0
            if refusals:  # stop the sweep; say why last
                raise refusals[0]
            if failed_in_a_row >= settings.trials:  # as many as were asked for: give up
                raise UserError(f"{failed_in_a_row} trials in a row failed: see the warnings above")
            if to_start(study, settings.trials) <= 0:
                study.stop()

        threads = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            while storage.finished(study) < settings.trials:
                left = to_start(study, settings.trials)
                if left <= 0:  # the rest run in live workers here: wait for how they end
                    time.sleep(0.2)
                    continue
                study.optimize(
                    objective,
                    n_trials=left,
                    catch=(NonFiniteError,),  # a diverging trial fails; the sweep goes on
                    callbacks=[after_trial],
                    show_progress_bar=worker == 0,
                )
        finally:
            torch.set_num_threads(threads)


def to_start(study: optuna.Study, trials: int) -> int:
    """How many more trials the study needs to hold ``trials`` finished ones. Those running
    in live workers on this machine should finish: a worker waits for them (one may fail,
    or its worker die) instead of starting an extra one beside them."""
    return trials - storage.finished(study) - storage.running_here(study)


def example_main(example: str) -> trial.Main:
    return import_module(f"{PACKAGE}.{example}.__main__").main
