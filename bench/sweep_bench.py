"""Sweeps: 2 workers against 1, and the best trial against the default config.

- regression: ``configs/sweep/regression.yaml``, N = 20 trials with 1 worker, then with 2
  (each worker one torch thread, the same ``--seed``), each study in a fresh folder, for
  each sampler seed (``--seeds``, default 0,1,2,3,4). Prints both wall times and their
  ratio for each seed and the median ratio (target: at most 0.6 on a machine with 2 free
  cores), and the best ``val_r2`` of each study next to ``configs/regression.yaml``'s own
  (one thread). Which trials a study runs, and so how many the pruner stops, depends on
  the seed, and each seed keeps its own ratio from run to run (one of 0.46–0.78 here):
  the median needs several seeds.
- ppo (only with ``ppo`` named): ``configs/sweep/ppo.yaml``, N = 20 trials with 2 workers
  at the config's budget (60,000 env steps per trial), against the default config's
  ``steps_to_solved``. About 20 CartPole runs: minutes per trial on a busy machine.

Usage: ``python bench/sweep_bench.py PROJECT_DIR PACKAGE [regression] [ppo] [--trials N]
[--seeds S,S,...]``
(``nox -s bench -- sweep``).
"""

import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import harness

TARGET = 0.6
"""2 workers' wall time over 1 worker's, on a machine with 2 free cores."""
QUIET = ["--trainer.enable_progress_bar=false", "--trainer.enable_model_summary=false"]


def _default(project: Path, package: str, example: str, root: Path) -> dict:
    env = harness.one_thread(project)
    return harness.fit(project, package, example, root, *QUIET, env=env)


def _sweep(
    project: Path, package: str, example: str, trials: int, workers: int, root: Path, seed: int = 0
):
    args = ["-m", f"{package}.sweep", example, f"--trials={trials}", f"--workers={workers}"]
    tick = time.perf_counter()
    harness.run(
        [*args, f"--root={root}", f"--seed={seed}", "--", *QUIET],
        cwd=project,
        env=harness.one_thread(project),
        what=f"{example} sweep, {workers} workers",
    )
    seconds = time.perf_counter() - tick
    import optuna  # the bench environment has the project's dependencies

    journal = optuna.storages.JournalStorage(
        optuna.storages.journal.JournalFileBackend(str(root / example / "study.journal"))
    )
    return seconds, optuna.load_study(study_name=example, storage=journal)


def main() -> None:
    project, package = Path(sys.argv[1]).resolve(), sys.argv[2]
    rest = sys.argv[3:]
    trials = int(rest[rest.index("--trials") + 1]) if "--trials" in rest else 20
    seeds = [0, 1, 2, 3, 4]
    if "--seeds" in rest:
        seeds = [int(seed) for seed in rest[rest.index("--seeds") + 1].split(",")]
    examples = [name for name in ("regression", "ppo") if name in rest] or ["regression"]
    result = harness.Result("sweep")
    print(f"load average before: {os.getloadavg()}, cores: {os.cpu_count()}")
    scratch = Path(tempfile.mkdtemp(prefix="sweep_bench_"))
    figures, details = [], {}
    try:
        if "regression" in examples:
            default = _default(project, package, "regression", scratch / "default")
            ratios, walls, best = [], [], []
            for seed in seeds:
                one, study_one = _sweep(
                    project, package, "regression", trials, 1, scratch / f"w1-{seed}", seed
                )
                two, study_two = _sweep(
                    project, package, "regression", trials, 2, scratch / f"w2-{seed}", seed
                )
                ratios.append(two / one)
                walls.append([one, two])
                best.append([study_one.best_value, study_two.best_value])
                print(
                    f"regression, N = {trials}, seed {seed}: 1 worker {one:.1f} s, 2 workers "
                    f"{two:.1f} s, ratio {two / one:.2f}; best val_r2: 1 worker "
                    f"{study_one.best_value:.4f}, 2 workers {study_two.best_value:.4f}",
                    flush=True,
                )
            median = statistics.median(ratios)
            print(
                f"regression: median ratio {median:.2f} over seeds {seeds} "
                f"({'met' if median <= TARGET else 'MISSED'}: <= {TARGET}); "
                f"configs/regression.yaml val_r2 {default['val_r2']:.4f}"
            )
            figures += [
                harness.figure(
                    f"regression, {trials} trials: 1 worker",
                    statistics.median(w[0] for w in walls),
                    "s",
                ),
                harness.figure(
                    f"regression, {trials} trials: 2 workers",
                    statistics.median(w[1] for w in walls),
                    "s",
                ),
                harness.figure(
                    f"regression: 2 workers / 1, median over seeds {','.join(map(str, seeds))}",
                    median,
                    at_most=TARGET,
                ),
                harness.figure("regression: best val_r2", max(max(pair) for pair in best)),
                harness.figure("regression: configs/regression.yaml val_r2", default["val_r2"]),
            ]
            details["regression"] = {
                "seeds": seeds,
                "seconds_1_and_2_workers": walls,
                "best_val_r2": best,
            }
        if "ppo" in examples:
            default = _default(project, package, "ppo", scratch / "ppo_default")
            seconds, study = _sweep(project, package, "ppo", trials, 2, scratch / "ppo")
            best = study.best_trial
            best_summary = harness.summary(scratch / "ppo" / "ppo" / f"trial_{best.number}")
            print(
                f"ppo, N = {trials}, 2 workers, {seconds:.0f} s: best trial {best.number}, "
                f"steps_to_solved_or_penalty {best.value:.0f}, seconds_to_solved "
                f"{best_summary['seconds_to_solved']}; configs/ppo.yaml steps_to_solved "
                f"{default['steps_to_solved']}, seconds_to_solved {default['seconds_to_solved']}"
            )
            figures += [
                harness.figure(f"ppo, {trials} trials, 2 workers", seconds, "s"),
                harness.figure("ppo: best trial, steps_to_solved_or_penalty", best.value),
                harness.figure(
                    "ppo: best trial, seconds_to_solved", best_summary["seconds_to_solved"], "s"
                ),
                harness.figure(
                    "ppo: configs/ppo.yaml, steps_to_solved", default["steps_to_solved"]
                ),
                harness.figure(
                    "ppo: configs/ppo.yaml, seconds_to_solved", default["seconds_to_solved"], "s"
                ),
            ]
        print(f"load average after: {os.getloadavg()}")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    result.write(figures, torch_threads=1, details=details)


if __name__ == "__main__":
    main()
