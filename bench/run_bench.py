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
import math
import os
import shutil
import statistics
from pathlib import Path

import harness

HERE = Path(__file__).resolve().parent
TUNE_SEEDS = tuple(range(10))
"""The seeds ``configs/ppo.yaml``'s CartPole settings were chosen on."""
REPORT_SEEDS = tuple(range(1000, 1010))
"""Seeds no tuning looked at: the figures the README states."""
THRESHOLD, TIME_RATIO, EVAL_SHARE = 475.0, 0.45, 0.9
"""The targets: median time to a rolling-20 return of 475 at most 0.45 of SB3's, and a final
evaluation of at least 475 on at least 9 seeds in 10."""


def ours(project: Path, package: str, seed: int, overrides: list[str]) -> dict:
    root = project / "runs" / "bench" / f"seed{seed}"
    return harness.fit(project, package, "ppo", root, f"--seed_everything={seed}", *overrides)


def sb3(seed: int) -> dict:
    return harness.worker([str(HERE / "sb3_cartpole.py"), str(seed)], cwd=HERE, what="SB3")


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
) -> tuple[list[dict], dict]:
    """Run ``seeds``, print each seed and the set's medians; the set's figures and runs."""
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
    figures = [
        harness.figure(
            f"{name} seeds: ours, seconds to 475", median(our_runs, "seconds_to_solved"), "s"
        ),
        harness.figure(
            f"{name} seeds: SB3, seconds to 475", median(sb3_runs, "seconds_to_solved"), "s"
        ),
        harness.figure(
            f"{name} seeds: time to 475, ours / SB3 (ratio of medians)",
            ratios["seconds_to_solved"],
            at_most=TIME_RATIO,
        ),
        harness.figure(
            f"{name} seeds: time to 475, median per-seed ratio", statistics.median(per_seed)
        ),
        harness.figure(f"{name} seeds: env steps to 475, ours / SB3", ratios["steps_to_solved"]),
        harness.figure(
            f"{name} seeds: env steps per second, ours / SB3", ratios["env_steps_per_second"]
        ),
        harness.figure(
            f"{name} seeds: share with a final eval >= {THRESHOLD:g}",
            good / len(evals),
            at_least=EVAL_SHARE,
        ),
    ]
    details = {"seeds": list(seeds), "ours": our_runs, "sb3": sb3_runs}
    return figures, details


def column_advantages(project: Path, package: str, seed: int) -> tuple[list[dict], dict]:
    """The column-advantages bug planted in a real run: caught with checks on, caught by the
    guard with checks off, silent with both off. Its figures, and what each run said."""
    root = project / "runs" / "bench" / "column_advantages"
    shutil.rmtree(root, ignore_errors=True)  # the worker reads the one summary it finds
    command = [str(HERE / "ppo_column_advantages.py"), package, "configs/ppo.yaml", str(root)]
    env = harness.environment(project)
    bug = harness.worker([*command, str(seed)], cwd=project, env=env, what="column advantages")
    print(f"\n(N, 1) advantages against (N,) log-probabilities, seed {seed}:")
    print(f"  checks on:  {bug['checked_error']}")
    print(f"  checks off, BroadcastGuardCallback on: {bug['guard_error']}")
    unchecked = bug["unchecked"]
    print(
        f"  both off: eval_return_mean {unchecked['eval_return_mean']:.1f}, "
        f"steps_to_solved {unchecked['steps_to_solved']}"
    )

    def outcome(error: str | None) -> str:
        return f"raised {error.split(':')[0]}" if error else "trained silently"

    figures = [
        harness.figure("(N, 1) advantages, checks on", outcome(bug["checked_error"])),
        harness.figure("(N, 1) advantages, checks off, guard on", outcome(bug["guard_error"])),
        harness.figure("(N, 1) advantages, both off: final eval", unchecked["eval_return_mean"]),
    ]
    return figures, bug


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("project", type=Path)
    parser.add_argument("package")
    parser.add_argument("--seeds", default="both", help="tune, report, both or 0,1,2")
    parser.add_argument(
        "--no-column-advantages", action="store_true", help="skip the (N, 1) advantages run"
    )
    arguments, overrides = parser.parse_known_args()
    result = harness.Result("sb3")
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
    figures, details = [], {"overrides": overrides}
    for name, seeds in sets:
        shown, details[name] = run_set(name, seeds, project, arguments.package, overrides)
        figures += shown
    if not arguments.no_column_advantages:
        shown, details["column_advantages"] = column_advantages(
            project, arguments.package, sets[0][1][0]
        )
        figures += shown
    result.write(figures, torch_threads=1, details=details)


if __name__ == "__main__":
    main()
