"""Benchmark the rendered project's PPO against Stable-Baselines3 on CartPole-v1.

Two disjoint seed sets: ``configs/ppo.yaml`` is tuned on ``TUNE_SEEDS`` only, and judged on
``REPORT_SEEDS``, which no tuning looks at: a setting that wins on the first and loses on
the second does not ship. Each seed runs ours, then SB3 (RL-Zoo's settings), so that the
machine's noise falls on both; the figures are medians. Usage (``nox -s bench -- sb3`` runs
both sets)::

    python bench/run_bench.py PROJECT_DIR PACKAGE [--seeds tune|report|both|0,1,2]
        [--no-column-advantages] [FIT OVERRIDES, e.g. --model.update_epochs=20]
"""

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
TUNE_SEEDS = tuple(range(10))
"""The seeds ``configs/ppo.yaml``'s CartPole settings were chosen on."""
REPORT_SEEDS = tuple(range(1000, 1010))
"""Seeds no tuning looked at: the figures the README states."""
THRESHOLD, TIME_RATIO, EVAL_SHARE = 475.0, 0.45, 0.9
"""The targets: median time to a rolling-20 return of 475 at most 0.45 of SB3's, and a final
evaluation of at least 475 on at least 9 seeds in 10."""


def _json_line(command: list[str], cwd: Path) -> dict:
    done = subprocess.run(command, cwd=cwd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(
            f"{' '.join(command)} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
        )
    return json.loads(done.stdout.strip().splitlines()[-1])


def ours(project: Path, package: str, seed: int, overrides: list[str]) -> dict:
    root = project / "runs" / "bench" / f"seed{seed}"
    for old in root.rglob("summary.json"):  # a rerun's root holds the previous summary
        old.unlink()
    command = [
        sys.executable,
        "-m",
        f"{package}.ppo",
        "fit",
        "--config",
        "configs/ppo.yaml",
        f"--seed_everything={seed}",
        f"--trainer.default_root_dir={root}",
        *overrides,
    ]
    done = subprocess.run(command, cwd=project, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"our PPO failed (seed {seed}):\n{done.stderr[-3000:]}")
    (summary,) = root.rglob("summary.json")
    return json.loads(summary.read_text())


def sb3(seed: int) -> dict:
    return _json_line([sys.executable, str(HERE / "sb3_cartpole.py"), str(seed)], HERE)


def median(runs: list[dict], key: str) -> float:
    """Median over runs; a run that never got there counts as infinitely slow."""
    return statistics.median(math.inf if run[key] is None else run[key] for run in runs)


def shown(value: float | None, digits: int = 4) -> str:
    """A figure to print: whole above 1000 (env steps), else ``digits`` significant digits."""
    if value is None or not math.isfinite(value):
        return "never"
    return f"{value:.0f}" if abs(value) >= 1000 else f"{value:.{digits}g}"


def run_set(
    name: str, seeds: tuple[int, ...], project: Path, package: str, overrides: list[str]
) -> bool:
    """Run ``seeds``, print each seed and the set's medians; whether both targets are met."""
    print(f"\n== {name} seeds {list(seeds)}", flush=True)
    our_runs, sb3_runs = [], []
    for seed in seeds:
        a, b = ours(project, package, seed, overrides), sb3(seed)
        our_runs.append(a)
        sb3_runs.append(b)
        print(
            f"seed {seed}: ours {shown(a['steps_to_solved'])} steps, "
            f"{shown(a['seconds_to_solved'], 3)} s, final eval {a['eval_return_mean']:.1f} | "
            f"SB3 {shown(b['steps_to_solved'])} steps, {shown(b['seconds_to_solved'], 3)} s | "
            f"load {os.getloadavg()[0]:.2f}",
            flush=True,
        )
    print(f"medians over {name} seeds (ours: configs/ppo.yaml, checks on; SB3: RL-Zoo)")
    print(f"{'metric':<22}{'ours':>12}{'SB3':>12}{'ours/SB3':>10}")
    ratios = {}
    for key in ("steps_to_solved", "seconds_to_solved", "env_steps_per_second"):
        mine, theirs = median(our_runs, key), median(sb3_runs, key)
        finite = math.isfinite(mine) and math.isfinite(theirs)
        ratios[key] = mine / theirs if finite else math.inf
        print(f"{key:<22}{shown(mine):>12}{shown(theirs):>12}{shown(ratios[key], 3):>10}")
    per_seed = [
        (a["seconds_to_solved"] or math.inf) / (b["seconds_to_solved"] or math.inf)
        for a, b in zip(our_runs, sb3_runs, strict=True)
    ]
    print(f"median of per-seed time ratios: {shown(statistics.median(per_seed), 3)}")
    evals = [run["eval_return_mean"] for run in our_runs]
    print(f"final eval return by seed: {evals}")
    breakdown = {
        part: statistics.median(run["time_breakdown_seconds"][part] for run in our_runs)
        for part in our_runs[0]["time_breakdown_seconds"]
    }
    print(f"ours, median seconds by part over the whole budget: {breakdown}")
    good = sum(value >= THRESHOLD for value in evals)
    targets = {
        f"time ratio {shown(ratios['seconds_to_solved'], 3)} <= {TIME_RATIO}": ratios[
            "seconds_to_solved"
        ]
        <= TIME_RATIO,
        f"final eval >= {THRESHOLD:g} on {good} of {len(evals)} seeds (>= {EVAL_SHARE:.0%})": (
            good >= EVAL_SHARE * len(evals)
        ),
    }
    for target, met in targets.items():
        print(f"{'met   ' if met else 'MISSED'} {target} ({name} seeds)")
    return all(targets.values())


def column_advantages(project: Path, package: str, seed: int) -> None:
    bug = _json_line(
        [
            sys.executable,
            str(HERE / "ppo_column_advantages.py"),
            package,
            "configs/ppo.yaml",
            str(project / "runs" / "bench" / "column_advantages"),
            str(seed),
        ],
        project,
    )
    print(f"\ncolumn advantages, (N, 1) against (N,), seed {seed}:")
    print(f"  checks on:  {bug['checked_error']}")
    print(f"  checks off, BroadcastGuardCallback on: {bug['guard_error']}")
    unchecked = bug["unchecked"]
    print(
        f"  both off: eval_return_mean {unchecked['eval_return_mean']:.1f}, "
        f"steps_to_solved {unchecked['steps_to_solved']}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("project", type=Path)
    parser.add_argument("package")
    parser.add_argument("--seeds", default="both", help="tune, report, both or 0,1,2")
    parser.add_argument(
        "--no-column-advantages", action="store_true", help="skip the column-advantages run"
    )
    arguments, overrides = parser.parse_known_args()
    project = arguments.project.resolve()
    named = {"tune": TUNE_SEEDS, "report": REPORT_SEEDS}
    if arguments.seeds == "both":
        sets = list(named.items())
    elif arguments.seeds in named:
        sets = [(arguments.seeds, named[arguments.seeds])]
    else:
        sets = [("given", tuple(int(s) for s in arguments.seeds.split(",")))]
    if overrides:
        print(f"fit overrides: {overrides}")
    for name, seeds in sets:
        run_set(name, seeds, project, arguments.package, overrides)
    if not arguments.no_column_advantages:
        column_advantages(project, arguments.package, sets[0][1][0])


if __name__ == "__main__":
    main()
