"""This repository's README describes the product, and its prose says nothing about how the
template was built.

The README is the front page: what and why, the quickstart, the questions and presets, what a
project holds, updating, developing. Design notes live in ``docs/``, figures in BENCHMARKS.md,
changes in CHANGELOG.md. Words about the work itself (milestones, issue numbers, where a bug
was first seen) are refused here and in those pages.
"""

import json
import re
from pathlib import Path

import pytest
from conftest import ROOT
from test_docs_paths import _link_targets

README = ROOT / "README.md"
MAX_README_LINES = 250
TEST_COMMAND = "python -m pip install nox && nox -s tests"
"""What CI runs (``.ci/run``), so it must be what the README tells a newcomer to run."""

PROSE = [README, ROOT / "CHANGELOG.md", *sorted((ROOT / "docs").glob("*.md"))]
REFUSED = [
    r"\bstop [0-9]",
    r"\bissue [0-9]",
    r"\bstops? [0-9]+ ?[–-] ?[0-9]+",
    r"\bthe seed\b",
    r"seed[’']s",
    r"seed[ _]bug",
    r"seed_rl[ _]bug",
    r"\bsession[’']s",
    r"\bthe review\b",
]
"""Case-insensitive. A word boundary lets "the seeds 0-9" and "a nox session" pass."""

HEADLINE = re.compile(r"\*\*([0-9.]+)\*\*\s*<!-- ([a-z0-9_]+): (.+?) -->")
"""A headline figure: its value in bold, then the bench and the figure's name in a comment."""


def _relative_links(page: Path) -> list[str]:
    targets = [target.split("#")[0] for target in _link_targets(page.read_text())]
    return [target for target in targets if target and "://" not in target]


def test_readme_fits_in_its_line_budget() -> None:
    lines = len(README.read_text().splitlines())
    assert lines <= MAX_README_LINES, f"README.md has {lines} lines, at most {MAX_README_LINES}"


def test_readme_gives_the_command_ci_runs() -> None:
    assert TEST_COMMAND in README.read_text()
    assert "nox -s tests" in (ROOT / ".ci" / "run").read_text()


@pytest.mark.parametrize("page", PROSE, ids=lambda page: str(page.relative_to(ROOT)))
def test_prose_says_nothing_about_how_the_template_was_built(page: Path) -> None:
    text = page.read_text()
    found = [
        f"line {text.count(chr(10), 0, match.start()) + 1}: {match.group(0)!r}"
        for pattern in REFUSED
        for match in re.finditer(pattern, text, flags=re.IGNORECASE)
    ]
    assert not found, f"{page.name}: name the thing itself, not how it was made: {found}"


def test_the_refusals_catch_what_they_are_for() -> None:
    # Each planted text is written in two pieces, so that a search of this repository for
    # the refused words finds none here.
    planted = [("Stop", " 34 measured"), ("Stops", " 33–34"), ("stops", " 28-29")]
    planted += [("issue", " 30's"), ("The seed", "'s bug"), ("the seed", " bug")]
    planted += [("test_seed", "_bug.py"), ("test_seed", "_rl_bug_x")]
    planted += [("the latest session", "'s"), ("after the re", "view")]
    for pieces in planted:
        text = "".join(pieces)
        assert any(re.search(p, text, flags=re.IGNORECASE) for p in REFUSED), text
    for text in ["the reporting seeds 1000-1009", "a nox session", "a stop of the run"]:
        assert not any(re.search(p, text, flags=re.IGNORECASE) for p in REFUSED), text


@pytest.mark.parametrize(
    "page", [README, *sorted((ROOT / "docs").glob("*.md"))], ids=lambda p: p.name
)
def test_relative_links_lead_to_files(page: Path) -> None:
    missing = [target for target in _relative_links(page) if not (page.parent / target).exists()]
    assert not missing, f"{page.name} links to missing files: {missing}"


def test_readme_links_every_design_note() -> None:
    linked = {Path(target) for target in _relative_links(README)}
    pages = {page.relative_to(ROOT) for page in (ROOT / "docs").glob("*.md")}
    assert pages, "docs/ holds the design notes"
    assert pages <= linked, f"docs pages the README does not link: {sorted(pages - linked)}"


def test_headline_figures_are_the_benchmarks_latest() -> None:
    """Each figure the README quotes is a figure of ``bench/results/``, rounded as quoted, so
    the front page cannot drift from BENCHMARKS.md, which the same results write."""
    block = README.read_text().split("<!-- headline figures -->")[1].split("<!-- /headline")[0]
    quoted = HEADLINE.findall(block)
    assert quoted, "the headline block quotes no figure"
    for value, bench, name in quoted:
        record = json.loads((ROOT / "bench" / "results" / f"{bench}.json").read_text())
        figures = {row["name"]: row["value"] for row in record["figures"]}
        assert name in figures, f"bench {bench} has no figure {name!r}: {sorted(figures)}"
        decimals = len(value.partition(".")[2])
        assert f"{figures[name]:.{decimals}f}" == value, (bench, name, figures[name], value)
