"""``pytest -p <package>.pytest_plugin --broadcast-guard`` on a small suite, in a child
pytest with the package only on PYTHONPATH (no entry point, no install): a stretching test
or fixture fails at its line, a grid made at import time (by a test module, or by a module
a conftest imports) and a marked test pass, and without the option nothing is guarded.
This project's own loss, network, metric and mask tests pass under the option."""

import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from ..project import PACKAGE, PROJECT_ROOT, child_environment

SUITE = textwrap.dedent(
    """\
    import pytest
    import torch
    from grids import POSITIONS as LOADED  # made while the conftests loaded

    POSITIONS = torch.arange(5)


    def test_relative_positions():
        assert (POSITIONS[None, :] - POSITIONS[:, None]).shape == (5, 5)
        assert (LOADED[None, :] - LOADED[:, None]).shape == (5, 5)


    def test_column_target():
        prediction, target = torch.randn(4, 1), torch.randn(4)
        ((prediction - target) ** 2).mean()


    @pytest.fixture
    def stretched():
        return torch.randn(3, 1) * torch.randn(3)


    def test_uses_a_stretching_fixture(stretched):
        pass


    @pytest.mark.no_broadcast_guard
    def test_shows_the_bug_on_purpose():
        torch.randn(4, 1) - torch.randn(4)
    """
)


def _pytest(folder: Path, *options: str) -> list[str]:
    """The ``-rA`` summary lines of a child pytest run in ``folder``."""
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-rA", "-p", "no:cacheprovider", *options],
        cwd=folder,
        env=child_environment(),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    return done.stdout.splitlines()


@pytest.mark.slow
def test_broadcast_guard_option_fails_each_stretching_test_and_only_with_the_option(
    tmp_path: Path,
) -> None:
    (tmp_path / "test_suite.py").write_text(SUITE)
    (tmp_path / "grids.py").write_text("import torch\n\nPOSITIONS = torch.arange(5)\n")
    (tmp_path / "conftest.py").write_text("import grids  # noqa: F401\n")
    lines = _pytest(tmp_path, "-p", f"{PACKAGE}.pytest_plugin", "--broadcast-guard")
    assert "PASSED test_suite.py::test_relative_positions" in lines
    assert "PASSED test_suite.py::test_shows_the_bug_on_purpose" in lines
    assert any(line.startswith("FAILED test_suite.py::test_column_target") for line in lines)
    assert any(line.startswith("ERROR test_suite.py::test_uses_a_stretching_") for line in lines)
    stretching = "    ((prediction - target) ** 2).mean()"
    at = f"test_suite.py:{SUITE.splitlines().index(stretching) + 1}: {stretching.strip()}"
    assert any(line.endswith(at) for line in lines)
    assert _pytest(tmp_path, "-p", f"{PACKAGE}.pytest_plugin")[-1].startswith("4 passed")


OWN_TESTS = [
    "test_losses.py",
    "test_nets.py",
    "test_broadcast_guard.py",
    "test_masks.py",
    "test_behaviour.py",
    "sequence/test_sequence.py::test_a_long_table_fits_in_bf16_resumes_and_predicts_one_row_a_sequence",
]
"""The tests of this project's typed functions, masks and attention, and of the guard's
mask rule, and a whole fit of the sequence example where it is rendered: with the option,
each of them runs under a second guard, the plugin's, which raises no false alarm on them."""


@pytest.mark.slow
def test_this_projects_own_tests_pass_under_the_option() -> None:
    here = Path(__file__).parents[1]
    tests = [str(here / name) for name in OWN_TESTS if (here / name.split("::")[0]).is_file()]
    lines = _pytest(PROJECT_ROOT, "-p", f"{PACKAGE}.pytest_plugin", "--broadcast-guard", *tests)
    summary = lines[-1] if lines else ""
    assert re.match(r"=* ?\d+ passed", summary), lines[-30:]
    assert "failed" not in summary and "error" not in summary, lines[-30:]
