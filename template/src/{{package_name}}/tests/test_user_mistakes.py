"""The same mistake gets the same answer in every example: one ``error:`` line, exit 2, no
traceback, nothing trained. A row per mistake, a column per example (skipped where the render has
none): the arguments after ``fit --config configs/<example>.yaml``, a module's command line
(``ppo.plot ...``), or why the example cannot make the mistake. Ranges: ``run/ranges.py``."""

import runpy
import sys
import typing
from functools import partial

import pytest

from .project import CONFIGS, PACKAGE, refusal

EXAMPLES = ("regression", "sequence", "ppo")
DDP = ["--trainer.accelerator=cpu", "--trainer.strategy=ddp", "--trainer.devices=2"]
SHORT = ["--trainer.max_epochs=1", "--trainer.limit_train_batches=2"]
"""Before each cell: a mistake that is not refused trains for seconds, not minutes."""
MISTAKES: dict[str, dict[str, list[str] | str]] = {
    "negative_learning_rate": dict.fromkeys(EXAMPLES, ["--model.learning_rate=-1"]),
    "negative_coefficient": {
        "regression": ["--model.weight_decay=-1"],
        "sequence": ["--model.weight_decay=-1"],
        "ppo": ["--model.clip_coef=-0.2"],
    },
    "fraction_out_of_range": {
        "regression": ["--data.val_fraction=1"],
        "sequence": ["--model.dropout=1"],
        "ppo": ["--model.gamma=1.5"],
    },
    "zero_width": {
        "regression": ["--model.hidden_sizes=[0]"],
        "sequence": ["--model.width=0"],
        "ppo": ["--model.hidden_sizes=[0]"],
    },
    "zero_batch_size": {
        "regression": ["--data.batch_size=0"],
        "sequence": ["--data.batch_size=0"],
        "ppo": "no data module: a minibatch is the rollout over num_minibatches, an int >= 1",
    },
    "zero_threads": dict.fromkeys(EXAMPLES, ["--model.torch_threads=0"]),
    "open_ended_run": dict.fromkeys(EXAMPLES, ["--trainer.max_epochs=-1"]),
    "missing_file": {
        "regression": ["--data.target=y", "--data.csv_path={tmp}/missing.csv"],
        "sequence": ["--data.csv_path={tmp}/missing.csv"],
        "ppo": ["ppo.plot", "{tmp}/no_run"],
    },
    "unknown_key": dict.fromkeys(EXAMPLES, ["--model.no_such_key=1"]),
    "missing_checkpoint": dict.fromkeys(EXAMPLES, ["--ckpt_path={tmp}/missing.ckpt"]),
    "batch_does_not_divide": {
        "regression": [*DDP, "--data.batch_size=3"],
        "sequence": [*DDP, "--data.batch_size=3"],
        "ppo": ["--model.num_envs=2", "--model.num_steps=16", "--model.num_minibatches=3"],
    },
}


@pytest.mark.cli
@pytest.mark.parametrize("example", EXAMPLES)
@pytest.mark.parametrize("mistake", MISTAKES)
def test_a_mistake_gets_one_line_in_every_example(
    capsys: pytest.CaptureFixture[str], monkeypatch, tmp_path, mistake: str, example: str
) -> None:
    cell = MISTAKES[mistake][example]
    main = pytest.importorskip(f"{PACKAGE}.{example}.__main__").main
    if isinstance(cell, str):
        pytest.skip(f"{example} cannot: {cell}")
    args = [arg.replace("{tmp}", str(tmp_path)) for arg in cell]
    if args[0].startswith("--"):
        config = ["--config", str(CONFIGS / f"{example}.yaml")]
        args = ["fit", *config, f"--trainer.default_root_dir={tmp_path / 'run'}", *SHORT, *args]
        command = partial(main, args)
    else:  # another command of the example, run as ``python -m`` runs it
        monkeypatch.setattr(sys, "argv", args)
        command = partial(runpy.run_module, f"{PACKAGE}.{args[0]}", run_name="__main__")
    line = refusal(capsys, command)
    option, _, value = args[-1].rpartition("=")  # the line names the option or its value
    assert option and option.rsplit(".", 1)[-1].lstrip("-") in line or value in line, line
    assert not list(tmp_path.rglob("*.ckpt"))


BUILT_IN_PYTHON = {  # example: its class, and a value outside that argument's range
    "regression": ("RegressionModule", {"hidden_sizes": (8, 0)}),
    "sequence": ("SequenceData", {"val_fraction": 1.0}),
    "ppo": ("PPOModule", {"gamma": 1.5}),
}


@pytest.mark.parametrize("example", EXAMPLES)
def test_a_class_built_in_python_names_the_argument_out_of_range(example: str) -> None:
    name, values = BUILT_IN_PYTHON[example]
    built = getattr(pytest.importorskip(f"{PACKAGE}.{example}"), name)
    with pytest.raises(ValueError, match=rf"^{name}\.__init__: {next(iter(values))}: "):
        built(**values)


UNBOUNDED = {"seed", "target_mean", "feature_mean", "solved_return"}
"""Numbers that any value suits: a seed (torch takes any int), a mean, a return to reach."""


def _plain_number(hint: object) -> bool:
    return hint in (int, float) or any(map(_plain_number, typing.get_args(hint)))


@pytest.mark.parametrize("example", EXAMPLES)
def test_every_numeric_hyperparameter_declares_its_range(example: str) -> None:
    package = pytest.importorskip(f"{PACKAGE}.{example}")
    for cls in (getattr(package, name) for name in package.__all__):
        hints = typing.get_type_hints(cls.__init__).items()
        plain = {name for name, hint in hints if _plain_number(hint)} - UNBOUNDED
        assert not plain, f"{cls.__name__}: {sorted(plain)} have no range"


HELP = {"regression": "float in (0, 1)", "sequence": "float in [0, 1)", "ppo": "float in [0, 1]"}


@pytest.mark.cli
@pytest.mark.parametrize("example", EXAMPLES)
def test_help_shows_each_range_in_numbers(capsys: pytest.CaptureFixture[str], example: str):
    main = pytest.importorskip(f"{PACKAGE}.{example}.__main__").main
    with pytest.raises(SystemExit) as exited:
        main(["fit", "--help"])
    shown = " ".join(capsys.readouterr().out.split())  # as one line: the help is wrapped
    assert exited.value.code == 0 and f"(type: {HELP[example]}, default:" in shown
