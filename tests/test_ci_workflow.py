"""The generated CI tests the chosen minimum Python and the newest the template offers.

Each version appears once, and none is below the minimum, where the project could not be
installed (``requires-python`` is the minimum). On the minimum it also runs the noxfile's
``tests_floor``, whose pins are checked here without installing them.
"""

import re
import runpy
import subprocess
import sys
from pathlib import Path

import nox
import pytest
import yaml
from conftest import ROOT, preset_answers, render


@pytest.mark.parametrize(
    ("minimum", "matrix"),
    [
        ("3.10", ["3.10", "3.13"]),
        ("3.13", ["3.13"]),
    ],
)
def test_ci_matrix_is_the_minimum_and_the_newest_python(
    minimum: str, matrix: list[str], tmp_path: Path
) -> None:
    answers = preset_answers("minimal") | {"python_version": minimum}
    project = render(tmp_path / "project", answers)

    workflow = yaml.safe_load((project / ".github" / "workflows" / "ci.yml").read_text())

    assert workflow["jobs"]["check"]["strategy"]["matrix"]["python-version"] == matrix
    assert f'requires-python = ">={minimum}"' in (project / "pyproject.toml").read_text()


class RecordingSession:
    """What the noxfile's ``tests_floor`` calls on a nox session, recorded, not run."""

    posargs: list[str] = []

    def __init__(self) -> None:
        self.installed: list[str] = []
        self.ran: list[tuple[str, ...]] = []

    def install(self, *args: str) -> None:
        self.installed.extend(args)

    def run(self, *args: str) -> None:
        self.ran.append(args)

    def error(self, message: str) -> None:
        raise SystemExit(message)


def _tests_floor(project: Path, monkeypatch: pytest.MonkeyPatch) -> RecordingSession:
    monkeypatch.chdir(project)  # the noxfile reads ./pyproject.toml
    monkeypatch.setattr(nox.registry, "_REGISTRY", {})  # its sessions, registered apart
    session = RecordingSession()
    runpy.run_path(str(project / "noxfile.py"))["tests_floor"](session)
    return session


def test_the_floor_session_pins_every_dependency_at_its_floor_and_ci_runs_it_on_the_minimum(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    project = render(tmp_path / "project", preset_answers("full") | {"python_version": "3.11"})
    workflow = yaml.safe_load((project / ".github" / "workflows" / "ci.yml").read_text())
    pyproject = nox.project.load_toml(project / "pyproject.toml")

    session = _tests_floor(project, monkeypatch)

    floor_steps = [s for s in workflow["jobs"]["check"]["steps"] if "tests_floor" in str(s)]
    assert floor_steps == [{"if": "matrix.python-version == '3.11'", "run": "nox -s tests_floor"}]
    expected = []
    for line in pyproject["project"]["dependencies"]:
        name, floor = re.fullmatch(r"([\w\-\[\]]+)>=([\d.]+)", line).groups()
        expected.append(line if name == "torch" else f"{name}=={floor}")
    # The dev group's tools, for the tests themselves, resolve around the floors.
    dev = nox.project.dependency_groups(pyproject, "dev")
    assert session.installed == ["-e", ".", *expected, *dev]
    assert session.ran == [("pytest", "-m", "cli or not slow")]


def test_the_floor_session_refuses_a_dependency_without_a_floor(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    project = render(tmp_path / "project", preset_answers("minimal"))
    pyproject = project / "pyproject.toml"
    pyproject.write_text(pyproject.read_text().replace('"einops>=0.8"', '"einops"'))

    with pytest.raises(SystemExit, match="'einops' declares no floor"):
        _tests_floor(project, monkeypatch)


def test_the_floor_session_passes_on_the_regression_preset(tmp_path: Path) -> None:
    """The floors installed for real from the registry and the regression example's quick
    and cli tests run on them, at the Python running this suite (its own minimum): a
    minute or two, most of it pip's. torch is whatever PIP_CONSTRAINT pins (CI: .ci/)."""
    python = f"{sys.version_info.major}.{sys.version_info.minor}"
    if python not in yaml.safe_load((ROOT / "copier.yml").read_text())["python_version"]["choices"]:
        pytest.skip(f"Python {python} is not a minimum the template offers")
    answers = preset_answers("regression") | {"python_version": python}
    project = render(tmp_path / "project", answers)

    nox_floor = [sys.executable, "-m", "nox", "-s", "tests_floor", "--force-python", sys.executable]
    done = subprocess.run(
        [*nox_floor, "--", "-q", "-p", "no:cacheprovider"],
        cwd=project,
        capture_output=True,
        text=True,
    )

    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-3000:]
