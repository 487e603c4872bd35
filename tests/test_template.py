"""The template renders every preset into a clean, typed, passing project."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT, render

JINJA_LEFT = re.compile(r"{{|{%|{#|%}|#}")
GITHUB_EXPRESSION = re.compile(r"\$\{\{.*?\}\}")


def _files(project: Path) -> list[Path]:
    return [path for path in project.rglob("*") if path.is_file() and ".git" not in path.parts]


def _run(command: list[str], cwd: Path, timeout: float = 600) -> subprocess.CompletedProcess:
    environment = os.environ | {"PYTHONDONTWRITEBYTECODE": "1"}
    return subprocess.run(
        command, cwd=cwd, env=environment, capture_output=True, text=True, timeout=timeout
    )


def test_template_python_files_are_plain() -> None:
    assert not list((ROOT / "template").rglob("*.py.jinja"))


def test_template_python_files_import_the_package_relatively() -> None:
    for path in (ROOT / "template" / "src").rglob("*.py"):
        assert "package_name" not in path.read_text(), path


def test_no_jinja_left_in_rendered_files(project: Path) -> None:
    for path in _files(project):
        assert not JINJA_LEFT.search(str(path.relative_to(project))), path
        content = path.read_bytes()
        if b"\0" in content:  # a binary file (the learning-curve PNG) is copied, not rendered
            continue
        text = GITHUB_EXPRESSION.sub("", content.decode())
        assert not JINJA_LEFT.search(text), f"{path}: {JINJA_LEFT.search(text)}"


def test_answers_file_records_the_answers(project: Path) -> None:
    answers = (project / ".copier-answers.yml").read_text()
    assert "_src_path" in answers and "package_name: my_project" in answers


def test_ruff_is_clean(project: Path) -> None:
    done = _run([sys.executable, "-m", "ruff", "check", "."], project)
    assert done.returncode == 0, done.stdout + done.stderr


def test_pyright_basic_is_clean(project: Path) -> None:
    done = _run(["pyright", "--pythonpath", sys.executable, "."], project)
    assert done.returncode == 0, done.stdout + done.stderr


def test_project_suite_passes(project: Path) -> None:
    done = _run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"], project)
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-3000:]


@pytest.mark.parametrize(
    ("package_name", "reason"),
    [
        ("class", "keyword"),
        ("torch", "shadow"),
        ("lightning", "shadow"),
        ("test", "shadow"),
        ("my-project", "not a valid Python identifier"),
        ("2fast", "not a valid Python identifier"),
    ],
)
def test_bad_package_name_is_refused_and_nothing_written(
    tmp_path: Path, package_name: str, reason: str
) -> None:
    destination = tmp_path / "out"
    done = _run(
        [
            sys.executable,
            "-m",
            "copier",
            "copy",
            "--defaults",
            "--vcs-ref=HEAD",
            "--data",
            f"package_name={package_name}",
            str(ROOT),
            str(destination),
        ],
        tmp_path,
    )
    assert done.returncode != 0
    assert reason in done.stdout + done.stderr
    assert not destination.exists() or not any(destination.iterdir())


def test_package_name_follows_project_name(tmp_path: Path) -> None:
    project = render(
        tmp_path / "p", {"project_name": "Shape Safe RL!", "include_regression": False}
    )
    assert (project / "src" / "shape_safe_rl" / "losses.py").is_file()


def test_license_none_writes_no_license(tmp_path: Path) -> None:
    project = render(tmp_path / "p", {"license": "none", "include_regression": False})
    assert not (project / "LICENSE").exists()
    assert "license" not in (project / "pyproject.toml").read_text().lower().split("[tool")[0]


def test_apache_license_is_rendered(tmp_path: Path) -> None:
    project = render(tmp_path / "p", {"license": "Apache-2.0", "include_regression": False})
    assert "Apache License" in (project / "LICENSE").read_text()


def test_gymnasium_is_a_dependency_only_with_ppo(tmp_path: Path) -> None:
    with_ppo = render(tmp_path / "a", {"include_regression": False, "include_ppo": True})
    without = render(tmp_path / "b", {"include_regression": True, "include_ppo": False})
    assert "gymnasium" in (with_ppo / "pyproject.toml").read_text()
    assert "gymnasium" not in (without / "pyproject.toml").read_text()
    assert not (without / "src" / "my_project" / "ppo").exists()
    assert not (without / "src" / "my_project" / "policy_gradient.py").exists()
    assert not (without / "configs" / "ppo.yaml").exists()


def test_copier_update_runs_on_a_rendered_project(template_snapshot: Path, tmp_path: Path) -> None:
    project = render(
        tmp_path / "p", {"include_regression": False, "include_ppo": False}, template_snapshot
    )
    for command in (
        ["git", "init", "-q"],
        ["git", "add", "-A"],
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "init"],
    ):
        assert _run(command, project).returncode == 0
    done = _run(
        [
            sys.executable,
            "-m",
            "copier",
            "update",
            "--defaults",
            "--vcs-ref=HEAD",
            "--skip-answered",
        ],
        project,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert (project / "src" / "my_project" / "losses.py").is_file()
