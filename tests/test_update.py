"""`copier update` moves a project from one template tag to the next and keeps its edits.

A clone of the committed snapshot of this checkout (uncommitted changes included) is
tagged v1; the template then changes and is tagged v2. A project rendered from v1 and
edited by its user is updated to v2: the template's changes arrive, the user's edits stay,
and where both changed the same line the file shows both, as Git-style markers (Copier's
default), or takes the template's line and leaves the user's in a ``.rej`` file.

A project rendered from the last commit before the optional features, updated with the
command that ``_message_before_update`` names, keeps every feature and ends byte for byte
as a fresh render of the new template with the same answers.
"""

from pathlib import Path
from typing import Literal

import copier
import pytest
import yaml
from conftest import ROOT, commit_all, git
from test_preset_files import FEATURES, expected

DATA = {"include_regression": False, "include_ppo": False}  # the quickest render
V2_SECTION = "## Changes in template v2"


def _append(path: Path, text: str) -> None:
    path.write_text(path.read_text() + text)


def _replace_title(path: Path, line: str) -> None:
    """Replace the first Markdown title line (the template's README may open with Jinja)."""
    lines = path.read_text().split("\n")
    index = next(number for number, text in enumerate(lines) if text.startswith("# "))
    path.write_text("\n".join([*lines[:index], line, *lines[index + 1 :]]))


@pytest.fixture(scope="module")
def template_repo(template_snapshot: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """This repository's files at tag v1, then a changed template at tag v2."""
    repo = tmp_path_factory.mktemp("template") / "repo"
    git(template_snapshot, "clone", "-q", str(template_snapshot), str(repo))
    git(repo, "tag", "v1")

    readme = repo / "template" / "README.md.jinja"
    _replace_title(readme, "# {{ project_name }}, from template v2")
    _append(readme, f"\n{V2_SECTION}\n\nA section that v1 did not have.\n")
    (repo / "template" / "CHANGELOG.md").write_text("# Changelog\n\n- v2: a changelog.\n")
    commit_all(repo, "template v2")
    git(repo, "tag", "v2")
    return repo


def _project_from_v1(template_repo: Path, destination: Path) -> Path:
    copier.run_copy(
        str(template_repo), destination, data=DATA, defaults=True, vcs_ref="v1", quiet=True
    )
    git(destination, "init", "-q")
    commit_all(destination, "project from template v1")
    return destination


def _update_to_v2(project: Path, conflict: Literal["inline", "rej"] = "inline") -> None:
    copier.run_update(
        project,
        vcs_ref="v2",
        defaults=True,
        overwrite=True,
        unsafe=False,
        quiet=True,
        conflict=conflict,
    )


def test_update_brings_template_changes_and_keeps_user_edits(
    template_repo: Path, tmp_path: Path
) -> None:
    project = _project_from_v1(template_repo, tmp_path / "project")
    _append(project / ".gitignore", "my-data/\n")
    (project / "src" / "my_project" / "my_loss.py").write_text('"""The user\'s own."""\n')
    commit_all(project, "user edits")

    _update_to_v2(project)

    readme = (project / "README.md").read_text()
    assert readme.startswith("# My Project, from template v2\n")
    assert V2_SECTION in readme
    assert (project / "CHANGELOG.md").is_file()
    assert (project / ".gitignore").read_text().endswith("lightning_logs/\nmy-data/\n")
    assert (project / "src" / "my_project" / "my_loss.py").is_file()
    assert "_commit: v2" in (project / ".copier-answers.yml").read_text()
    assert git(project, "ls-files", "--unmerged") == ""


def test_conflicting_line_is_marked_inline_and_unmerged(
    template_repo: Path, tmp_path: Path
) -> None:
    project = _project_from_v1(template_repo, tmp_path / "project")
    _replace_title(project / "README.md", "# My Project, the user's title")
    commit_all(project, "user edits the title")

    _update_to_v2(project)

    readme = (project / "README.md").read_text()
    expected = (
        "<<<<<<< before updating\n# My Project, the user's title\n=======\n"
        "# My Project, from template v2\n>>>>>>> after updating\n"
    )
    assert readme.startswith(expected), readme[:300]
    assert V2_SECTION in readme  # the lines nobody else changed merge cleanly
    assert "README.md" in git(project, "diff", "--name-only", "--diff-filter=U")


def test_conflicting_line_goes_to_a_rej_file_on_request(
    template_repo: Path, tmp_path: Path
) -> None:
    project = _project_from_v1(template_repo, tmp_path / "project")
    _replace_title(project / "README.md", "# My Project, the user's title")
    commit_all(project, "user edits the title")

    _update_to_v2(project, conflict="rej")

    # The file takes the template's line; the user's change that did not apply waits in
    # README.md.rej, as a hunk to apply by hand.
    assert (project / "README.md").read_text().startswith("# My Project, from template v2\n")
    assert "+# My Project, the user's title" in (project / "README.md.rej").read_text()


BEFORE_FEATURES = "9920b67"
"""The last commit of main before the optional features: its projects have all of them."""
KEEP_EVERY_FEATURE = {feature: True for feature in FEATURES}


@pytest.fixture(scope="module")
def history_repo(template_snapshot: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A clone of this repository with ``BEFORE_FEATURES`` tagged v1, and this checkout's
    working tree (the snapshot) committed on top and tagged v2."""
    repo = tmp_path_factory.mktemp("history") / "repo"
    git(ROOT, "cat-file", "-e", f"{BEFORE_FEATURES}^{{commit}}")  # a shallow clone lacks it
    git(ROOT.parent, "clone", "-q", "--no-checkout", str(ROOT), str(repo))
    git(repo, "tag", "v1", BEFORE_FEATURES)
    git(repo, "fetch", "-q", str(template_snapshot), "HEAD")
    git(repo, "tag", "v2", "FETCH_HEAD")
    return repo


def test_a_project_from_before_the_features_keeps_every_one(
    history_repo: Path, tmp_path: Path
) -> None:
    project = tmp_path / "project"
    copier.run_copy(str(history_repo), project, defaults=True, vcs_ref="v1", quiet=True)
    git(project, "init", "-q")
    commit_all(project, "project from the template before its optional features")

    copier.run_update(
        project,
        data=KEEP_EVERY_FEATURE,
        vcs_ref="v2",
        defaults=True,
        overwrite=True,
        unsafe=False,
        quiet=True,
    )

    assert git(project, "ls-files", "--unmerged") == ""
    rendered = _files(project)
    assert set(rendered) == set(expected({"include_regression": True, **KEEP_EVERY_FEATURE}))
    # Byte for byte what a fresh render of v2 with the same answers holds: the full
    # preset's whole suite then covers the updated project, with no second run here.
    answers = yaml.safe_load((project / ".copier-answers.yml").read_text())
    fresh = tmp_path / "fresh"
    data = {key: value for key, value in answers.items() if not key.startswith("_")}
    copier.run_copy(str(history_repo), fresh, data=data, defaults=True, vcs_ref="v2", quiet=True)
    expected_files = _files(fresh)
    differing = sorted(
        name
        for name in expected_files.keys() | rendered.keys()
        if rendered.get(name) != expected_files.get(name)
    )
    assert differing == [], f"the update left these unlike a fresh render: {differing}"


def _files(project: Path) -> dict[str, bytes]:
    """Each file of ``project`` outside ``.git``, by its path relative to the project."""
    paths = (path for path in project.rglob("*") if path.is_file() and ".git" not in path.parts)
    return {path.relative_to(project).as_posix(): path.read_bytes() for path in paths}
