"""Writes ``BENCHMARKS.md`` from the latest result of each bench in ``bench/results/``.

``nox -s bench`` runs the benches it is given and then this; ``python bench/benchmarks.py``
rebuilds the page alone (``BENCH_RESULTS=DIR``: a trial run's results, and its page, in
DIR). The page holds only what the result files hold, so a test can check that it was not
edited by hand: the past is in git.
"""

import json
import os
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
BENCHES: dict[str, tuple[str, str]] = {
    "sb3": ("run_bench.py", "PPO against Stable-Baselines3 on CartPole-v1"),
    "update": ("ppo_update.py", "PPO's optimizer step against a raw PyTorch one"),
    "scaling": ("ppo_scaling.py", "PPO's env steps per second by num_envs and vectorization"),
    "checks": ("check_overhead.py", "Shape checks on against JAXTYPING_DISABLE=1"),
    "guards": ("guard_costs.py", "The guards' cost per training step"),
    "audit": ("audit_cost.py", "The audit, --behaviour and --nonfinite against a plain run"),
    "sweep": ("sweep_bench.py", "A sweep's 2 workers against 1"),
    "loop": ("regression_loop.py", "The regression step against a raw PyTorch loop"),
    "sequence": ("sequence_loop.py", "The sequence step against a raw PyTorch loop"),
    "busy": ("busy.py", "Training beside busy processes"),
    "gpu": ("gpu.py", "Both examples on a GPU, bf16-mixed and compiled"),
}
"""Each bench's name in ``nox -s bench -- NAME`` and its result file: its script, its title."""

HEADER = """\
# Benchmarks

The latest result of each bench in `bench/`, as the bench wrote it in `bench/results/`.
`python bench/benchmarks.py` writes this page from those files, and `nox -s bench` runs it
after the benches; a test fails when the page and the files disagree, so edit neither by
hand. Each bench names the machine, the commit and the command of its run; older figures
are in git's history. `nox -s bench -- NAME` renders the full preset into `build/bench`
and runs the bench named; the command shown under a bench reruns it from the repository
root once `build/bench` exists.
"""


def page(results: Path) -> str:
    """The page that the result files in ``results`` make."""
    records = {path.stem: json.loads(path.read_text()) for path in results.glob("*.json")}
    unknown = sorted(records.keys() - BENCHES.keys())
    if unknown:
        raise SystemExit(f"error: {results} holds results of no bench in BENCHES: {unknown}")
    lines = [HEADER, "| bench | what | last run | targets met |", "| --- | --- | --- | --- |"]
    for name, (_, title) in BENCHES.items():
        record = records.get(name)
        if record is None or record["not_run"] is not None:
            lines.append(f"| `{name}` | {title} | not run | |")
            continue
        judged = [row["met"] for row in record["figures"] if "met" in row]
        met = f"{sum(judged)} of {len(judged)}" if judged else ""
        lines.append(f"| `{name}` | {title} | {record['date'][:10]} | {met} |")
    for name, (script, title) in BENCHES.items():
        lines += ["", f"## {name}: {title}", ""]
        lines += section(name, script, records.get(name))
    return "\n".join(lines) + "\n"


def section(name: str, script: str, record: dict[str, Any] | None) -> list[str]:
    if record is None:
        return [
            f"Not run: no result in `bench/results/` yet. `nox -s bench -- {name}` runs "
            f"`bench/{script}`."
        ]
    machine = record["machine"]
    where = f"{machine['cpu']}, {machine['cores']} cores"
    if record["not_run"] is not None:
        return [
            f"Not run: {record['not_run']} ({where}; {record['date'][:10]}, commit "
            f"`{record['commit']}`). `nox -s bench -- {name}` runs `bench/{script}`."
        ]
    before, after = machine["load_average_before"][0], machine["load_average_after"][0]
    versions = ", ".join(f"{package} {version}" for package, version in record["versions"].items())
    lines = [
        f"`{record['command']}` (`nox -s bench -- {name}`)",
        "",
        f"{record['date'][:10]}, commit `{record['commit']}`; {where}, load {before:g} before "
        f"and {after:g} after; torch threads {threads(record['torch_threads'])}; {versions}.",
        "",
        "| figure | value | target |",
        "| --- | --- | --- |",
    ]
    for row in record["figures"]:
        unit = f" {row['unit']}" if row["unit"] and row["value"] is not None else ""
        value = shown(row["value"]) + unit
        target = ""
        if "target" in row:
            bound = row["target"].replace("<=", "≤").replace(">=", "≥")
            target = f"{bound}: {'met' if row['met'] else '**missed**'}"
        lines.append(f"| {cell(row['name'])} | {cell(value)} | {target} |")
    return lines


def shown(value: object) -> str:
    """A figure as the page prints it: four significant digits, whole numbers from 1,000."""
    if value is None:
        return "never"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.4g}"
    return str(value)


def threads(value: object) -> str:
    """``1``, or by condition: ``idle 2, loaded 2, forced 1``."""
    if isinstance(value, dict):
        return ", ".join(
            f"{key} {'/'.join(map(str, each)) if isinstance(each, list) else each}"
            for key, each in value.items()
        )
    return "not recorded" if value is None else str(value)


def cell(text: str) -> str:
    return text.replace("|", "\\|")


def main() -> None:
    """The repository's page from its results; with ``BENCH_RESULTS`` set (a trial run's
    folder, as the benches take it), a page in that folder from the results there."""
    trial = os.environ.get("BENCH_RESULTS")
    results = Path(trial) if trial else ROOT / "bench" / "results"
    destination = results / "BENCHMARKS.md" if trial else ROOT / "BENCHMARKS.md"
    destination.write_text(page(results))
    print(f"wrote {destination}")


if __name__ == "__main__":
    main()
