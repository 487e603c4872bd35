"""A sweep's worker: a module of its own, which a spawned worker process imports."""

import argparse
import os
import time
import warnings

import optuna
from optuna.trial import TrialState

from ..run.errors import UserError, user_errors
from ..run.guards import NonFiniteError
from . import storage, trial
from .space import SearchSpace


def open_study(options: argparse.Namespace, search: SearchSpace) -> optuna.Study:
    study = optuna.create_study(
        study_name=options.study,
        storage=storage.open_storage(options.storage),
        direction=search.direction,
        pruner=search.pruner,
        load_if_exists=True,
    )
    if study.direction.name.lower() != search.direction:
        raise UserError(
            f"--space {search.path}: direction {search.direction}, but study "
            f"{options.study} in {options.storage} was made to {study.direction.name.lower()}"
        )
    return study


def work(options: argparse.Namespace, search: SearchSpace, fit: trial.Main, worker: int) -> None:
    """Run trials until the study holds ``options.trials`` (as ``__main__`` completed them)
    finished ones."""
    with user_errors(), warnings.catch_warnings():
        # Each trial hands the example's main its own arguments on purpose, while the
        # sweep's are in sys.argv; LightningCLI's warning about the two does not apply.
        warnings.filterwarnings("ignore", "LightningCLI's args parameter is intended", UserWarning)
        study = open_study(options, search)
        refusals: list[UserError] = []
        failed_in_a_row = 0

        def objective(run: optuna.Trial) -> float:
            # Seeded by --seed and the trial's number: trial n draws what it would with any
            # number of workers, or after a resume (set after the old sampler's before_trial,
            # which TPE does not use). TPE as in Optuna 4 (5's is multivariate, constant liar).
            run.study.sampler = optuna.samplers.TPESampler(
                seed=(options.seed * 1_000_003 + run.number) % 2**32,
                multivariate=False,
                constant_liar=False,
            )
            try:
                return trial.run(run, search, fit, options.fit_args, options.folder)
            except UserError as error:  # the trial has ended; no Optuna traceback for it
                refusals.append(error)
                return float("nan")

        def after_trial(study: optuna.Study, finished: optuna.trial.FrozenTrial) -> None:
            nonlocal failed_in_a_row
            failed_in_a_row = failed_in_a_row + 1 if finished.state == TrialState.FAIL else 0
            if refusals:  # stop the sweep; say why last
                raise refusals[0]
            if failed_in_a_row >= options.trials:  # as many as were asked for: give up
                raise UserError(f"{failed_in_a_row} trials in a row failed: see the warnings above")
            if to_start(study, options.trials) <= 0:
                study.stop()

        # One thread per worker: each trial's fit takes OMP_NUM_THREADS where
        # --model.torch_threads is not given. The process gets its own value back at the end.
        exported = os.environ.get("OMP_NUM_THREADS")
        os.environ["OMP_NUM_THREADS"] = "1"
        try:
            while storage.finished(study) < options.trials:
                left = to_start(study, options.trials)
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
            if exported is None:
                del os.environ["OMP_NUM_THREADS"]
            else:
                os.environ["OMP_NUM_THREADS"] = exported


def to_start(study: optuna.Study, trials: int) -> int:
    """How many more trials the study needs to hold ``trials`` finished ones: those running
    in live workers on this machine should finish (a worker waits to see)."""
    return trials - storage.finished(study) - storage.running_here(study)
