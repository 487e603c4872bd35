"""Render each preset once per session; tests share the rendered projects.

Update tests render from ``template_snapshot``, a committed copy of the working tree, not
from this checkout: see its docstring.
"""

import os
import shutil
import subprocess
from pathlib import Path

import copier
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
PRESETS = sorted(path.stem for path in (ROOT / "configs").glob("*.yml"))
GIT = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false"]


def pytest_configure(config: pytest.Config) -> None:
    """One intra-op thread in every test process, its xdist workers and every suite or
    command line it starts: torch's default of every core, on cores that two suites share,
    slows a small fit many times over."""
    os.environ["OMP_NUM_THREADS"] = "1"


def git(cwd: Path, *args: str) -> str:
    """Run git in ``cwd`` with a throwaway identity; fail the test on a non-zero exit."""
    done = subprocess.run([*GIT, *args], cwd=cwd, capture_output=True, text=True)
    assert done.returncode == 0, f"git {args}: {done.stderr}"
    return done.stdout


def commit_all(repo: Path, message: str) -> None:
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", message)


def render(destination: Path, data: dict[str, object], template: Path = ROOT) -> Path:
    """Render ``template`` at HEAD (plus uncommitted changes) with ``data``, no prompts."""
    copier.run_copy(
        str(template),
        destination,
        data=data,
        defaults=True,
        vcs_ref="HEAD",
        quiet=True,
        unsafe=False,
    )
    return destination


def preset_answers(preset: str) -> dict[str, object]:
    return yaml.safe_load((ROOT / "configs" / f"{preset}.yml").read_text()) or {}


@pytest.fixture(scope="session")
def template_snapshot(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A throwaway repository whose one commit is this checkout's working tree.

    It holds what ``git`` would commit after ``git add -A``: tracked files as edited,
    untracked files that are not ignored, without the tracked files deleted. Copier writes
    the template's commit into a project's answers file and ``copier update`` checks that
    commit out again. Rendered from a dirty checkout, that commit exists only in Copier's
    temporary clone, and the update fails with "Unknown revision"; every commit of the
    snapshot stays where the update looks for it. Tests that change the template further
    clone the snapshot first, as it is shared by the session.
    """
    repo = tmp_path_factory.mktemp("template") / "snapshot"
    listed = git(ROOT, "ls-files", "--cached", "--others", "--exclude-standard", "-z")
    for name in filter(None, listed.split("\0")):
        if (ROOT / name).is_file():  # a tracked file deleted in the working tree is left out
            (repo / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, repo / name)
    git(repo, "init", "-q")
    commit_all(repo, "snapshot of the template's working tree")
    return repo


@pytest.fixture(scope="session", params=PRESETS)
def project(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return render(tmp_path_factory.mktemp(request.param) / "project", preset_answers(request.param))
