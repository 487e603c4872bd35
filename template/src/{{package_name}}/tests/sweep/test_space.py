"""A sweep's search space and storage: every mistake in the YAML is refused by name, in one
line, before anything trains; a good space samples every type the way the run receives it;
a storage no other worker could open is refused; a worker's trial counts as running only
while that worker lives."""

import json
import os
import socket
import warnings
from pathlib import Path

import optuna
import pytest
import yaml

from ...run.errors import UserError
from ...sweep import space
from ...sweep.__main__ import EXAMPLES
from ...sweep.__main__ import main as sweep_main
from ...sweep.storage import _alive, _stat, open_storage, this_worker
from ...sweep.worker import to_start

GOOD = {
    "objective": {"key": "val_r2", "direction": "maximize"},
    "parameters": {
        "model.learning_rate": {"type": "float", "low": 1.0e-4, "high": 1.0e-2, "log": True},
        "model.hidden_sizes": {"type": "categorical", "choices": [[64, 64], [128, 128]]},
        "data.batch_size": {"type": "int", "low": 64, "high": 512, "step": 64},
        "model.activation": {"type": "categorical", "choices": ["relu", "silu"]},
    },
}


def _write(tmp_path: Path, document: object) -> Path:
    path = tmp_path / "space.yaml"
    path.write_text(yaml.safe_dump(document))
    return path


def _with(parameter: dict) -> dict:
    return {**GOOD, "parameters": {"model.x": parameter}}


def test_good_space_samples_every_type_as_the_run_receives_it(tmp_path: Path) -> None:
    search = space.load(_write(tmp_path, GOOD))
    trial = optuna.create_study().ask()
    values = search.sample(trial)
    assert values["model.hidden_sizes"] in ([64, 64], [128, 128])
    assert values["data.batch_size"] % 64 == 0 and 1e-4 <= values["model.learning_rate"] <= 1e-2
    # Optuna stores the list choice as its JSON text; the run gets the list.
    assert trial.params["model.hidden_sizes"] == json.dumps(values["model.hidden_sizes"])
    overrides = [arg.replace(" ", "") for arg in space.overrides(values)]
    assert f"--model.activation={values['model.activation']}" in overrides
    assert f"--model.hidden_sizes={values['model.hidden_sizes']}".replace(" ", "") in overrides
    # Between them, the edge rows hold both bounds and every choice.
    rows = search.edge_rows()
    assert {row["data.batch_size"] for row in rows} == {64, 512}
    assert [64, 64] in [row["model.hidden_sizes"] for row in rows]


@pytest.mark.parametrize(
    ("document", "message"),
    [
        ({"parameters": GOOD["parameters"]}, "objective needs a key"),
        ({**GOOD, "objective": {"key": "val_r2", "direction": "up"}}, "direction is 'up'"),
        ({"objective": GOOD["objective"]}, "parameters must map"),
        ({**GOOD, "sampler": "tpe"}, "unknown key 'sampler'"),
        (
            {**GOOD, "objective": {"key": "val_r2", "directon": "max"}},
            r"unknown keys \['directon'\]",
        ),
        (_with({"type": "uniform", "low": 0, "high": 1}), "unknown type 'uniform'"),
        ({**GOOD, "parameters": {"model.x": "float"}}, "model.x: unknown type 'float'"),
        ({**GOOD, "parameters": {"model.x": [1, 2]}}, r"model.x: unknown type \[1, 2\]"),
        (_with({"type": "float", "low": 1.0}), "missing 1 required positional argument: 'high'"),
        (_with({"type": "float", "low": None, "high": 1.0}), "argument: 'low'"),  # null: absent
        # Optuna's own messages, which differ between 4.3 and 5 but name the values.
        (_with({"type": "float", "low": 1.0, "high": 0.5}), r"\(low=1\.0, high=0\.5\)"),
        (_with({"type": "float", "low": 0.0, "high": 1.0, "log": True}), r"log.*\(low=0\.0"),
        (_with({"type": "int", "low": 1.5, "high": 4}), "not a whole number"),
        (_with({"type": "int", "low": 1, "high": 4, "choices": [1]}), "argument 'choices'"),
        (_with({"type": "categorical", "choices": []}), "non-empty list"),
        ({**GOOD, "pruner": {"patience": 3}}, "MedianPruner.*argument 'patience'"),
    ],
)
def test_bad_space_is_refused_by_name(tmp_path: Path, document: dict, message: str) -> None:
    with pytest.raises(UserError, match=message):
        space.load(_write(tmp_path, document))


def test_bad_space_ends_the_command_in_one_error_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _write(tmp_path, _with({"type": "float", "low": 2, "high": 1}))
    with pytest.raises(SystemExit) as stop:
        sweep_main([EXAMPLES[0], "--space", str(path), "--trials", "1", "--root", str(tmp_path)])
    assert stop.value.code == 2
    err = capsys.readouterr().err
    with pytest.raises(ValueError) as optunas:
        optuna.distributions.FloatDistribution(2, 1)  # the values as the file gives them
    assert err.strip().splitlines()[-1] == f"error: --space {path}: model.x: {optunas.value}"
    assert "Traceback" not in err
    assert not (tmp_path / EXAMPLES[0]).exists()


def test_storage_that_no_other_worker_can_open_is_refused_in_one_line(tmp_path: Path) -> None:
    with pytest.raises(UserError, match=r"in-memory database .* name a file"):
        open_storage("sqlite:///")
    with pytest.raises(UserError) as refusal:
        open_storage("sqlite:////no/such/folder/sweep.db")
    assert "\n" not in str(refusal.value)
    assert str(refusal.value).startswith("--storage sqlite:////no/such/folder/sweep.db: ")
    # An RDB storage's heartbeat marks a killed worker's trial failed; Optuna's notice that
    # the argument is experimental, which a sweep's user cannot act on, is hidden there only.
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        open_storage(f"sqlite:///{tmp_path / 'sweep.db'}")
        assert caught == []
        optuna.storages.RDBStorage(f"sqlite:///{tmp_path / 'other.db'}", heartbeat_interval=20)
    assert any("heartbeat_interval" in str(w.message) for w in caught)


def test_trials_to_start_count_the_live_ones_of_this_machine_as_finishing(
    tmp_path: Path,
) -> None:
    """Not counted: a dead worker's trial, another host's, one not yet saying whose it is,
    and one naming this process (which runs no trial while it counts: a dead worker's id)."""
    study = optuna.create_study(storage=open_storage(f"journal:{tmp_path / 'study.journal'}"))
    for _ in range(2):
        study.tell(study.ask(), 1.0)
    gone = 2**22 + 1  # above the largest process id Linux and macOS hand out
    host = socket.gethostname()
    parent = {"host": host, "pid": os.getppid()}  # alive: the process that started this one
    for worker in (parent, {**parent, "pid": gone}, {**parent, "host": "x"}, this_worker(), None):
        running = study.ask()
        if worker is not None:
            running.set_user_attr("worker", worker)
    assert to_start(study, 5) == 5 - 2 - 1
    assert to_start(study, 3) == 0


def test_a_process_that_took_a_dead_workers_id_is_not_taken_for_it() -> None:
    """With /proc, a record is alive only if the process with its id started when the worker
    did; one clock tick after the parent's start is known to differ (this process's own may
    fall in the parent's tick)."""
    started = _stat(os.getppid())[1]
    parent = {**this_worker(), "pid": os.getppid(), "started": started}
    assert _alive(parent)
    assert _alive({**parent, "started": None})  # a record without a start time: the id decides
    if started is not None:
        assert not _alive({**parent, "started": str(int(started) + 1)})
