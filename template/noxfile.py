"""Sessions for this project: ``nox -s tests``, ``nox -s lint``, ``nox -s typecheck``, and,
not run by default, ``nox -s stress`` (every multi-process test, 20 rounds in a row) and
``nox -s tests_floor`` (the quick and ``cli`` tests at the lowest versions declared).

``nox -s tests -- -m "not slow and not cli"`` is the quick run. It leaves out the tests
that start a child process (``slow``: command lines, DDP, async envs, compiled fits) and
those that build a LightningCLI command line in this process (``cli``), which take most of
the full suite's time; the tests' conftest fails an unmarked test that starts a process.
Anything after ``--`` goes to pytest: ``nox -s tests -- -k ppo -x``.

Where uv is installed, nox makes its environments with uv, and a committed ``uv.lock`` is
what they install (``uv sync --locked``); otherwise pip installs the project and its
``dev`` dependency group from the ranges in ``pyproject.toml``.
"""

from pathlib import Path
from xml.etree import ElementTree

import nox
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.version import Version

nox.options.sessions = ["lint", "typecheck", "tests"]
nox.options.reuse_existing_virtualenvs = True
nox.options.default_venv_backend = "uv|virtualenv"
PYPROJECT = nox.project.load_toml("pyproject.toml")

MULTI_PROCESS = "ddp or slurm or torchrun"
"""The tests that start more than one process: their names (or their files') say how."""


def install(session: nox.Session) -> None:
    """The project (editable) and its dev group: from the lock where uv has one to follow."""
    if session.venv_backend == "uv" and Path("uv.lock").is_file():
        location = str(session.virtualenv.location)
        session.run_install("uv", "sync", "--locked", env={"UV_PROJECT_ENVIRONMENT": location})
    else:
        session.install("-e", ".", *nox.project.dependency_groups(PYPROJECT, "dev"))


@nox.session
def tests(session: nox.Session) -> None:
    install(session)
    session.run("pytest", *session.posargs)


@nox.session(python=PYPROJECT["project"]["requires-python"].removeprefix(">="))
def tests_floor(session: nox.Session) -> None:
    """The quick and ``cli`` tests with every dependency at its floor (``>=X`` installed as
    ``==X``), as a resolver that picks the oldest versions allowed (``uv pip install
    --resolution lowest-direct``) installs them. It runs on the minimum Python, which every
    floor has wheels for. torch keeps its range: the CPU build that the machine's index or
    constraints give. The dev group's tools resolve around the floors; no lock is used."""
    pinned = []
    for line in PYPROJECT["project"]["dependencies"]:
        requirement = Requirement(line)
        floors = [spec.version for spec in requirement.specifier if spec.operator == ">="]
        if not floors:
            session.error(f"{line!r} declares no floor (>=) to test")
        if requirement.name != "torch":
            requirement.specifier = SpecifierSet(f"=={max(floors, key=Version)}")
        pinned.append(str(requirement))
    session.install("-e", ".", *pinned, *nox.project.dependency_groups(PYPROJECT, "dev"))
    session.run("pytest", "-m", "cli or not slow", *session.posargs)


@nox.session
def lint(session: nox.Session) -> None:
    session.install("ruff")
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")


@nox.session
def typecheck(session: nox.Session) -> None:
    install(session)
    session.run("pyright")


@nox.session
def stress(session: nox.Session) -> None:
    """Run the multi-process tests round after round (``nox -s stress -- 5``: 5 rounds) and
    count the failures. A rare one, such as gloo aborting a process at exit, shows up as a
    count and the failing tests' names; nothing is retried."""
    install(session)
    rounds = int(session.posargs[0]) if session.posargs else 20
    reports = Path(session.create_tmp())
    failed: list[str] = []
    total = 0
    for round_number in range(1, rounds + 1):
        report = reports / f"round{round_number}.xml"
        session.run(
            *("pytest", "-m", "slow", "-k", MULTI_PROCESS, "-q", "-p", "no:cacheprovider"),
            f"--junitxml={report}",
            success_codes=[0, 1, 5],  # 5: none selected, in a project without examples
        )
        cases = ElementTree.parse(report).getroot().iter("testcase")
        for case in cases:
            outcome = {child.tag for child in case}
            if "skipped" in outcome:
                continue
            total += 1
            if outcome & {"failure", "error"}:
                failed.append(f"round {round_number}: {case.get('classname')}.{case.get('name')}")
        session.log(f"after round {round_number}: {len(failed)} failed of {total}")
    session.log("\n".join([f"stress: {len(failed)} failed of {total} test runs", *failed]))
    if failed:
        session.error(f"{len(failed)} of {total} multi-process test runs failed")
