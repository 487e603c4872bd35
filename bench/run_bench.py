"""Benchmark the rendered project's PPO against Stable-Baselines3 on CartPole-v1.

Runs each side for the same seeds, alternating so that machine noise falls on both, then
prints medians and ratios (ours / SB3). Usage:
``python bench/run_bench.py PROJECT_DIR PACKAGE [SEEDS]`` (run by ``nox -s bench``).
"""

import json
import math
import os
import statistics
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def _json_line(command: list[str], cwd: Path) -> dict:
    done = subprocess.run(command, cwd=cwd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(
            f"{' '.join(command)} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
        )
    return json.loads(done.stdout.strip().splitlines()[-1])


def ours(project: Path, package: str, seed: int) -> dict:
    root = project / "runs" / "bench" / f"seed{seed}"
    command = [
        sys.executable,
        "-m",
        f"{package}.ppo",
        "fit",
        "--config",
        "configs/ppo.yaml",
        f"--seed_everything={seed}",
        f"--trainer.default_root_dir={root}",
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


def main() -> None:
    project, package = Path(sys.argv[1]).resolve(), sys.argv[2]
    seeds = [int(s) for s in sys.argv[3].split(",")] if len(sys.argv) > 3 else [0, 1, 2, 3, 4]
    our_runs, sb3_runs = [], []
    for seed in seeds:
        our_runs.append(ours(project, package, seed))
        sb3_runs.append(sb3(seed))
        a, b = our_runs[-1], sb3_runs[-1]
        print(
            f"seed {seed}: ours steps_to_solved {a['steps_to_solved']} "
            f"in {a['seconds_to_solved']} s, "
            f"eval {a['eval_return_mean']:.1f}, {a['env_steps_per_second']:.0f} env steps/s | "
            f"SB3 steps_to_solved {b['steps_to_solved']} in "
            f"{b['seconds_to_solved'] and round(b['seconds_to_solved'], 3)} s, "
            f"{b['env_steps_per_second']:.0f} env steps/s",
            flush=True,
        )
        print(f"         ours time breakdown (s): {a['time_breakdown_seconds']}", flush=True)
        print(f"         load average {os.getloadavg()[0]:.2f}", flush=True)

    rows = []
    for key in ("steps_to_solved", "seconds_to_solved", "env_steps_per_second"):
        mine, theirs = median(our_runs, key), median(sb3_runs, key)
        ratio = mine / theirs if math.isfinite(mine) and math.isfinite(theirs) else None
        rows.append((key, mine, theirs, ratio))
    eval_median = statistics.median(run["eval_return_mean"] for run in our_runs)
    print(f"\nmedians over seeds {seeds} (ours: configs/ppo.yaml, checks on; SB3: RL-Zoo)")
    print(f"{'metric':<22}{'ours':>12}{'SB3':>12}{'ours/SB3':>10}")
    for key, mine, theirs, ratio in rows:
        shown = [f"{v:.4g}" if math.isfinite(v) else "never" for v in (mine, theirs)]
        print(f"{key:<22}{shown[0]:>12}{shown[1]:>12}{'' if ratio is None else f'{ratio:.2f}':>10}")
    print(f"{'eval_return_mean':<22}{eval_median:>12.4g}")
    print(f"steps_to_solved by seed: ours {[run['steps_to_solved'] for run in our_runs]}, ")
    print(f"                      SB3  {[run['steps_to_solved'] for run in sb3_runs]}")
    print(f"final eval return by seed: {[run['eval_return_mean'] for run in our_runs]}")
    breakdown = {
        part: statistics.median(run["time_breakdown_seconds"][part] for run in our_runs)
        for part in our_runs[0]["time_breakdown_seconds"]
    }
    print(f"ours, median seconds by part over the whole budget: {breakdown}")
    targets = {
        "final eval return 500 on every seed": all(
            run["eval_return_min"] >= 500 for run in our_runs
        ),
        "steps_to_solved <= 30000": rows[0][1] <= 30_000,
        "seconds_to_solved ratio <= 0.5": rows[1][3] is not None and rows[1][3] <= 0.5,
    }
    for target, met in targets.items():
        print(f"{'met ' if met else 'MISSED'} {target}")
    bug = _json_line(
        [
            sys.executable,
            str(HERE / "ppo_seed_bug.py"),
            package,
            "configs/ppo.yaml",
            str(project / "runs" / "bench" / "seed_bug"),
            str(seeds[0]),
        ],
        project,
    )
    print(f"\nseed bug, (N, 1) advantages, seed {seeds[0]}:")
    print(f"  checks on:  {bug['checked_error']}")
    print(f"  checks off, BroadcastGuardCallback on: {bug['guard_error']}")
    unchecked = bug["unchecked"]
    print(
        f"  both off: eval_return_mean {unchecked['eval_return_mean']:.1f}, "
        f"steps_to_solved {unchecked['steps_to_solved']} "
        f"(correct run: eval {our_runs[0]['eval_return_mean']:.1f}, "
        f"steps_to_solved {our_runs[0]['steps_to_solved']})"
    )


if __name__ == "__main__":
    main()
