"""The audit as users run it, in a child process: exit status 1 and a report with both
planted bugs, 0 and ``[]`` for a clean script, ``-m MODULE``, a usage error as one line
with no traceback, and a normal run of the package that loads nothing of the audit."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from ..project import PACKAGE, child_environment, run_example
from .scripts import ATTENTION_MASKS, CATALOG, TWO_BUGS


@pytest.mark.slow
def test_two_planted_bugs_exit_1_and_a_clean_script_exits_0(tmp_path: Path) -> None:
    (tmp_path / "two_bugs.py").write_text(TWO_BUGS)
    (tmp_path / "clean.py").write_text(ATTENTION_MASKS)
    status, lines = run_example("audit", ["--report", "bugs.json", "two_bugs.py"], tmp_path)
    planted = [i for i, line in enumerate(TWO_BUGS.splitlines(), 1) if line.endswith("# planted")]
    report = json.loads((tmp_path / "bugs.json").read_text())
    assert status == 1 and "trained" in lines
    assert [(f["file"], f["line"]) for f in report] == [
        (str(tmp_path / "two_bugs.py"), line) for line in planted
    ]
    status, lines = run_example("audit", ["--report", "clean.json", "clean.py"], tmp_path)
    assert status == 0 and lines[-2:] == ["audit: no finding", lines[-1]]
    assert json.loads((tmp_path / "clean.json").read_text()) == []


@pytest.mark.slow
def test_module_mode_keeps_the_modules_arguments(tmp_path: Path) -> None:
    package = tmp_path / "their_trainer"
    package.mkdir()
    (package / "__init__.py").write_text("")
    script = (
        "import sys\nprint('args', sys.argv[1:])\n" + CATALOG["same-rank outer broadcast"].script()
    )
    (package / "train.py").write_text(script)
    status, lines = run_example("audit", ["-m", "their_trainer.train", "--lr", "1", "-m"], tmp_path)
    assert status == 1
    assert "args ['--lr', '1', '-m']" in lines
    assert any(line.endswith("product = column * row") for line in lines)


@pytest.mark.slow
def test_usage_error_is_one_line_and_no_traceback(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text("print('ran')\n")
    status, lines = run_example("audit", ["--max-seconds", "soon", "train.py"], tmp_path)
    assert status == 2
    assert lines == ["error: argument --max-seconds: invalid float value: 'soon'"]


@pytest.mark.slow
def test_an_unaudited_import_of_the_package_loads_nothing_of_the_audit() -> None:
    probe = f"""
import importlib, pkgutil, sys
import torch, {PACKAGE}
skipped = ("audit", "tests", "pytest_plugin")
for module in pkgutil.iter_modules({PACKAGE}.__path__):
    if module.name not in skipped:
        importlib.import_module("{PACKAGE}." + module.name)
from jaxtyping._import_hook import _JaxtypingFinder
print(sorted(name for name in sys.modules if "audit" in name))
print(len(torch.overrides._get_current_function_mode_stack()))
print(any(isinstance(finder, _JaxtypingFinder) for finder in sys.meta_path))
"""
    done = subprocess.run(
        [sys.executable, "-c", probe],
        env=child_environment(),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[:3] == ["[]", "0", "False"]
