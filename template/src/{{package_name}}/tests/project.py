"""The project as the tests see it: its files, its examples, how a test runs an example's
command line (in this process, or in a child one, which gives the real exit status and keeps
a long or compiled fit's state out of pytest's: a test that starts one is ``slow``), and what
every test of a user's mistake checks. ``PACKAGE`` comes from this module's dotted name."""

import importlib
import importlib.util
import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import lightning as L
import pytest

PACKAGE = __name__.split(".")[0]
SOURCE_ROOT = Path(__file__).resolve().parents[2]  # holds the package: put it on PYTHONPATH
PROJECT_ROOT = SOURCE_ROOT.parent
CONFIGS = PROJECT_ROOT / "configs"
DOCS = PROJECT_ROOT / "docs"
EXAMPLES = [
    name
    for name in ("regression", "ppo", "sequence")
    if importlib.util.find_spec(f"{PACKAGE}.{name}")
]
QUIET = ["--trainer.enable_progress_bar=false", "--trainer.enable_model_summary=false"]


def quiet_trainer(**options: Any) -> L.Trainer:
    """A trainer that logs nothing and prints no progress bar or model summary."""
    return L.Trainer(logger=False, enable_progress_bar=False, enable_model_summary=False, **options)


def example_main(example: str) -> Callable[..., Any]:
    """The ``main`` of ``python -m <package>.<example>``, to run in this process (``cli``)."""
    return importlib.import_module(f"{PACKAGE}.{example}.__main__").main


def child_environment(extra: dict[str, str] | None = None) -> dict[str, str]:
    """What every child Python gets: this environment plus ``extra``, this source tree first."""
    path = os.pathsep.join(filter(None, [str(SOURCE_ROOT), os.environ.get("PYTHONPATH")]))
    return {**os.environ, "PYTHONPATH": path, **(extra or {})}


def run_example(example: str, args: list[str], cwd: Path) -> tuple[int, list[str]]:
    """Exit status and non-empty output lines (stdout and stderr together) of
    ``python -m <package>.<example> ARGS``."""
    done = subprocess.run(
        [sys.executable, "-m", f"{PACKAGE}.{example}", *args],
        cwd=cwd,
        env=child_environment(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=300,
    )
    return done.returncode, [line for line in done.stdout.splitlines() if line.strip()]


NOTICES = ("tensorboardX", "LeafSpec", "litlogger")
"""Words of the third-party notices the command lines hide (``run.cli.quiet_third_parties``)."""


def fit_summary(example: str, config: Path, args: list[str], root: Path) -> dict:
    """``summary.json`` of ``python -m <package>.<example> fit --config CONFIG ARGS`` under
    ``root``; a run that exits non-zero, or prints one of the ``NOTICES``, fails."""
    command = ["fit", "--config", str(config), f"--trainer.default_root_dir={root}", *args]
    returncode, lines = run_example(example, command, root)
    assert returncode == 0, "\n".join(lines[-30:])
    noise = [line for line in lines if any(word in line for word in NOTICES)]
    assert not noise, "\n".join(noise)
    (path,) = root.rglob("summary.json")
    return json.loads(path.read_text())


def refusal(capsys: pytest.CaptureFixture[str], run: Callable[[], object]) -> str:
    """The ``error:`` line of ``run()``, a command line called in this process that must exit
    with status 2 after that one line (``run.errors.user_errors``), with no traceback."""
    capsys.readouterr()
    with pytest.raises(SystemExit) as exited:
        run()
    err = capsys.readouterr().err
    assert exited.value.code == 2, err
    return refused_line(err.splitlines())


def refused_line(lines: list[str]) -> str:
    """The last of a refused command's ``lines``, checked: ``error: ...``, no traceback."""
    assert not any(line.startswith("Traceback") for line in lines), "\n".join(lines[-30:])
    last = [line for line in lines if line.strip()][-1]
    assert last.startswith("error: "), "\n".join(lines[-30:])
    return last
