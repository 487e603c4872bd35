"""The tests a generated project's docs send a reader to exist in that project.

- Every ``pytest ... -k EXPR`` command in ``README.md`` and ``docs/**/*.md`` selects at
  least one test. A test renamed without its doc would leave a command that runs nothing
  and passes.
- Every test that ``docs/shape_bugs.md`` cites as ``file.py::test_name`` or
  ``file.py::test_name[id]`` is collected. The file is relative to ``src/<package>/tests/``,
  and a short name stands for the file the page itself gives it (``catalog`` is
  ``test_shape_bug_catalog.py``). A name without ``[id]`` may be parametrized.

One child process collects once per distinct expression, and once with no ``-k``: a
process per collection would import torch and Lightning again each time.
"""

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import yaml

PYTEST_COMMAND = re.compile(r"\bpytest\b[^`\n]*")
CITED_TEST = re.compile(r"`([\w/.]+)::(test_\w+)(\[[^\]`]*\])?`")
SHORT_NAME = re.compile(r"`(\w+)` is `(test_\w+\.py)`")
COLLECT = """
import json, sys
import pytest

class Selected:
    def pytest_collection_finish(self, session):
        self.ids = [item.nodeid for item in session.items]

found = {}
for expression in json.loads(sys.argv[1]):
    selected = Selected()
    options = ["-k", expression] if expression else []
    code = pytest.main(["--collect-only", "-qq", "-p", "no:cacheprovider", *options], [selected])
    found[expression] = [int(code), getattr(selected, "ids", [])]
print(json.dumps(found))
"""


def _expressions(project: Path) -> set[str]:
    """The ``-k`` argument of every pytest command line in the README and docs pages."""
    found = set()
    for page in [project / "README.md", *(project / "docs").rglob("*.md")]:
        for command in PYTEST_COMMAND.findall(page.read_text()):
            words = shlex.split(command, comments=True)
            found.update(words[i + 1] for i, word in enumerate(words[:-1]) if word == "-k")
    return found


def _collect(project: Path, expressions: list[str]) -> dict[str, tuple[int, list[str]]]:
    """Each expression's pytest exit status and the node ids it selects ("" selects all)."""
    environment = os.environ | {"PYTHONDONTWRITEBYTECODE": "1"}
    command = [sys.executable, "-c", COLLECT, json.dumps(expressions)]
    done = subprocess.run(command, cwd=project, env=environment, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return json.loads(done.stdout.splitlines()[-1])


def _cited_tests(project: Path) -> list[tuple[str, str]]:
    """(as the page writes it, the node id it stands for) for each test shape_bugs.md cites."""
    text = (project / "docs" / "shape_bugs.md").read_text()
    files = dict(SHORT_NAME.findall(text))
    package = yaml.safe_load((project / ".copier-answers.yml").read_text())["package_name"]
    return [
        (f"{file}::{name}{case}", f"src/{package}/tests/{files.get(file, file)}::{name}{case}")
        for file, name, case in CITED_TEST.findall(text)
    ]


def test_every_test_the_docs_send_a_reader_to_exists(project: Path) -> None:
    expressions = sorted(_expressions(project))
    cited = _cited_tests(project)
    assert expressions and cited  # the patterns find something
    found = _collect(project, ["", *expressions])
    status, every = found.pop("")
    assert status == 0 and every, f"the collection failed with status {status}"
    empty = [f"-k {key!r} (status {code})" for key, (code, ids) in found.items() if not ids]
    assert not empty, f"pytest commands in the docs that select no test: {empty}"
    missing = [
        written
        for written, node in cited
        if node not in every and not any(test.startswith(f"{node}[") for test in every)
    ]
    assert not missing, f"tests docs/shape_bugs.md cites that this project lacks: {missing}"
