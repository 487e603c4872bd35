"""Sessions of the template repository.

``nox -s tests``  renders every preset in configs/ and runs each project's checks and suite.
``nox -s demo``   renders the default project into build/demo, installs it, trains its
                  examples with their default configs and prints what they reached.
``nox -s bench``  renders the full preset into build/bench and runs every bench, or those
                  named (``nox -s bench -- busy sb3``; ``BENCHES`` in bench/benchmarks.py
                  lists them). Each writes its result in bench/results/; the session then
                  rewrites BENCHMARKS.md from them (``python bench/benchmarks.py`` alone).
``nox -s lint``   ruff on this repository's own Python.
"""

import json
import runpy
import shutil
from pathlib import Path

import nox

ROOT = Path(__file__).parent
PYPROJECT = nox.project.load_toml(ROOT / "pyproject.toml")
DEMO_DIR = ROOT / "build" / "demo"
BENCH_DIR = ROOT / "build" / "bench"

nox.options.sessions = ["lint", "tests"]
nox.options.reuse_existing_virtualenvs = True


@nox.session
def tests(session: nox.Session) -> None:
    session.install(*nox.project.dependency_groups(PYPROJECT, "test"))
    # One worker per core: each preset's suite runs in a process of its own, so on two
    # cores two presets' suites run at once ("worksteal" rebalances the long ones).
    session.run("pytest", "-n", "auto", "--dist", "worksteal", *session.posargs)


@nox.session
def lint(session: nox.Session) -> None:
    """Ruff on this repository's Python; the template's is checked on rendered projects."""
    session.install("ruff")
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")


@nox.session
def demo(session: nox.Session) -> None:
    session.install("copier")
    _render(session, "default", DEMO_DIR)
    session.install("-e", f"{DEMO_DIR}[plot]")
    package = _answers(DEMO_DIR)["package_name"]
    session.chdir(DEMO_DIR)
    reports = []
    for example in ("regression", "ppo"):
        config = DEMO_DIR / "configs" / f"{example}.yaml"
        if not config.exists():
            continue
        root = DEMO_DIR / "runs" / example
        session.run(
            "python",
            "-m",
            f"{package}.{example}",
            "fit",
            "--config",
            str(config),
            f"--trainer.default_root_dir={root}",
            "--trainer.enable_progress_bar=false",
        )
        summary_path = max(root.rglob("summary.json"), key=_mtime)
        if example == "ppo":
            session.run("python", "-m", f"{package}.ppo.plot", str(summary_path.parent))
        reports.append(_report(example, json.loads(summary_path.read_text())))
    session.log("demo finished\n" + "\n".join(reports))


@nox.session
def bench(session: nox.Session) -> None:
    """All benchmarks, or those named (``nox -s bench -- busy sb3``; the names are
    ``BENCHES`` in bench/benchmarks.py), then BENCHMARKS.md from bench/results/."""
    benches = runpy.run_path(str(ROOT / "bench" / "benchmarks.py"))["BENCHES"]
    unknown = [name for name in session.posargs if name not in benches]
    if unknown:
        session.error(f"no bench named {', '.join(unknown)}; there are {', '.join(benches)}")
    session.install("copier")
    _render(session, "full", BENCH_DIR)  # the audit and sweep benches need their features
    session.install("-e", str(BENCH_DIR), "stable-baselines3>=2.4")
    package = _answers(BENCH_DIR)["package_name"]
    for name in session.posargs or list(benches):
        script, _ = benches[name]
        session.run("python", str(ROOT / "bench" / script), str(BENCH_DIR), package)
    session.run("python", str(ROOT / "bench" / "benchmarks.py"))


def _render(session: nox.Session, preset: str, destination: Path) -> None:
    shutil.rmtree(destination, ignore_errors=True)
    session.run(
        "copier",
        "copy",
        "--defaults",
        "--vcs-ref=HEAD",
        "--quiet",
        "--data-file",
        str(ROOT / "configs" / f"{preset}.yml"),
        str(ROOT),
        str(destination),
    )


def _answers(project: Path) -> dict[str, str]:
    """The flat ``key: value`` lines of Copier's answers file (nox itself has no YAML)."""
    lines = (project / ".copier-answers.yml").read_text().splitlines()
    pairs = (line.split(":", 1) for line in lines if ":" in line and not line.startswith("#"))
    return {key.strip(): value.strip().strip("'\"") for key, value in pairs}


def _mtime(path: Path) -> float:
    return path.stat().st_mtime


def _report(example: str, summary: dict[str, object]) -> str:
    shown = ", ".join(
        f"{key} {value:.4g}" if isinstance(value, float) else f"{key} {value}"
        for key, value in summary.items()
        if isinstance(value, float | int | None)
    )
    return f"  {example}: {shown}\n    logs: {summary['log_dir']}"
