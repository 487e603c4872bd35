"""The generated README and docs/ pages name only paths that exist in the project they came with.

A reader follows these paths, so a file that moves must not leave a stale one behind. (The
README once named ``tests/test_shapes.py``, which lives in ``src/<package>/tests/``, and
drew ``trainer/`` under ``docs/``.) Each preset's project is checked against its own text,
so a path that only one example brings must be named only where that example is rendered.

What is checked, in ``README.md`` and every ``docs/**/*.md``:

- **Project paths.** A token that starts with ``src/``, ``configs/``, ``docs/``, ``tests/``
  or ``slurm/``, wherever it stands: in prose, in inline code, in a link, in a ``bash``
  block. A token preceded by a word character, ``.``, ``/``, ``-``, ``<``, ``>`` or ``*`` is
  part of a longer path or a URL and is not a path of its own, so ``runs/...``,
  ``<default_root_dir>/checkpoints/`` and URLs are never checked. A trailing ``.`` ends the
  sentence, not the path; a pytest node id's ``::test_name`` is not part of the path.
- **Placeholders.** ``<package>``, ``<package_name>`` and ``<pkg>`` stand for the package
  name from ``.copier-answers.yml``, so ``src/<pkg>/shapes.py`` is checked as
  ``src/my_project/shapes.py``. (The templates write ``src/{{ package_name }}/`` instead,
  which renders to the real name.) Any other ``<word>`` and any ``*`` is a wildcard, and the
  path must match at least one entry: ``configs/<example>.yaml``, ``tests/*/test_bad_*.py``.
- **The Layout tree.** The first fenced block after a ``Layout`` heading is a tree: two
  spaces of indent per level, one or more names, then two or more spaces and a
  description. Every name in it is checked, as the path its parents make.
- **Relative links.** ``[text](target)`` with no scheme resolves from the page's own
  folder, as a Markdown viewer resolves it.

Not checked: fenced blocks whose info string is ``text`` or ``json``. They hold example
output (an error message, a report), whose paths belong to someone else's machine.

A path exists when it is a file, or a folder that holds at least one file: Git keeps no
empty folders, so a clone of the project would not have an empty one.

The README must also link every docs/ page, and fit in 150 lines.
"""

import re
from collections.abc import Iterator
from pathlib import Path

import yaml

MAX_README_LINES = 150
PROJECT_PATH = re.compile(r"(?<![\w./<>*-])(?:src|configs|docs|tests|slurm)/[\w./<>*-]*")
PACKAGE_PLACEHOLDERS = ("<package>", "<package_name>", "<pkg>")
PLACEHOLDER = re.compile(r"<[^<>/]+>")
FENCE = re.compile(r"^\s*```\s*(\S*)")
OUTPUT_BLOCKS = {"text", "json"}
LINK = re.compile(r"\]\(([^)\s]+)\)")
INLINE_CODE = re.compile(r"`[^`]*`")
LAYOUT_HEADING = re.compile(r"^#+\s+Layout\b")


def _pages(project: Path) -> list[Path]:
    return [project / "README.md", *sorted((project / "docs").rglob("*.md"))]


def _package(project: Path) -> str:
    return yaml.safe_load((project / ".copier-answers.yml").read_text())["package_name"]


def _checked_lines(text: str) -> Iterator[str]:
    """The page's lines, less the fenced blocks of example output and the Layout tree (whose
    names are relative to their parents, and are checked as a tree)."""
    skipped = in_block = after_layout = False
    for line in text.splitlines():
        fence = FENCE.match(line)
        if fence and not in_block:
            in_block, skipped = True, fence.group(1) in OUTPUT_BLOCKS or after_layout
            after_layout = False
        elif fence:
            in_block = skipped = False
        elif LAYOUT_HEADING.match(line):
            after_layout = True
        elif not skipped:
            yield line


def _link_targets(text: str) -> Iterator[str]:
    """Targets of the page's links: outside code blocks and inline code, as Markdown reads them."""
    in_block = False
    for line in text.splitlines():
        if FENCE.match(line):
            in_block = not in_block
        elif not in_block:
            yield from LINK.findall(INLINE_CODE.sub("", line))


def _exists(project: Path, path: str) -> bool:
    """A file, or a folder holding a file; wildcards must match at least one such entry."""
    pattern = PLACEHOLDER.sub("*", path).rstrip("/")
    candidates = project.glob(pattern) if "*" in pattern else [project / pattern]
    return any(
        entry.is_file() or (entry.is_dir() and any(f.is_file() for f in entry.rglob("*")))
        for entry in candidates
    )


def _named_paths(project: Path) -> Iterator[tuple[str, str]]:
    """(page, project path) for every project path a page names outside example output."""
    package = _package(project)
    for page in _pages(project):
        for line in _checked_lines(page.read_text()):
            for match in PROJECT_PATH.finditer(line):
                path = match.group().rstrip(".")
                for placeholder in PACKAGE_PLACEHOLDERS:
                    path = path.replace(placeholder, package)
                yield page.relative_to(project).as_posix(), path


def _layout_entries(readme: str) -> list[str]:
    """The paths drawn in the README's Layout tree, each joined to its parent folders."""
    lines = readme.splitlines()
    heading = next(i for i, line in enumerate(lines) if LAYOUT_HEADING.match(line))
    start = next(i for i in range(heading + 1, len(lines)) if FENCE.match(lines[i]))
    entries: list[str] = []
    parents: list[str] = []
    for line in lines[start + 1 :]:
        if FENCE.match(line):
            return entries
        if not line.strip():
            continue
        indent = len(line) - len(line.lstrip(" "))
        assert indent % 2 == 0 and indent // 2 <= len(parents), f"misindented: {line!r}"
        parents = parents[: indent // 2]
        names = re.split(r"\s{2,}", line.strip())[0].split()
        entries.extend("".join(parents) + name for name in names)
        if names[-1].endswith("/"):
            parents.append(names[-1])
    raise AssertionError("the Layout block is not closed")


def test_every_project_path_named_in_readme_and_docs_exists(project: Path) -> None:
    named = list(_named_paths(project))
    assert any(page == "README.md" for page, _ in named)  # the pattern finds something
    missing = sorted({f"{page}: {path}" for page, path in named if not _exists(project, path)})
    assert not missing, "named but not in this project:\n" + "\n".join(missing)


def test_every_entry_of_the_layout_tree_exists(project: Path) -> None:
    entries = _layout_entries((project / "README.md").read_text())
    assert f"src/{_package(project)}/core/shapes.py" in entries
    missing = [entry for entry in entries if not _exists(project, entry)]
    assert not missing, f"the Layout tree draws entries this project lacks: {missing}"


def test_every_relative_link_resolves(project: Path) -> None:
    broken = []
    for page in _pages(project):
        for target in _link_targets(page.read_text()):
            if "://" in target or target.startswith(("#", "mailto:")):
                continue
            resolved = (page.parent / target.split("#")[0]).resolve()
            inside = resolved.is_relative_to(project.resolve())
            path = resolved.relative_to(project.resolve()).as_posix() if inside else ""
            if not (inside and _exists(project, path)):
                broken.append(f"{page.relative_to(project).as_posix()}: {target}")
    assert not broken, "links that lead nowhere:\n" + "\n".join(broken)


def test_readme_links_every_docs_page(project: Path) -> None:
    readme = (project / "README.md").read_text()
    linked = set(_link_targets(readme))
    pages = {page.relative_to(project).as_posix() for page in _pages(project)[1:]}
    assert pages <= linked, f"docs pages the README does not link: {sorted(pages - linked)}"


def test_readme_fits_in_150_lines(project: Path) -> None:
    lines = len((project / "README.md").read_text().splitlines())
    assert lines <= MAX_README_LINES, f"README.md has {lines} lines"
