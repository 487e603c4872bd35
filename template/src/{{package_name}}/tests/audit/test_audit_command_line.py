"""The audit as users run it, in a child process: exit status 1 and a report with both
planted bugs, and a normal run of the package that loads nothing of the audit."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from ..project import PACKAGE, child_environment, run_example
from .scripts import TWO_BUGS


@pytest.mark.slow
def test_two_planted_bugs_exit_1_with_both_in_the_report(tmp_path: Path) -> None:
    (tmp_path / "two_bugs.py").write_text(TWO_BUGS)
    status, lines = run_example("audit", ["--report", "bugs.json", "two_bugs.py"], tmp_path)
    planted = [i for i, line in enumerate(TWO_BUGS.splitlines(), 1) if line.endswith("# planted")]
    report = json.loads((tmp_path / "bugs.json").read_text())
    assert status == 1 and "trained" in lines and "audit: 2 findings" in lines
    assert [(f["file"], f["line"]) for f in report] == [
        (str(tmp_path / "two_bugs.py"), line) for line in planted
    ]


@pytest.mark.slow
def test_an_unaudited_import_of_the_package_loads_nothing_of_the_audit() -> None:
    probe = f"""
import importlib, pkgutil, sys
import torch, {PACKAGE}
skipped = ("audit", "tests", "pytest_plugin")
for module in pkgutil.iter_modules({PACKAGE}.__path__):
    if module.name not in skipped:
        importlib.import_module("{PACKAGE}." + module.name)
print(sorted(name for name in sys.modules if "audit" in name))
print(len(torch.overrides._get_current_function_mode_stack()))
print(any(type(finder).__module__.startswith("jaxtyping") for finder in sys.meta_path))
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
