"""Sweeps of the regression example: a small study end to end, its best.yaml run again, a
pruned trial, an option path the parser does not know, and a worker killed mid-trial."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import optuna
import pytest
import torch
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
    "--trainer.enable_progress_bar=false",
    "--trainer.enable_model_summary=false",
]
SPACE = {
    "objective": {"key": "val_r2", "direction": "maximize"},
    "parameters": {
        "model.learning_rate": {"type": "float", "low": 1.0e-3, "high": 3.0e-2, "log": True},
        "model.hidden_sizes": {"type": "categorical", "choices": [[16], [32, 32]]},
        "data.batch_size": {"type": "int", "low": 64, "high": 256, "step": 64},
    },
}


def _space(tmp_path: Path, document: dict = SPACE) -> Path:
    path = tmp_path / "space.yaml"
    path.write_text(yaml.safe_dump(document))
    return path


def _sweep_args(tmp_path: Path, trials: int, *fit_args: str) -> list[str]:
    return [
        "regression",
        f"--space={_space(tmp_path)}",
        f"--trials={trials}",
        f"--config={CONFIG}",
        f"--root={tmp_path / 'sweeps'}",
        "--",
        *fit_args,
    ]


def _summary(folder: Path) -> dict:
    (path,) = folder.rglob("summary.json")
    return json.loads(path.read_text())


@pytest.mark.cli
def test_sweep_of_three_trials_leaves_best_yaml_that_reproduces_the_best_trial(
    tmp_path: Path,
) -> None:
    study = sweep_main(_sweep_args(tmp_path, 3, *TINY))
    folder = tmp_path / "sweeps" / "regression"
    assert [t.state for t in study.trials] == [TrialState.COMPLETE] * 3
    for past in study.trials:
        assert _summary(folder / f"trial_{past.number}")["val_r2"] == past.value
    for name in ("best.yaml", "history.png", "importances.png", "study.journal"):
        assert (folder / name).is_file(), name
    best = yaml.safe_load((folder / "best.yaml").read_text())
    assert best["trainer"]["max_epochs"] == 2  # a fit argument passed on after --
    assert best["model"]["hidden_sizes"] == json.loads(study.best_params["model.hidden_sizes"])
    assert "default_root_dir" not in best["trainer"]

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as the trial ran
    try:
        again = tmp_path / "again"
        args = ["fit", "--config", str(CONFIG), "--config", str(folder / "best.yaml")]
        regression_main([*args, f"--trainer.default_root_dir={again}"])
    finally:
        torch.set_num_threads(threads)
    assert _summary(again)["val_r2"] == pytest.approx(study.best_value, abs=1e-3)


class _AlwaysPrune(optuna.pruners.BasePruner):
    def prune(self, study: optuna.Study, trial: optuna.trial.FrozenTrial) -> bool:
        return True


@pytest.mark.slow
@pytest.mark.cli
def test_two_workers_share_the_study_and_stop_at_the_total(tmp_path: Path) -> None:
    args = _sweep_args(tmp_path, 4, *TINY)
    study = sweep_main([*args[:5], "--workers=2", *args[5:]])
    finished = [t for t in study.trials if t.state == TrialState.COMPLETE]
    # Workers on one machine start no trial the study does not need; two that finish at
    # the same instant may still start one each.
    assert 4 <= len(finished) <= 5
    workers = {t.user_attrs["worker"]["pid"] for t in finished}
    assert len(workers) == 2  # this process ran trials, and so did the one beside it
    assert (tmp_path / "sweeps" / "regression" / "best.yaml").is_file()


@pytest.mark.cli
def test_diverging_trials_fail_and_the_sweep_gives_up_after_as_many_in_a_row_as_asked(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A diverging trial is FAIL and the worker runs the next one, even when the study
    needed only one more; when --trials of them in a row have failed, the sweep stops with
    one error line instead of sampling forever."""
    args = _sweep_args(tmp_path, 2, *TINY)
    sweep_main(args)
    diverging = {
        **SPACE["parameters"],
        "model.learning_rate": {"type": "float", "low": 1.0e20, "high": 1.0e21, "log": True},
    }
    _space(tmp_path, {**SPACE, "parameters": diverging})  # in place of the space args names
    capsys.readouterr()
    with pytest.raises(SystemExit) as stop:
        sweep_main([arg.replace("--trials=2", "--trials=3") for arg in args])
    assert stop.value.code == 2
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        "error: 3 trials in a row failed: see the warnings above"
    )
    journal = open_storage(f"journal:{tmp_path / 'sweeps' / 'regression' / 'study.journal'}")
    states = [t.state for t in optuna.load_study(study_name="regression", storage=journal).trials]
    assert states == [TrialState.COMPLETE] * 2 + [TrialState.FAIL] * 3


@pytest.mark.slow
@pytest.mark.cli
def test_a_trial_draws_the_same_values_with_one_worker_or_two(tmp_path: Path) -> None:
    """Each trial's sampler is seeded by --seed and the trial's number, so the random first
    trials of a study are the same whatever the number of workers (or which worker ran
    them), and a sweep's 1-worker and 2-worker timings compare the same trials."""
    trials = {}
    for workers in (1, 2):
        (tmp_path / str(workers)).mkdir()
        args = _sweep_args(tmp_path / str(workers), 3, *TINY)
        study = sweep_main([*args[:5], f"--workers={workers}", "--seed=3", *args[5:]])
        trials[workers] = {t.number: t for t in study.trials if t.number < 3}
    assert {n: t.params for n, t in trials[1].items()} == {
        n: t.params for n, t in trials[2].items()
    }
    assert trials[1][0].params != trials[1][1].params  # a seed per trial, not one for all
    # Trials of the second worker are among them: it is not the first worker's seeding
    # that makes them equal.
    assert any(t.user_attrs["worker"]["pid"] != os.getpid() for t in trials[2].values())


@pytest.mark.cli
def test_pruned_trial_ends_its_fit_cleanly_and_writes_its_summary(tmp_path: Path) -> None:
    search = space.load(_space(tmp_path))
    study = optuna.create_study(direction="maximize", pruner=_AlwaysPrune())
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
    path = _space(tmp_path, {**SPACE, "parameters": misspelt})
    args = ["regression", f"--space={path}", "--trials=1", f"--config={CONFIG}"]
    with pytest.raises(SystemExit) as stop:
        sweep_main([*args, f"--root={tmp_path / 'sweeps'}"])
    assert stop.value.code == 2
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert last == (
        f"error: --space {path} with the fit arguments: "
        "unrecognized arguments: --model.learning_rat=0.001"
    )
    assert not (tmp_path / "sweeps").exists()


@pytest.mark.cli
def test_a_value_the_run_refuses_ends_the_sweep_with_the_runs_own_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The parser takes the value, the data module refuses it: the trial fails and the
    sweep's last line is the run's refusal, with the trial's values, and no traceback."""
    refused = {"data.max_levels": {"type": "int", "low": 0, "high": 0}}
    path = _space(tmp_path, {**SPACE, "parameters": refused})
    with pytest.raises(SystemExit) as stop:
        sweep_main(
            [
                "regression",
                f"--space={path}",
                "--trials=1",
                f"--config={CONFIG}",
                f"--root={tmp_path}",
            ]
        )
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert err.strip().splitlines()[-1] == (
        "error: trial 0 (--data.max_levels=0): --data.max_levels must be at least 1, got 0"
    )
    assert "Traceback" not in err


@pytest.mark.slow
@pytest.mark.cli
def test_worker_killed_mid_trial_fails_that_trial_and_a_rerun_reaches_the_total(
    tmp_path: Path,
) -> None:
    args = _sweep_args(tmp_path, 3, *TINY)
    folder = tmp_path / "sweeps" / "regression"
    worker = subprocess.Popen(
        [sys.executable, "-m", f"{PACKAGE}.sweep", *args],
        cwd=tmp_path,
        env=child_environment({"OMP_NUM_THREADS": "1"}),
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
    journal = open_storage(f"journal:{folder / 'study.journal'}")
    killed = optuna.load_study(study_name="regression", storage=journal).trials
    assert [t.state for t in killed] == [TrialState.COMPLETE, TrialState.RUNNING]

    study = sweep_main(args)

    complete, fail = TrialState.COMPLETE, TrialState.FAIL
    assert [t.state for t in study.trials] == [complete, fail, complete, complete]
    assert study.trials[2].params != study.trials[1].params  # not retried
    assert (folder / "best.yaml").is_file()
