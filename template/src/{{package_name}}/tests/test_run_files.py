"""A run's files gone bad: each case ends in one line, ``error: <file>: <what is wrong>``,
with exit status 2 and no traceback, and never in a run that silently starts over. A crash
while a checkpoint is written leaves the previous one whole.

Each example trains once, tiny, in this process (module fixture); the cases break copies
of its files. One case per example runs the real command line, for the exit status.
"""

import importlib
import logging
import re
import shutil
import warnings
import zipfile
from collections.abc import Callable
from pathlib import Path

import lightning as L
import pytest
import torch
import yaml

from ..run.cli import _TIP_SOURCES, quiet_third_parties
from ..run.errors import UserError, user_errors
from .project import (
    CONFIGS,
    EXAMPLES,
    PACKAGE,
    QUIET,
    example_main,
    fit_summary,
    refusal,
    refused_line,
    run_example,
)

TINY = {"regression": ["--data.synthetic_samples=256", "--data.batch_size=64"]}
TINY["regression"] += ["--trainer.max_epochs=2", "--model.hidden_sizes=[8]"]
TINY["ppo"] = ["--model.num_envs=2", "--model.num_steps=16", "--model.total_env_steps=96"]
TINY["ppo"] += ["--model.update_epochs=1", "--model.eval_episodes=1", "--model.hidden_sizes=[8]"]
TINY["sequence"] = ["--trainer.max_epochs=2", "--model.width=8", "--model.heads=2"]
TINY["sequence"] += ["--model.layers=1", "--data.batch_size=64"]
MODEL = {"regression": "RegressionModule", "ppo": "PPOModule", "sequence": "SequenceClassifier"}
WEIGHTS = {"regression": "net.*", "ppo": "agent.*", "sequence": "encoder.*"}
SIZE = {"regression": ("hidden_sizes", "[8]", "[16]"), "ppo": ("hidden_sizes", "[8]", "[16]")}
SIZE["sequence"] = ("width", "8", "16")
"""The option that sets each example's network size: its value in TINY, and a bigger one."""
Runs = dict[str, Path]  # example -> its run root
MISSING_STEPS = [
    (example, subcommand, step)
    for example in EXAMPLES
    for subcommand, step in (("validate", "validation_step"), ("test", "test_step"))
    if step not in vars(getattr(importlib.import_module(f"{PACKAGE}.{example}"), MODEL[example]))
]


def _args(example: str, root: Path, *extra: str) -> list[str]:
    run = [f"--trainer.default_root_dir={root}", "--trainer.accelerator=cpu"]
    return ["fit", *run, "--trainer.logger=false", *QUIET, *TINY[example], *extra]


@pytest.fixture(scope="module")
def finished(tmp_path_factory: pytest.TempPathFactory) -> Runs:
    """Each example's run root after a whole tiny run: ``checkpoints/last.ckpt`` is in it."""
    roots = {example: tmp_path_factory.mktemp(example) for example in EXAMPLES}
    for example, root in roots.items():
        example_main(example)(_args(example, root))
    return roots


def _half(source: Path, path: Path) -> None:
    path.write_bytes(source.read_bytes()[: source.stat().st_size // 2])


def _zip_of_notes(last: Path, path: Path) -> None:
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("notes.txt", "a zip archive, but not torch.save's\n")


UNREADABLE = r"{file}: not a readable checkpoint, the file is truncated or corrupt \("
NOT_ZIP = UNREADABLE + r"not a whole zip archive, as torch\.save writes\)"
NO_STATE_DICT = r"{file}: not a Lightning checkpoint \(it has no state_dict\)"
NO_LAST = r"--ckpt_path last: no last\.ckpt in {dir} to resume from; leave --ckpt_path out"
# case: (--ckpt_path, how the run's checkpoints/last.ckpt is made from a finished run's, or
# None for no file, the pattern of the line after "error: ")
BROKEN: dict[str, tuple[str, Callable[[Path, Path], object] | None, str]] = {
    "missing": ("{file}", None, "{file}: no such checkpoint file"),
    "truncated": ("{file}", _half, NOT_ZIP),
    "notes": ("{file}", lambda _, path: path.write_text("notes\n"), NOT_ZIP),
    "zip_of_notes": ("{file}", _zip_of_notes, UNREADABLE + r"RuntimeError: .*\)"),
    "weights": ("{file}", lambda _, path: torch.save({"w": torch.ones(1)}, path), NO_STATE_DICT),
    "truncated_last": ("last", _half, NOT_ZIP),  # found after the model is built
    "no_last": ("last", None, NO_LAST + " to start a new run"),
}


@pytest.mark.cli
@pytest.mark.parametrize("example", EXAMPLES)
@pytest.mark.parametrize("case", BROKEN)
def test_a_missing_or_broken_checkpoint_is_refused_by_name_and_left_as_it_is(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, finished: Runs, example: str, case: str
) -> None:
    ckpt_path, make, pattern = BROKEN[case]
    root = tmp_path / "run"
    file = root / "checkpoints" / "last.ckpt"
    if make:
        file.parent.mkdir(parents=True)
        make(finished[example] / "checkpoints" / "last.ckpt", file)
    before = file.read_bytes() if make else None
    paths = {"file": str(file), "dir": str(file.parent)}
    args = _args(example, root, f"--ckpt_path={ckpt_path.format(**paths)}")
    line = refusal(capsys, lambda: example_main(example)(args))
    escaped = {key: re.escape(path) for key, path in paths.items()}
    assert re.fullmatch("error: " + pattern.format(**escaped), line), line
    assert file.read_bytes() == before if make else not file.exists()  # nothing trained


@pytest.mark.cli
@pytest.mark.parametrize("form", ["named", "last"])
@pytest.mark.parametrize(("example", "writer"), [(e, w) for e in EXAMPLES for w in EXAMPLES])
def test_checkpoint_of_another_model_is_refused(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    finished: Runs,
    example: str,
    writer: str,
    form: str,
) -> None:
    """The ``writer`` example's checkpoint (the example's own at another network size: the run
    asks for a bigger one). ``last`` (and SLURM's ``hpc_ckpt``) is checked against the built
    model. LightningCLI makes a named file's hyperparameters the model's config: another
    example's are refused, and at another size the model is built at the file's and resumes."""
    option, size, bigger = SIZE[example]
    model, last = MODEL[example], tmp_path / "run" / "checkpoints" / "last.ckpt"
    last.parent.mkdir(parents=True)
    shutil.copy(finished[writer] / "checkpoints" / "last.ckpt", last)
    args = _args(example, tmp_path / "run", f"--ckpt_path={last if form == 'named' else form}")
    if writer == example:
        args.append(f"--model.{option}={bigger}")
    if writer == example and form == "named":
        cli = example_main(example)(args)
        assert str(cli.model.hparams[option]).replace(" ", "") == size  # type: ignore[attr-defined]
        assert cli.trainer.ckpt_path == str(last)  # type: ignore[attr-defined]
        return
    if writer == example:
        start = f"written for another {model}: {option}={size} in the file, {bigger} here ("
        end = " tensors differ)"
    elif form == "named":
        start, end = f"not a checkpoint of {model}: its hyperparameters ", f" are not {model}'s"
    else:
        start = f"not a checkpoint of {model}: it holds {WEIGHTS[writer]} weights, {model} has "
        end = WEIGHTS[example]
    line = refusal(capsys, lambda: example_main(example)(args))
    assert line.startswith(f"error: {last}: {start}") and line.endswith(end), line


@pytest.mark.cli
@pytest.mark.parametrize("example", EXAMPLES)
def test_run_folder_under_a_regular_file_is_refused(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, example: str
) -> None:
    # A path under a file cannot be created even by root, as CI runs; chmod would not stop it.
    notes = tmp_path / "notes.txt"
    notes.write_text("a file, not a folder\n")
    line = refusal(capsys, lambda: example_main(example)(_args(example, notes / "run")))
    expected = f"error: --trainer.default_root_dir {notes / 'run'}: cannot write there: "
    assert line == expected + f"{notes} is a file"


@pytest.mark.parametrize(("example", "subcommand", "step"), MISSING_STEPS)
def test_an_evaluation_without_its_step_is_refused(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, example: str, subcommand: str, step: str
) -> None:
    args = [subcommand, f"--trainer.default_root_dir={tmp_path}"]
    line = refusal(capsys, lambda: example_main(example)(args))
    assert line == f"error: {subcommand} needs {MODEL[example]}.{step}; this example has none"


class SimulatedCrash(Exception):
    pass


@pytest.mark.cli
@pytest.mark.parametrize("example", EXAMPLES)
def test_crash_while_writing_a_checkpoint_leaves_the_previous_last_ckpt(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, example: str
) -> None:
    """A resumed run that dies halfway through writing its first checkpoint. The first run
    trains in place: Lightning writes ``last-v1.ckpt`` beside a ``last.ckpt`` it did not
    write, as in a copied run folder."""
    root = tmp_path / "run"
    stop_early = ["--trainer.max_steps=2"] if example == "ppo" else []  # 2 of 3 rollouts
    example_main(example)(_args(example, root, *stop_early))
    last = root / "checkpoints" / "last.ckpt"
    before = torch.load(last, weights_only=False)["global_step"]
    written_to = []
    save = torch.save

    def half_then_crash(obj: object, f: object, *args: object, **kwargs: object) -> None:
        save(obj, f, *args, **kwargs)  # pyright: ignore[reportArgumentType]
        name = Path(getattr(f, "name", ""))
        if name.name.startswith(".last.ckpt."):  # the temporary file of last.ckpt
            written_to.append(name)
            f.truncate(f.tell() // 2)  # pyright: ignore[reportAttributeAccessIssue]
            raise SimulatedCrash

    monkeypatch.setattr(torch, "save", half_then_crash)
    more = ["--trainer.max_epochs=4"] if example != "ppo" else []
    with pytest.raises(SimulatedCrash):
        example_main(example)(_args(example, root, "--ckpt_path=last", *more))
    monkeypatch.undo()

    # The new last.ckpt was being written beside the old one, so os.replace is a rename ...
    assert written_to and written_to[0].parent == last.parent
    # ... and the crash left the old one whole, and no partial file behind.
    assert torch.load(last, weights_only=False)["global_step"] == before
    assert not [path for path in last.parent.iterdir() if path.name.startswith(".")]


def test_user_error_is_one_line_and_exit_2_other_errors_propagate(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(SystemExit) as exited, user_errors():
        raise UserError("runs/x.ckpt: broken")
    assert exited.value.code == 2
    assert capsys.readouterr().err == "error: runs/x.ckpt: broken\n"
    with pytest.raises(ValueError, match="a bug"), user_errors():
        raise ValueError("a bug")  # a bug keeps its traceback and Python's exit status 1

    monkeypatch.setenv("SHOW_TRACEBACK", "1")
    with pytest.raises(SystemExit), user_errors():
        raise UserError("runs/x.ckpt: broken")
    err = capsys.readouterr().err
    assert err.startswith("Traceback") and err.endswith("error: runs/x.ckpt: broken\n")


@pytest.mark.slow
@pytest.mark.parametrize("example", EXAMPLES)
def test_compiled_fit_with_checks_on(tmp_path: Path, example: str) -> None:
    """In a child process: compiling costs seconds, and dynamo's caches stay out of pytest's."""
    args = [*QUIET, *TINY[example], "--model.compile=true", "--model.compile_backend=aot_eager"]
    assert fit_summary(example, CONFIGS / f"{example}.yaml", args, tmp_path)["global_step"] > 0


@pytest.mark.slow
@pytest.mark.parametrize("example", EXAMPLES)
def test_command_line_exits_2_with_the_error_as_last_line(tmp_path: Path, example: str) -> None:
    broken = tmp_path / "notes.ckpt"
    broken.write_text("notes\n")
    args = _args(example, tmp_path / "run", f"--ckpt_path={broken}")
    status, lines = run_example(example, args, tmp_path)
    assert status == 2, "\n".join(lines[-20:])
    assert refused_line(lines).startswith(f"error: {broken}: not a readable checkpoint")


# Every trainer preset combines with every example's config (--print_config parses and
# validates without building a model), so a wrong key fails here, not on the cluster.
PRESETS = sorted((CONFIGS / "trainer").glob("*.yaml"))


def test_every_preset_is_here() -> None:
    assert {"cpu", "gpu", "ddp"} <= {path.stem for path in PRESETS}


@pytest.mark.cli
@pytest.mark.parametrize("example", EXAMPLES)
@pytest.mark.parametrize("preset", PRESETS, ids=lambda path: path.stem)
def test_preset_sets_the_trainer_and_keeps_the_example(
    capsys: pytest.CaptureFixture[str], example: str, preset: Path
) -> None:
    config = CONFIGS / f"{example}.yaml"
    args = ["fit", f"--config={config}", f"--trainer={preset}", "--print_config"]
    with pytest.raises(SystemExit) as exited:
        example_main(example)(args)
    assert exited.value.code in (None, 0)
    printed = yaml.safe_load(capsys.readouterr().out)
    trainer, ours = (yaml.safe_load(path.read_text()) for path in (preset, config))
    assert {key: printed["trainer"][key] for key in trainer} == trainer
    assert printed["trainer"]["max_epochs"] == ours["trainer"]["max_epochs"]
    assert {key: printed["model"][key] for key in ours["model"]} == ours["model"]


# The command lines hide only third-party notices a user cannot act on, only while they run.
HIDDEN = [
    (
        UserWarning,
        "Starting from v1.9.0, `tensorboardX` has been removed as a dependency of the"
        " `lightning.pytorch` package, due to potential conflicts with other packages",
    ),
    (
        FutureWarning,
        "`isinstance(treespec, LeafSpec)` is deprecated, use `isinstance(treespec, TreeSpec)"
        " and treespec.is_leaf()` instead.",
    ),
]
SHOWN = [
    (UserWarning, "The number of training batches (2) is smaller than the logging interval"),
    (DeprecationWarning, "`isinstance(treespec, LeafSpec)` is deprecated"),  # another category
    (UserWarning, "`tensorboardX` is mentioned, but this is another notice"),
]


def test_only_the_listed_warnings_are_hidden() -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with quiet_third_parties():
            for category, message in HIDDEN + SHOWN:
                warnings.warn(message, category, stacklevel=1)
        for category, message in HIDDEN:  # shown again once the context is closed
            warnings.warn(message, category, stacklevel=1)
    assert [(w.category, str(w.message)) for w in caught] == SHOWN + HIDDEN


def test_a_trainer_logs_its_records_but_not_the_cloud_tip(caplog: pytest.LogCaptureFixture) -> None:
    # Lightning's logger reaches the root only if the root had a handler when it was imported.
    lightning_log = logging.getLogger("lightning.pytorch")
    lightning_log.addHandler(caplog.handler)
    try:
        with quiet_third_parties():
            L.Trainer(accelerator="cpu", logger=False, enable_progress_bar=False)
    finally:
        lightning_log.removeHandler(caplog.handler)
    assert any(message.startswith("GPU available") for message in caplog.messages)
    assert not [message for message in caplog.messages if "Tip" in message], caplog.messages
    assert not any(logging.getLogger(name).filters for name in _TIP_SOURCES)
