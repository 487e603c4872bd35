"""The sweep's pruner: a trial running beside the judged one counts once it has passed the
judged step, and with no trial running its decisions are Optuna's MedianPruner's."""

import optuna
import pytest
from optuna.pruners import MedianPruner

from ...sweep.pruner import ParallelMedianPruner


def _judged(complete: list[float], running: dict[int, float], value: float) -> tuple:
    """A maximising study with ``complete`` trials (each its value at steps 0-9), trials
    still running at ``{step: value}``, and the judged trial, which reported ``value`` at
    step 5; return the study and the judged trial."""
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(direction="maximize")
    for result in complete:
        trial = study.ask()
        for step in range(10):
            trial.report(result, step)
        study.tell(trial, result)
    for step, result in running.items():
        study.ask().report(result, step)
    judged = study.ask()
    judged.report(value, 5)
    return study, study.get_trials()[judged.number]


def test_running_trial_past_the_step_ends_the_start_up_and_joins_the_median() -> None:
    study, judged = _judged([0.5, 0.6, 0.7, 0.8], {5: 0.9}, value=0.65)
    assert not MedianPruner(n_startup_trials=5, n_warmup_steps=5).prune(study, judged)
    assert ParallelMedianPruner(n_startup_trials=5, n_warmup_steps=5).prune(study, judged)
    # Above the median of the five values at step 5 (0.7), it goes on.
    study, judged = _judged([0.5, 0.6, 0.7, 0.8], {5: 0.9}, value=0.75)
    assert not ParallelMedianPruner(n_startup_trials=5, n_warmup_steps=5).prune(study, judged)


def test_running_trial_short_of_the_step_is_not_counted() -> None:
    # Counted, it would end the start-up, and 0.55 is below the median at step 5 (0.65).
    study, judged = _judged([0.5, 0.6, 0.7, 0.8], {2: 0.9}, value=0.55)
    assert not ParallelMedianPruner(n_startup_trials=5, n_warmup_steps=5).prune(study, judged)
    # Its value at step 2 does not lower the median at step 5 either.
    study, judged = _judged([0.5, 0.6, 0.7, 0.8, 0.9], {2: 0.1}, value=0.65)
    assert ParallelMedianPruner(n_startup_trials=5, n_warmup_steps=5).prune(study, judged)


@pytest.mark.parametrize("value", [0.1, 0.55, 0.65, 0.7, 0.75, 0.95])
@pytest.mark.parametrize("warmup", [0, 5, 6])
def test_with_nothing_running_it_decides_as_median_pruner(value: float, warmup: int) -> None:
    study, judged = _judged([0.5, 0.6, 0.7, 0.8, 0.9, 0.4], {}, value=value)
    expected = MedianPruner(n_startup_trials=5, n_warmup_steps=warmup).prune(study, judged)
    assert (
        ParallelMedianPruner(n_startup_trials=5, n_warmup_steps=warmup).prune(study, judged)
        == expected
    )
