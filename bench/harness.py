"""What every bench shares: starting worker processes, the medians of paired repeats, and
the result file that ``bench/benchmarks.py`` turns into ``BENCHMARKS.md``.

A bench creates a ``Result`` when it starts (the date and the load then), runs its sides in
fresh processes (``worker``, ``fit``), taking turns (``turns``) so that a shared machine's
slow phases fall on each, and ends with ``Result.write(figures)``: one JSON file a bench in
``bench/results/`` (``BENCH_RESULTS`` names another folder, for trial runs), overwritten by
the latest run. Nothing here imports torch unless asked to synchronise a GPU, so a bench's
parent process stays light.
"""

import json
import math
import os
import platform
import shlex
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path
from typing import Any, TypeVar

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = (
    "torch",
    "lightning",
    "gymnasium",
    "jaxtyping",
    "beartype",
    "jsonargparse",
    "numpy",
    "stable-baselines3",
    "optuna",
)
"""The versions a result records, where installed: what its figures depend on."""
T = TypeVar("T")


def environment(project: Path | None = None, **changes: str | None) -> dict[str, str]:
    """This process's environment for a child: ``project/src`` ahead on ``PYTHONPATH`` (an
    uninstalled render works; a ``PYTHONPATH`` already set is kept after it), then
    ``changes`` applied, ``None`` removing a variable."""
    env = dict(os.environ)
    if project is not None:
        paths = [str(project / "src"), *filter(None, [env.get("PYTHONPATH")])]
        env["PYTHONPATH"] = os.pathsep.join(paths)
    for name, value in changes.items():
        if value is None:
            env.pop(name, None)
        else:
            env[name] = value
    return env


def one_thread(project: Path, *, checks: bool = True) -> dict[str, str]:
    """A child's environment with one torch thread (``OMP_NUM_THREADS=1``), shape checks off
    (``JAXTYPING_DISABLE=1``) unless ``checks``."""
    return environment(project, OMP_NUM_THREADS="1", JAXTYPING_DISABLE=None if checks else "1")


def run(
    args: Sequence[str],
    *,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
    what: str = "a worker",
) -> str:
    """``python ARGS``'s standard output; a failed child ends the bench with its last lines."""
    done = subprocess.run(
        [sys.executable, *args], cwd=cwd, env=env, capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise SystemExit(f"{what} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    return done.stdout


def worker(
    args: Sequence[str],
    *,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
    what: str = "a worker",
) -> Any:
    """The JSON value on the last line a ``python ARGS`` child prints."""
    return json.loads(run(args, cwd=cwd, env=env, what=what).strip().splitlines()[-1])


def fit(
    project: Path,
    package: str,
    example: str,
    root: Path,
    *options: str,
    env: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """``python -m PACKAGE.EXAMPLE fit --config configs/EXAMPLE.yaml`` in ``project``, logging
    under ``root``; the run's ``summary.json``. A summary left in ``root`` by an earlier run
    is removed first, so the one read is this run's."""
    for old in root.rglob("summary.json"):
        old.unlink()
    command = ["-m", f"{package}.{example}", "fit", "--config", f"configs/{example}.yaml"]
    run(
        [*command, f"--trainer.default_root_dir={root}", *options],
        cwd=project,
        env=env if env is not None else environment(project),
        what=f"{example} fit {' '.join(options)}".rstrip(),
    )
    return summary(root)


def summary(root: Path) -> dict[str, Any]:
    """The newest ``summary.json`` under ``root``."""
    return json.loads(max(root.rglob("summary.json"), key=os.path.getmtime).read_text())


def rotated(sides: Sequence[str], repeat: int) -> list[str]:
    """``sides`` in the order repeat ``repeat`` runs them: each starts in turn."""
    shift = repeat % len(sides)
    return [*sides[shift:], *sides[:shift]]


def turns(
    sides: Sequence[str], repeats: int, measure: Callable[[str, int], T]
) -> Iterator[tuple[int, dict[str, list[T]]]]:
    """``measure(side, repeat)`` for every side in every repeat, in ``rotated`` order;
    after each repeat, the repeat and each side's measures so far (to print as they come)."""
    measured: dict[str, list[T]] = {side: [] for side in sides}
    for repeat in range(repeats):
        for side in rotated(sides, repeat):
            measured[side].append(measure(side, repeat))
        yield repeat, measured


def paired(tops: Iterable[Any], bottoms: Iterable[Any], key: str | None = None) -> float:
    """The median over repeats of each repeat's ratio: the estimate that a shared machine's
    drift between repeats does not move. With ``key``, the measures are dicts and their
    ``key`` is the figure."""
    pairs = zip(tops, bottoms, strict=True)
    if key is not None:
        pairs = ((top[key], bottom[key]) for top, bottom in pairs)
    return statistics.median(top / bottom for top, bottom in pairs)


class TrainClock:
    """Mixed into a ``LightningModule`` (first among its bases): ``seconds`` from the start
    of training to its end, Lightning's loop included and the set-up before it left out."""

    started = seconds = 0.0

    def on_train_start(self) -> None:
        self.started = time.perf_counter()

    def on_train_end(self) -> None:
        self.seconds = time.perf_counter() - self.started


def sync() -> None:
    """Wait for the GPU's queued work, where there is one, before a clock is read."""
    import torch

    if torch.cuda.is_available():
        torch.cuda.synchronize()


def figure(
    name: str,
    value: float | int | str | None,
    unit: str = "",
    *,
    at_most: float | None = None,
    at_least: float | None = None,
) -> dict[str, Any]:
    """One row of a result: a figure and, where it has one, its target and whether it met it."""
    if isinstance(value, float):
        # Five digits are more than the machine's noise leaves; never (inf) is null in JSON.
        value = float(f"{value:.5g}") if math.isfinite(value) else None
    row: dict[str, Any] = {"name": name, "value": value, "unit": unit}
    number = value if isinstance(value, int | float) else None
    if at_most is not None:
        row |= {"target": f"<= {at_most:g}", "met": number is not None and number <= at_most}
    elif at_least is not None:
        row |= {"target": f">= {at_least:g}", "met": number is not None and number >= at_least}
    return row


class Result:
    """A bench's record, started when the bench starts."""

    def __init__(self, bench: str) -> None:
        self.bench = bench
        self.date = datetime.now(timezone.utc).isoformat(timespec="seconds")
        self.load_before = [round(load, 2) for load in os.getloadavg()]

    def write(
        self,
        figures: list[dict[str, Any]],
        *,
        torch_threads: object,
        details: object = None,
        not_run: str | None = None,
    ) -> Path:
        """Write ``bench/results/BENCH.json`` and return its path. ``torch_threads`` is
        what the measured processes ran with; ``details`` the per-repeat figures, for
        whoever wants more than the medians; ``not_run`` why nothing was measured."""
        folder = results_folder()
        folder.mkdir(parents=True, exist_ok=True)
        record = {
            "bench": self.bench,
            "command": command(),
            "date": self.date,
            "commit": commit(),
            "machine": {
                "cpu": cpu_model(),
                "cores": cores(),
                "load_average_before": self.load_before,
                "load_average_after": [round(load, 2) for load in os.getloadavg()],
            },
            "torch_threads": torch_threads,
            "versions": versions(),
            "not_run": not_run,
            "figures": figures,
            "details": details,
        }
        path = folder / f"{self.bench}.json"
        path.write_text(json.dumps(record, indent=2) + "\n")
        print(f"wrote {_shown(path)}", flush=True)
        return path


def results_folder() -> Path:
    return Path(os.environ.get("BENCH_RESULTS") or ROOT / "bench" / "results")


def measured(bench: str) -> bool:
    """Whether ``bench`` has a result with figures (not a record of why it did not run)."""
    path = results_folder() / f"{bench}.json"
    return path.exists() and json.loads(path.read_text())["not_run"] is None


def command() -> str:
    """This process's command line, paths inside the repository relative to its root."""
    return shlex.join(
        ["python", *(_shown(Path(arg)) if Path(arg).exists() else arg for arg in sys.argv)]
    )


def _shown(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(ROOT))
    except ValueError:
        return str(path)


def commit() -> str:
    """The repository's commit, marked ``+uncommitted`` when the tree differs from it."""

    def git(*args: str) -> str:
        done = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True)
        return done.stdout.strip()

    head = git("rev-parse", "--short=12", "HEAD") or "unknown"
    # The results and the page are what the benches write: they do not make a tree dirty.
    changed = git(
        "status",
        "--porcelain",
        "--untracked-files=no",
        "--",
        ".",
        ":!bench/results",
        ":!BENCHMARKS.md",
    )
    return f"{head}+uncommitted" if changed else head


def cores() -> int:
    """The cores this process may run on (its affinity), as a scheduler sees them."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def cpu_model() -> str:
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        for line in cpuinfo.read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


def versions() -> dict[str, str]:
    found = {"python": platform.python_version()}
    for package in PACKAGES:
        try:
            found[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            continue
    return found
