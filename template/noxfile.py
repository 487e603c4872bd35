"""Sessions for this project: ``nox -s tests``, ``nox -s lint``, ``nox -s typecheck``.

``nox -s tests -- -m "not slow"`` is the quick run. It leaves out the few tests that start
a child process (command lines, DDP, async envs, compiled fits), which take most of the
full suite's time; the tests' conftest checks that ``slow`` marks exactly those. Anything
after ``--`` goes to pytest: ``nox -s tests -- -k ppo -x``.
"""

import nox

nox.options.sessions = ["lint", "typecheck", "tests"]
nox.options.reuse_existing_virtualenvs = True


@nox.session
def tests(session: nox.Session) -> None:
    session.install("-e", ".[dev]")
    session.run("pytest", *session.posargs)


@nox.session
def lint(session: nox.Session) -> None:
    session.install("ruff")
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")


@nox.session
def typecheck(session: nox.Session) -> None:
    session.install("-e", ".[dev]")
    session.run("pyright")
