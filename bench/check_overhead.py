"""Cost of runtime shape checks: each example with checks on, against ``JAXTYPING_DISABLE=1``.

Every repeat runs both variants in fresh processes, alternating which goes first, so
machine noise falls on both; the report is the median over repeats of each variant.
- regression: steady-state training seconds per epoch (the first epoch, which pays for
  first-signature checks and warm-up, is left out), default network, batch 256;
- PPO: env steps per second of the example's default config (``configs/ppo.yaml``).

Usage: ``python bench/check_overhead.py PROJECT_DIR PACKAGE [REPEATS]`` (``nox -s bench``).
"""

import importlib
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

TARGETS = {
    "regression": ("seconds_per_epoch", "<=", 1.03),
    "ppo": ("env_steps_per_second", ">=", 0.97),
}


def regression_worker(package: str) -> dict:
    import lightning as L

    regression = importlib.import_module(f"{package}.regression")

    class EpochClock(L.Callback):
        def __init__(self) -> None:
            self.seconds: list[float] = []

        def on_train_epoch_start(self, trainer, pl_module) -> None:
            self.started = time.perf_counter()

        def on_train_epoch_end(self, trainer, pl_module) -> None:
            self.seconds.append(time.perf_counter() - self.started)

    L.seed_everything(0, verbose=False)
    data = regression.RegressionData(batch_size=256)
    model = regression.RegressionModule(
        num_features=data.num_features, target_mean=data.target_mean, target_std=data.target_std
    )
    clock = EpochClock()
    trainer = L.Trainer(
        max_epochs=12,
        limit_val_batches=0,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        callbacks=[clock],
    )
    trainer.fit(model, data)
    return {"seconds_per_epoch": statistics.median(clock.seconds[1:])}


def ppo_worker(package: str, root: str) -> dict:
    main = importlib.import_module(f"{package}.ppo.__main__").main
    main(
        [
            "fit",
            "--config",
            "configs/ppo.yaml",
            f"--trainer.default_root_dir={root}",
            "--trainer.enable_progress_bar=false",
        ]
    )
    (summary,) = Path(root).rglob("summary.json")
    return {"env_steps_per_second": json.loads(summary.read_text())["env_steps_per_second"]}


def _measure(project: Path, package: str, example: str, checks: bool, run: int) -> float:
    env = {**os.environ, "JAXTYPING_DISABLE": "0" if checks else "1"}
    root = project / "runs" / "overhead" / f"{example}-{'on' if checks else 'off'}-{run}"
    command = [sys.executable, __file__, "--worker", example, package, str(root)]
    done = subprocess.run(command, cwd=project, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{example} worker failed:\n{done.stderr[-3000:]}")
    key = TARGETS[example][0]
    return json.loads(done.stdout.strip().splitlines()[-1])[key]


def main() -> None:
    if sys.argv[1] == "--worker":
        example, package, root = sys.argv[2:5]
        result = (
            regression_worker(package) if example == "regression" else ppo_worker(package, root)
        )
        print(json.dumps(result))
        return
    project, package = Path(sys.argv[1]).resolve(), sys.argv[2]
    repeats = int(sys.argv[3]) if len(sys.argv) > 3 else 5
    for example, (key, direction, target) in TARGETS.items():
        values: dict[bool, list[float]] = {True: [], False: []}
        for run in range(repeats):
            for checks in (True, False) if run % 2 == 0 else (False, True):
                values[checks].append(_measure(project, package, example, checks, run))
            print(f"{example} repeat {run}: on {values[True][-1]:.4g}, off {values[False][-1]:.4g}")
        on, off = statistics.median(values[True]), statistics.median(values[False])
        ratio = on / off
        met = ratio <= target if direction == "<=" else ratio >= target
        print(
            f"{example}: median {key} checks on {on:.4g}, JAXTYPING_DISABLE=1 {off:.4g}, "
            f"ratio {ratio:.3f} ({'met' if met else 'MISSED'}: {direction} {target}, "
            f"{repeats} repeats)",
            flush=True,
        )


if __name__ == "__main__":
    main()
