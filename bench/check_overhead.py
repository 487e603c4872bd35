"""Cost of runtime shape checks: each example with checks on, against ``JAXTYPING_DISABLE=1``.

Machine noise here is larger than the effect, so both designs pair the variants closely:
- regression (default network, batch 256, one torch thread): one process per repeat trains
  42 epochs with checks on in even epochs and off in odd ones; seconds per training step
  (batch start to batch end) are the median over each variant's steps after epoch 2;
- PPO (``configs/ppo.yaml``'s model, without evaluation): one process per repeat trains
  the whole budget with checks on in even rollouts and off in odd ones; env steps per
  second are one rollout's steps over the median seconds of each variant's
  collect-and-update cycles after the fourth.
The switch is jaxtyping's own ``jaxtyping_disable``, the one ``JAXTYPING_DISABLE=1`` sets;
flipping it in one process keeps both variants on the same machine state. The target is
judged on the median over repeats of each repeat's on/off ratio (the paired estimate); the
medians of each variant and their ratio are printed too.

``call`` measures what a remembered verdict adds to one call (target: at most 2 µs).

Usage: ``python bench/check_overhead.py PROJECT_DIR PACKAGE [REPEATS [EXAMPLE...]]``
with EXAMPLE ``regression``, ``ppo`` or ``call`` (``nox -s bench``).
"""

import importlib
import json
import statistics
import sys
import time
from pathlib import Path

import harness

TARGETS = {
    "regression": ("seconds_per_step", "<=", 1.01),
    "ppo": ("env_steps_per_second", ">=", 0.97),
}
CALL_TARGET_MICROSECONDS, CALL_ROUNDS, CALLS_PER_ROUND = 2.0, 201, 10_000


def call_overhead(package: str) -> float:
    """Microseconds that a remembered verdict adds to ``losses.mse_loss`` on two ``(256,)``
    tensors, against the bare function (``__wrapped__``). Both run in turn in each round
    (process CPU time, one torch thread); the figure is the median of the rounds'
    differences, which a shared machine's slow phases shift for both alike."""
    import timeit

    import torch

    losses = importlib.import_module(f"{package}.core.losses")
    torch.set_num_threads(1)
    prediction, target = torch.randn(256), torch.randn(256)
    checked, bare = losses.mse_loss, losses.mse_loss.__wrapped__
    checked(prediction, target)  # the full check; the timed calls reuse its verdict
    differences = []
    timers = [
        timeit.Timer(lambda f=f: f(prediction, target), timer=time.process_time)
        for f in (checked, bare)
    ]
    for _ in range(CALL_ROUNDS):
        on, off = (timer.timeit(CALLS_PER_ROUND) for timer in timers)
        differences.append((on - off) / CALLS_PER_ROUND * 1e6)
    return statistics.median(differences)


def regression_worker(package: str) -> dict:
    """Alternates checks on and off epoch by epoch in one process (the switch that
    ``JAXTYPING_DISABLE=1`` sets), so slow phases of a shared machine fall on both."""
    import jaxtyping
    import lightning as L
    import torch

    regression = importlib.import_module(f"{package}.regression")
    torch.set_num_threads(1)  # as PPO does: on a shared 2-core machine, 2 threads are noise

    class AlternatingClock(L.Callback):
        def __init__(self) -> None:
            self.seconds: dict[bool, list[float]] = {True: [], False: []}

        def on_train_epoch_start(self, trainer, pl_module) -> None:
            self.checks = trainer.current_epoch % 2 == 0
            jaxtyping.config.update("jaxtyping_disable", not self.checks)

        def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
            self.started = time.perf_counter()

        def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
            if trainer.current_epoch >= 2:  # the first two pay for warm-up and first checks
                self.seconds[self.checks].append(time.perf_counter() - self.started)

    L.seed_everything(0, verbose=False)
    data = regression.RegressionData(batch_size=256)
    model = regression.RegressionModule(
        num_features=data.num_features, target_mean=data.target_mean, target_std=data.target_std
    )
    clock = AlternatingClock()
    trainer = L.Trainer(
        max_epochs=42,
        limit_val_batches=0,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        callbacks=[clock],
    )
    trainer.fit(model, data)
    return {
        "on": statistics.median(clock.seconds[True]),
        "off": statistics.median(clock.seconds[False]),
    }


def ppo_worker(package: str, root: str) -> dict:
    """Alternates checks on and off rollout by rollout in one run of the default config.
    A cycle is one rollout's collection and its update, timed from one training batch's
    end to the next (the stream collects the next rollout in between)."""
    import jaxtyping
    import lightning as L
    import yaml

    ppo = importlib.import_module(f"{package}.ppo.module")
    tuned = yaml.safe_load(Path("configs/ppo.yaml").read_text())["model"]  # cwd: the project

    class AlternatingClock(L.Callback):
        def __init__(self) -> None:
            self.seconds: dict[bool, list[float]] = {True: [], False: []}
            self.checks, self.last = True, 0.0

        def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
            now = time.perf_counter()
            if batch_idx >= 4:  # the first rollouts pay for warm-up and first checks
                self.seconds[self.checks].append(now - self.last)
            self.checks = batch_idx % 2 == 1
            jaxtyping.config.update("jaxtyping_disable", not self.checks)
            self.last = time.perf_counter()

    L.seed_everything(0, verbose=False)
    model = ppo.PPOModule(**{**tuned, "eval_every_env_steps": 0})
    clock = AlternatingClock()
    trainer = L.Trainer(
        max_epochs=1,
        accelerator="cpu",
        default_root_dir=root,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        callbacks=[clock],
    )
    trainer.fit(model)
    return {
        checks: model.rollout_size / statistics.median(clock.seconds[flag])
        for checks, flag in (("on", True), ("off", False))
    }


def _pair(project: Path, package: str, example: str) -> tuple[float, float]:
    root = project / "runs" / "overhead"
    command = [__file__, "--worker", example, package, str(root)]
    env = harness.environment(project)
    result = harness.worker(command, cwd=project, env=env, what=f"{example} worker")
    return result["on"], result["off"]


def main() -> None:
    if sys.argv[1] == "--worker":
        example, package, root = sys.argv[2:5]
        result = (
            regression_worker(package) if example == "regression" else ppo_worker(package, root)
        )
        print(json.dumps(result))
        return
    result = harness.Result("checks")
    project, package = Path(sys.argv[1]).resolve(), sys.argv[2]
    repeats = int(sys.argv[3]) if len(sys.argv) > 3 else 7
    examples = sys.argv[4:] or [*TARGETS, "call"]
    figures, details = [], {}
    for example in examples:
        if example == "call":
            sys.path.insert(0, str(project / "src"))  # an installed package works as well
            added = call_overhead(package)
            figures.append(
                harness.figure(
                    "call: a remembered check, added to mse_loss on two (256,) tensors",
                    added,
                    "µs",
                    at_most=CALL_TARGET_MICROSECONDS,
                )
            )
            met = "met" if added <= CALL_TARGET_MICROSECONDS else "MISSED"
            print(
                f"call: a remembered check adds {added:.2f} µs to mse_loss on two (256,) "
                f"tensors, median of {CALL_ROUNDS} rounds of {CALLS_PER_ROUND} calls "
                f"({met}: <= {CALL_TARGET_MICROSECONDS} µs)",
                flush=True,
            )
            continue
        key, direction, target = TARGETS[example]
        values: dict[bool, list[float]] = {True: [], False: []}
        for run in range(repeats):
            on, off = _pair(project, package, example)
            values[True].append(on)
            values[False].append(off)
            print(f"{example} repeat {run}: on {values[True][-1]:.4g}, off {values[False][-1]:.4g}")
        on, off = statistics.median(values[True]), statistics.median(values[False])
        paired = harness.paired(values[True], values[False])
        met = paired <= target if direction == "<=" else paired >= target
        bound = {"at_most": target} if direction == "<=" else {"at_least": target}
        figures += [
            harness.figure(f"{example}: {key}, checks on / off", paired, **bound),
            harness.figure(f"{example}: {key}, ratio of the medians", on / off),
        ]
        details[example] = {"on": values[True], "off": values[False]}
        print(
            f"{example}: median {key} checks on {on:.4g}, JAXTYPING_DISABLE=1 {off:.4g}; "
            f"median over {repeats} repeats of each repeat's on/off ratio {paired:.3f} "
            f"({'met' if met else 'MISSED'}: {direction} {target}); "
            f"ratio of the medians {on / off:.3f}",
            flush=True,
        )
    result.write(figures, torch_threads=1, details=details)


if __name__ == "__main__":
    main()
