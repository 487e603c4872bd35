"""CHANGELOG.md keeps up with copier.yml's questions.

Every entry (a ``## `` section, newest first) records the question set it left behind, one
short hash per question, in an HTML comment::

    <!-- questions: author_email=1a2b3c4d author_name=... -->

The top entry's record must be copier.yml's questions as they are now. So a change to a
question's name, type, default or choices fails here until the top entry records it. Each
question that differs from the entry below must also be named in the entry that changed it,
with the ``copier update`` command a project needs. A hash per question, rather than one for
the whole set, is what lets this test say which question changed and require the entry to
name it.
"""

import hashlib
import json
import re

import pytest
import yaml
from conftest import ROOT

CHANGELOG = ROOT / "CHANGELOG.md"
RECORD = re.compile(r"<!-- questions:(.*?)-->", re.DOTALL)
HEADING = re.compile(r"^## (\[Unreleased\]|[0-9a-f]{7,40} - \d{4}-\d{2}-\d{2}.*)$")
FIELDS = ("type", "default", "choices")
"""What a project's answers depend on; a question's help text and validator are not."""


def questions(copier_yml: str) -> dict[str, str]:
    """Each question of a ``copier.yml`` text (its keys without a leading underscore), with
    the first 8 hex digits of the sha256 of its type, default and choices."""
    settings = yaml.safe_load(copier_yml)
    return {
        name: hashlib.sha256(
            json.dumps({field: spec.get(field) for field in FIELDS}, sort_keys=True).encode()
        ).hexdigest()[:8]
        for name, spec in sorted(settings.items())
        if not name.startswith("_")
    }


def record(hashes: dict[str, str]) -> str:
    """The comment an entry holds for ``hashes``, wrapped to stay under 100 columns."""
    lines, line = [], "<!-- questions:"
    for word in (f"{name}={digest}" for name, digest in hashes.items()):
        if len(line) + len(word) + 1 > 92:
            lines.append(line)
            line = "    "
        line += f" {word}"
    return "\n".join([*lines, line + " -->"])


def entries(text: str) -> list[tuple[str, str]]:
    """``(heading, body)`` of each ``## `` section, in file order (newest first)."""
    parts = re.split(r"^(## .*)$", text, flags=re.MULTILINE)
    return list(zip(parts[1::2], parts[2::2], strict=True))


def recorded(body: str) -> dict[str, str]:
    (found,) = RECORD.findall(body)
    return dict(word.split("=", 1) for word in found.split())


def _differing(newer: dict[str, str], older: dict[str, str]) -> list[str]:
    return sorted(
        name for name in newer.keys() | older.keys() if newer.get(name) != older.get(name)
    )


def test_the_changelog_is_newest_first_with_unreleased_on_top() -> None:
    text = CHANGELOG.read_text()
    assert text.startswith("# Changelog\n")
    headings = [heading for heading, _ in entries(text)]
    assert headings[0] == "## [Unreleased]", headings[:1]
    for heading in headings:
        assert HEADING.match(heading), f"{heading!r}: '## [Unreleased]' or '## REF - YYYY-MM-DD'"
    dates = [re.search(r"\d{4}-\d{2}-\d{2}", heading) for heading in headings[1:]]
    assert [d.group(0) for d in dates] == sorted((d.group(0) for d in dates), reverse=True)


def test_every_entry_records_its_question_set_once() -> None:
    for heading, body in entries(CHANGELOG.read_text()):
        assert len(RECORD.findall(body)) == 1, f"{heading}: one '<!-- questions: ... -->'"


def test_the_top_entry_records_the_questions_of_copier_yml() -> None:
    now = questions((ROOT / "copier.yml").read_text())
    heading, body = entries(CHANGELOG.read_text())[0]
    changed = _differing(now, recorded(body))
    assert not changed, (
        f"copier.yml's questions changed ({', '.join(changed)}): add an entry under "
        f"{heading} in CHANGELOG.md that names each of them and says which `copier update` "
        f"command a project needs, and replace that entry's record with:\n{record(now)}"
    )


def test_each_entry_names_the_questions_it_changed() -> None:
    sections = entries(CHANGELOG.read_text())
    for (heading, body), (_, older) in zip(sections, sections[1:], strict=False):
        changed = _differing(recorded(body), recorded(older))
        prose = RECORD.sub("", body)
        unnamed = [name for name in changed if f"`{name}" not in prose]
        assert not unnamed, f"{heading}: changes the questions {unnamed} without naming them"
        assert not changed or "copier update" in prose, f"{heading}: no `copier update` command"


def test_a_changed_default_or_a_new_question_changes_the_record() -> None:
    base = "project_name:\n  type: str\n  default: My Project\n_subdirectory: template\n"
    hashes = questions(base)
    assert list(hashes) == ["project_name"]  # settings (leading underscore) are not questions
    assert questions(base.replace("My Project", "Other")) != hashes
    assert questions(base + "include_x:\n  type: bool\n  default: false\n").keys() > hashes.keys()
    assert questions(base.replace("type: str\n", "type: str\n  help: reworded\n")) == hashes


@pytest.mark.parametrize(
    "hashes", [{"a": "00000000"}, {f"include_{i}": "0" * 8 for i in range(20)}]
)
def test_a_record_reads_back_as_written(hashes: dict[str, str]) -> None:
    written = record(hashes)
    assert all(len(line) <= 100 for line in written.splitlines())
    assert recorded(written) == hashes
