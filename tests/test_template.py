"""The template renders every preset into a clean, typed, passing project."""

import ast
import os
import re
import subprocess
import sys
from pathlib import Path

import nox
import pytest
from conftest import ROOT, render
from test_preset_files import FEATURES

QUICK = "not slow and not cli"
"""The generated projects' quick suite: no child process, no command line in-process."""

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
    """The whole suite where every feature is on (the ``full`` preset: DDP, SLURM, sweeps,
    the R² test), on two workers; the quick suite elsewhere, whose slow tests ``full`` runs
    too. The whole suite is most of this session's work: run in one process, it would be
    the last to finish by minutes."""
    answers = (project / ".copier-answers.yml").read_text()
    every = all(f"{feature}: true" in answers for feature in FEATURES)
    selected = ["-n", "2"] if every else ["-m", QUICK]
    done = _run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *selected],
        project,
        timeout=1800,
    )
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-3000:]


@pytest.fixture(scope="session", params=list(FEATURES))
def feature_project(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Path:
    """The default project with one optional feature on."""
    return render(tmp_path_factory.mktemp(request.param) / "project", {request.param: True})


def test_a_feature_alone_passes_lint_and_the_quick_suite(feature_project: Path) -> None:
    for command in (
        [sys.executable, "-m", "ruff", "check", "."],
        [sys.executable, "-m", "ruff", "format", "--check", "."],
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", QUICK],
    ):
        done = _run(command, feature_project)
        assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-3000:]


DISTRIBUTION = {"yaml": "pyyaml"}
"""Import names that differ from the distribution that provides them."""


def _declared(project: Path) -> tuple[set[str], set[str]]:
    """The distributions a project declares: for its modules (dependencies and extras),
    and for its tests and tools (those and the dev group)."""
    pyproject = nox.project.load_toml(project / "pyproject.toml")
    extras = pyproject["project"].get("optional-dependencies", {})
    dev = nox.project.dependency_groups(pyproject, "dev")

    def names(requirements: list[str]) -> set[str]:
        return {re.split(r"[\[<>=!~; ]", r, maxsplit=1)[0].lower() for r in requirements}

    runtime = names(pyproject["project"]["dependencies"]).union(*map(names, extras.values()))
    return runtime, runtime | names(dev)


def _import_problems(project: Path) -> list[str]:
    """Relative imports of a module the render lacks, and third-party imports that the
    render's pyproject.toml does not declare (a test's may be in the dev group)."""
    runtime, for_tests = _declared(project)
    own = {path.name for path in (project / "src").iterdir()}
    problems = []
    for path in sorted(project.rglob("*.py")):
        name = path.relative_to(project).as_posix()
        test_time = "/tests/" in name or name in ("noxfile.py",) or path.stem == "pytest_plugin"
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level:
                base = path.parent
                for _ in range(node.level - 1):
                    base = base.parent
                if node.module:
                    target = base.joinpath(*node.module.split("."))
                    files = (target.with_suffix(".py"), target / "__init__.py")
                    found = any(file.is_file() for file in files)
                else:  # "from . import x": each x a module of the package or a name in __init__
                    init = (base / "__init__.py").read_text()
                    found = all(
                        (base / f"{alias.name}.py").is_file()
                        or (base / alias.name / "__init__.py").is_file()
                        or re.search(rf"\b{alias.name}\b", init)
                        for alias in node.names
                    )
                if not found:
                    names = ", ".join(alias.name for alias in node.names)
                    missing = "." * node.level + (node.module or f" import {names}")
                    problems.append(f"{name}:{node.lineno}: no module {missing}")
                continue
            if isinstance(node, ast.Import):
                modules = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                modules = [node.module]
            else:
                continue
            for module in modules:
                top = module.split(".")[0]
                beside = (path.parent / f"{top}.py").is_file()  # a script's sibling module
                if top in sys.stdlib_module_names or top in own or beside:
                    continue
                distribution = DISTRIBUTION.get(top, top).lower()
                if distribution not in (for_tests if test_time else runtime):
                    problems.append(f"{name}:{node.lineno}: {top} is not declared")
    return problems


def test_every_import_of_a_preset_resolves_and_is_declared(project: Path) -> None:
    assert _import_problems(project) == []


def test_every_import_of_a_feature_alone_resolves_and_is_declared(feature_project: Path) -> None:
    assert _import_problems(feature_project) == []


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
    assert (project / "src" / "shape_safe_rl" / "core" / "losses.py").is_file()


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
    assert not (without / "src" / "my_project" / "core" / "policy_gradient.py").exists()
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
    assert (project / "src" / "my_project" / "core" / "losses.py").is_file()


@pytest.mark.parametrize(
    ("data", "refused"),
    [
        (
            {
                "include_regression": False,
                "include_ppo": False,
                "include_sequence": False,
                "include_sweeps": True,
            },
            "sweeps",
        ),
        (
            {
                "include_regression": False,
                "include_ppo": False,
                "include_sequence": False,
                "include_cluster": True,
            },
            "cluster",
        ),
        (
            {
                "include_regression": False,
                "include_ppo": False,
                "include_sequence": False,
                "include_trackers": True,
            },
            "trackers",
        ),
        ({"include_ppo": False, "include_video": True}, "include_video needs include_ppo"),
    ],
)
def test_a_feature_without_what_it_needs_is_refused_and_nothing_written(
    tmp_path: Path, data: dict[str, bool], refused: str
) -> None:
    destination = tmp_path / "out"
    pairs = [arg for key, value in data.items() for arg in ("--data", f"{key}={value}")]
    command = [sys.executable, "-m", "copier", "copy", "--defaults", "--vcs-ref=HEAD", *pairs]
    done = _run([*command, str(ROOT), str(destination)], tmp_path)
    assert done.returncode != 0
    assert refused in done.stdout + done.stderr
    assert not destination.exists() or not any(destination.iterdir())
