"""Steady-state cost of the NonFiniteLocator, next to ``Trainer(detect_anomaly=True)``, and
the BroadcastGuard's cost while it is active (the example removes it after 50 steps).

The regression example (default network, batch 256, shape checks on) trains for a fixed
number of steps under each variant: no extra callback, the locator, autograd's anomaly
mode, and the broadcast guard kept on for every step. The clock starts after the warm-up
steps and stops after the last, synchronising the GPU at both ends when there is one. Each
repeat runs every variant, in rotated order so that machine noise falls on all; the report
is the median seconds per step over repeats and its ratio to the run without a callback.

Usage: ``python bench/guard_costs.py PROJECT_DIR PACKAGE [REPEATS]`` (``nox -s bench``).
"""

import importlib
import statistics
import sys
import time
import timeit
from pathlib import Path

import harness
import jaxtyping
import lightning as L
import torch

WARMUP_STEPS, TIMED_STEPS = 20, 200


class StepClock(L.Callback):
    """Seconds per optimizer step over steps ``WARMUP_STEPS`` to the end of the run."""

    def __init__(self) -> None:
        self.started = 0.0
        self.seconds_per_step = 0.0

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
        if trainer.global_step == WARMUP_STEPS and not self.started:
            harness.sync()
            self.started = time.perf_counter()

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        if trainer.global_step == WARMUP_STEPS + TIMED_STEPS:
            harness.sync()
            self.seconds_per_step = (time.perf_counter() - self.started) / TIMED_STEPS


def seconds_per_step(package: str, data: L.LightningDataModule, variant: str) -> float:
    regression = importlib.import_module(f"{package}.regression")
    guards = importlib.import_module(f"{package}.run.guards")
    L.seed_everything(0, verbose=False)
    model = regression.RegressionModule(
        num_features=data.num_features, target_mean=data.target_mean, target_std=data.target_std
    )
    clock = StepClock()  # first in the list: outermost around the other callbacks
    extra = {
        "NonFiniteLocator": [guards.NonFiniteLocator()],
        "BroadcastGuard on": [guards.BroadcastGuardCallback(steps=10**9)],
    }.get(variant, [])
    trainer = L.Trainer(
        max_steps=WARMUP_STEPS + TIMED_STEPS,
        limit_val_batches=0,
        detect_anomaly=variant == "detect_anomaly",
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        callbacks=[clock, *extra],
    )
    trainer.fit(model, data)
    return clock.seconds_per_step


def check_alone_microseconds(package: str, data: L.LightningDataModule) -> float:
    """The locator's per-step work on the example's real gradients, without training."""
    regression = importlib.import_module(f"{package}.regression")
    locator = importlib.import_module(f"{package}.run.guards").NonFiniteLocator()
    model = regression.RegressionModule(
        num_features=data.num_features, target_mean=data.target_mean, target_std=data.target_std
    )
    data.setup("fit")
    x, y = next(iter(data.train_dataloader()))
    loss = ((model(x) - y) ** 2).mean()
    loss.backward()
    trainer = L.Trainer(logger=False, enable_progress_bar=False, enable_model_summary=False)
    optimizer = torch.optim.SGD(model.parameters())

    def step() -> None:
        locator.on_before_backward(trainer, model, loss)
        locator.on_before_optimizer_step(trainer, model, optimizer)

    number = 2000
    best = min(timeit.repeat(step, number=number, repeat=5))
    return best / number * 1e6


def main() -> None:
    result = harness.Result("guards")
    project, package = Path(sys.argv[1]).resolve(), sys.argv[2]
    repeats = int(sys.argv[3]) if len(sys.argv) > 3 else 5
    sys.path.insert(0, str(project / "src"))  # an installed package works as well
    regression = importlib.import_module(f"{package}.regression")
    if jaxtyping.config.jaxtyping_disable:
        raise SystemExit("unset JAXTYPING_DISABLE: this benchmark runs with shape checks on")
    if not torch.cuda.is_available():
        torch.set_num_threads(1)  # a small MLP gains nothing from more; noise drops a lot
    data = regression.RegressionData(batch_size=256)
    variants = ["no callback", "NonFiniteLocator", "detect_anomaly", "BroadcastGuard on"]
    times: dict[str, list[float]] = {}
    for run, times in harness.turns(
        variants, repeats, lambda variant, _: seconds_per_step(package, data, variant)
    ):
        shown = ", ".join(f"{v} {times[v][-1] * 1e3:.3f}" for v in variants)
        print(f"repeat {run}: ms per step: {shown}", flush=True)
    baseline = statistics.median(times["no callback"])
    paired = {variant: harness.paired(times[variant], times["no callback"]) for variant in variants}
    device = torch.cuda.get_device_name() if torch.cuda.is_available() else "CPU, 1 thread"
    print(
        f"\nregression, batch 256, checks on, {device}: median over {repeats} repeats of "
        f"{TIMED_STEPS} steps after {WARMUP_STEPS} warm-up steps"
    )
    print(f"{'variant':<20}{'ms/step':>10}{'ratio':>8}{'paired ratio':>14}")
    for variant in variants:
        median = statistics.median(times[variant])
        print(
            f"{variant:<20}{median * 1e3:>10.3f}{median / baseline:>8.3f}{paired[variant]:>14.3f}"
        )
    print(
        "paired ratio: median over repeats of each run's time over the same repeat's run "
        "without a callback"
    )
    alone = check_alone_microseconds(package, data)
    print(f"the locator's check alone, on this model's gradients: {alone:.1f} us per step")
    figures = []
    for variant in variants:
        figures.append(harness.figure(variant, statistics.median(times[variant]) * 1e3, "ms/step"))
        if variant != "no callback":
            figures.append(harness.figure(f"{variant} / no callback", paired[variant]))
    figures.append(harness.figure("the locator's check alone", alone, "µs/step"))
    result.write(
        figures, torch_threads=torch.get_num_threads(), details={"device": device, **times}
    )


if __name__ == "__main__":
    main()
