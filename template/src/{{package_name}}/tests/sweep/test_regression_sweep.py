"""Sweeps of the regression example: a small study end to end, its best.yaml run again, two
workers, a pruned trial, diverging trials, refusals before and during a trial, and a worker
killed mid-trial."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import optuna
import pytest
import yaml
from optuna.trial import TrialState

from ...regression.__main__ import main as regression_main
from ...sweep import space, trial
from ...sweep.__main__ import main as sweep_main
from ...sweep.storage import open_storage
from ..project import CONFIGS, PACKAGE, child_environment

CONFIG = CONFIGS / "regression.yaml"
TINY = [
    "--trainer.max_epochs=2",
    "--trainer.limit_train_batches=3",
    "--trainer.limit_val_batches=2",
]
TINY += ["--trainer.enable_progress_bar=false", "--trainer.enable_model_summary=false"]
SPACE = {
    "objective": {"key": "val_r2", "direction": "maximize"},
    "parameters": {
        "model.learning_rate": {"type": "float", "low": 1.0e-3, "high": 3.0e-2, "log": True},
        "model.hidden_sizes": {"type": "categorical", "choices": [[16], [32, 32]]},
        "data.batch_size": {"type": "int", "low": 64, "high": 256, "step": 64},
    },
}


def _sweep(
    tmp_path: Path, trials: int, *options: str, parameters: dict = SPACE["parameters"]
) -> list[str]:
    """The sweep's arguments: ``parameters`` written as the space, and TINY after ``--``."""
    path = tmp_path / "space.yaml"
    path.write_text(yaml.safe_dump({**SPACE, "parameters": parameters}))
    args = ["regression", f"--space={path}", f"--trials={trials}", f"--config={CONFIG}"]
    return [*args, f"--root={tmp_path / 'sweeps'}", *options, "--", *TINY]


def _summary(folder: Path) -> dict:
    (path,) = folder.rglob("summary.json")
    return json.loads(path.read_text())


def _states(folder: Path) -> list[TrialState]:
    journal = open_storage(f"journal:{folder / 'study.journal'}")
    return [t.state for t in optuna.load_study(study_name="regression", storage=journal).trials]


def _last_error(capsys: pytest.CaptureFixture[str], args: list[str]) -> str:
    """The last line of a sweep that exits with status 2; it printed no traceback."""
    with pytest.raises(SystemExit) as stop:
        sweep_main(args)
    err = capsys.readouterr().err
    assert stop.value.code == 2 and "Traceback" not in err
    return err.strip().splitlines()[-1]


@pytest.mark.cli
def test_sweep_of_three_trials_leaves_best_yaml_that_reproduces_the_best_trial(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OMP_NUM_THREADS", "2")  # a worker computes with one thread all the same
    study = sweep_main(_sweep(tmp_path, 3))
    assert os.environ["OMP_NUM_THREADS"] == "2"
    folder = tmp_path / "sweeps" / "regression"
    assert [t.state for t in study.trials] == [TrialState.COMPLETE] * 3
    for past in study.trials:
        summary = _summary(folder / f"trial_{past.number}")
        assert (summary["val_r2"], summary["torch_threads"]) == (past.value, 1)
    for name in ("best.yaml", "history.png", "importances.png", "study.journal"):
        assert (folder / name).is_file(), name
    best = yaml.safe_load((folder / "best.yaml").read_text())
    assert best["trainer"]["max_epochs"] == 2  # a fit argument passed on after --
    assert best["model"]["hidden_sizes"] == json.loads(study.best_params["model.hidden_sizes"])
    assert "default_root_dir" not in best["trainer"]

    args = ["fit", "--config", str(CONFIG), "--config", str(folder / "best.yaml")]
    regression_main([*args, f"--trainer.default_root_dir={tmp_path / 'again'}"])
    assert _summary(tmp_path / "again")["val_r2"] == pytest.approx(study.best_value, abs=1e-3)


@pytest.mark.slow
@pytest.mark.cli
def test_two_workers_share_the_study_stop_at_the_total_and_draw_what_one_would(
    tmp_path: Path,
) -> None:
    """Each trial's sampler is seeded by --seed and the trial's number, so the random first
    trials of a study are the same whatever the number of workers, or which one ran them."""
    alone = sweep_main(_sweep(tmp_path, 3, "--seed=3", f"--root={tmp_path / 'alone'}"))
    study = sweep_main(_sweep(tmp_path, 4, "--seed=3", "--workers=2"))
    finished = [t for t in study.trials if t.state == TrialState.COMPLETE]
    # Workers on one machine start no trial the study does not need; two that finish at
    # the same instant may still start one each.
    assert 4 <= len(finished) <= 5
    assert [t.params for t in alone.trials] == [t.params for t in study.trials[:3]]
    assert len({t.user_attrs["worker"]["pid"] for t in study.trials[:3]}) == 2  # both ran some
    assert alone.trials[0].params != alone.trials[1].params  # a seed per trial, not one for all
    assert (tmp_path / "sweeps" / "regression" / "best.yaml").is_file()


@pytest.mark.cli
def test_diverging_trials_fail_and_the_sweep_gives_up_after_as_many_in_a_row_as_asked(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A diverging trial is FAIL and the worker runs the next one; when --trials of them in
    a row have failed, the sweep stops with one error line instead of sampling forever."""
    diverging = {"type": "float", "low": 1.0e20, "high": 1.0e21, "log": True}
    args = _sweep(tmp_path, 2, parameters={"model.learning_rate": diverging})
    assert _last_error(capsys, args) == "error: 2 trials in a row failed: see the warnings above"
    assert _states(tmp_path / "sweeps" / "regression") == [TrialState.FAIL] * 2


@pytest.mark.cli
def test_pruned_trial_ends_its_fit_cleanly_and_writes_its_summary(tmp_path: Path) -> None:
    class AlwaysPrune(optuna.pruners.BasePruner):
        def prune(self, study: optuna.Study, trial: optuna.trial.FrozenTrial) -> bool:
            return True

    _sweep(tmp_path, 1)  # writes the space
    search = space.load(tmp_path / "space.yaml")
    study = optuna.create_study(direction="maximize", pruner=AlwaysPrune())
    fit_args = ["--config", str(CONFIG), *TINY, "--trainer.max_epochs=3"]
    study.optimize(
        lambda run: trial.run(run, search, regression_main, fit_args, tmp_path), n_trials=1
    )
    (pruned,) = study.trials
    assert pruned.state == TrialState.PRUNED
    assert list(pruned.intermediate_values) == [0]  # reported after the first validation
    summary = _summary(tmp_path / "trial_0")
    assert summary["epochs"] == 1 and summary["val_r2"] == pruned.intermediate_values[0]


@pytest.mark.cli
def test_unknown_option_path_stops_the_sweep_before_any_trial(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # An unambiguous prefix: argparse would take it for model.learning_rate, ours refuses it.
    misspelt = {"model.learning_rat": SPACE["parameters"]["model.learning_rate"]}
    args = _sweep(tmp_path, 1, parameters=misspelt)
    assert _last_error(capsys, args) == (
        f"error: --space {tmp_path / 'space.yaml'} with the fit arguments: "
        "unrecognized arguments: --model.learning_rat=0.001"
    )
    assert not (tmp_path / "sweeps").exists()


@pytest.mark.cli
def test_a_value_the_run_refuses_ends_the_sweep_with_the_runs_own_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The parser takes the value, the data module refuses it: the trial fails and the
    sweep's last line is the run's refusal, with the trial's values."""
    one_row = {"data.synthetic_samples": {"type": "int", "low": 1, "high": 1}}
    assert _last_error(capsys, _sweep(tmp_path, 1, parameters=one_row)) == (
        "error: trial 0 (--data.synthetic_samples=1): --data.synthetic_samples: 1 data rows, "
        "and --data.val_fraction=0.2 holds out 1, leaving none for training"
    )


@pytest.mark.slow
@pytest.mark.cli
def test_worker_killed_mid_trial_fails_that_trial_and_a_rerun_reaches_the_total(
    tmp_path: Path,
) -> None:
    args = _sweep(tmp_path, 3)
    folder = tmp_path / "sweeps" / "regression"
    worker = subprocess.Popen(
        [sys.executable, "-m", f"{PACKAGE}.sweep", *args],
        cwd=tmp_path,
        env=child_environment(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 240
    while not (folder / "trial_1").exists():
        assert worker.poll() is None, "the sweep ended before its second trial"
        assert time.monotonic() < deadline, "no second trial after 240 s"
        time.sleep(0.01)
    worker.send_signal(signal.SIGKILL)
    worker.wait()
    assert _states(folder) == [TrialState.COMPLETE, TrialState.RUNNING]

    study = sweep_main(args)

    complete, fail = TrialState.COMPLETE, TrialState.FAIL
    assert [t.state for t in study.trials] == [complete, fail, complete, complete]
    assert study.trials[2].params != study.trials[1].params  # not retried
    assert (folder / "best.yaml").is_file()
