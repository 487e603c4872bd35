"""The regression example's cost per optimizer step against a plain PyTorch loop, and at scale.

Ours is the example's own command, ``fit --config configs/regression.yaml`` with the
TensorBoard logger named on the command line, checks on: its ``train_seconds /
global_step`` from ``summary.json``. That includes validation every epoch, the guard, the
NonFiniteLocator, logging and the checkpoints that ``--ckpt_path last`` needs.

The raw loop is what the same math costs in plain PyTorch: the same synthetic rows, split
and standardisation, the same ``ScalarMLP``, AdamW with a cosine schedule stepped per
optimizer step, the same epochs and batch of 256, batches sliced from a random permutation
(no ``DataLoader``), validation R² every epoch in batches of 256. "No checks" means
``JAXTYPING_DISABLE=1``: the typed ``ScalarMLP`` is used as it is, and its decorator steps
aside (a flag test per call, under a microsecond).

The floor is the raw loop's math, data and batches run by Lightning's
``Trainer(barebones=True)``: no logger, checkpoint, callback or check. Its ratio to the raw
loop is what Lightning's own loop costs per optimizer step; where it is above the target,
no example trained by ``Trainer.fit`` one batch per step can meet the target.

Each run is a fresh process with one torch thread (``OMP_NUM_THREADS=1``), and the three
take turns, so a slow phase of a shared machine falls on each; the figures are medians over
repeats of each repeat's ratio. At 10^4, 10^5 and 10^6 rows (fewer epochs, the same on
every side) it also prints rows per second and the peak resident memory's growth over the
process's own baseline: the peak is reset through ``/proc/self/clear_refs`` after every
import the run needs and before the data is made, and read from ``VmHWM`` at the end, in
the process that trains. It is judged against twice the float32 data tensors (rows times
features plus target, 4 bytes each).

Usage: ``python bench/regression_loop.py PROJECT_DIR PACKAGE [REPEATS]`` (``nox -s bench -- loop``).
"""

import importlib
import json
import math
import statistics
import sys
import time
from pathlib import Path

import harness

RATIO_TARGET, MEMORY_TARGET = 1.3, 2.0
FLOOR_TARGET = 1.10
"""Ours against Lightning's floor on the same batched work."""
BATCH, FEATURES, VAL_FRACTION, SEED = 256, 8, 0.2, 0
DEFAULT_ROWS, DEFAULT_EPOCHS = 8192, 40
SCALES = {10**4: 10, 10**5: 2, 10**6: 1}  # rows: epochs, on every side
SIDES = ["raw", "floor", "ours"]


def _status_kib(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1])
    raise RuntimeError(f"/proc/self/status has no {field}")


def _reset_peak() -> int:
    """Reset this process's peak resident memory to its current one; return that, bytes."""
    Path("/proc/self/clear_refs").write_text("5")  # Linux: VmHWM := VmRSS
    return _status_kib("VmRSS") * 1024


def _peak_growth(baseline: int) -> int:
    return _status_kib("VmHWM") * 1024 - baseline


def _prepared(package: str, rows: int) -> tuple:
    """The raw loop's data: split, standardised and copied per split, as a plain script
    would; and the process's resident memory before it was made."""
    import torch

    synthetic = importlib.import_module(f"{package}.regression.data")
    torch.set_num_threads(1)
    baseline = _reset_peak()

    x, y = synthetic.make_synthetic_regression(rows, FEATURES, 0.1, SEED)
    order = torch.randperm(rows, generator=torch.Generator().manual_seed(SEED))
    num_val = max(1, round(VAL_FRACTION * rows))
    train_rows, val_rows = order[num_val:], order[:num_val]
    x_train = x[train_rows]
    mean, std = x_train.mean(dim=0), x_train.std(dim=0)
    x_train, x_val = (x_train - mean) / std, (x[val_rows] - mean) / std
    y_train, y_val = y[train_rows], y[val_rows]
    del x, y, order
    return x_train, y_train, x_val, y_val, baseline


def raw_worker(package: str, rows: int, epochs: int) -> dict:
    import torch
    import torch.nn.functional as F

    nets = importlib.import_module(f"{package}.core.nets")
    x_train, y_train, x_val, y_val, baseline = _prepared(package, rows)
    y_mean, y_std = float(y_train.mean()), float(y_train.std())

    torch.manual_seed(SEED)
    net = nets.ScalarMLP(FEATURES, (128, 128), "silu")
    steps_per_epoch = math.ceil(len(y_train) / BATCH)
    optimizer = torch.optim.AdamW(net.parameters(), lr=3e-3, weight_decay=0.0)
    schedule = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=epochs * steps_per_epoch)

    started = time.perf_counter()
    for epoch in range(epochs):
        net.train()
        permutation = torch.randperm(
            len(y_train), generator=torch.Generator().manual_seed(SEED + epoch)
        )
        for start in range(0, len(y_train), BATCH):
            batch = permutation[start : start + BATCH]
            loss = F.mse_loss(net(x_train[batch]), (y_train[batch] - y_mean) / y_std)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            schedule.step()
        net.eval()
        with torch.no_grad():
            predictions = [
                net(x_val[start : start + BATCH]) * y_std + y_mean
                for start in range(0, len(y_val), BATCH)
            ]
            residual = ((torch.cat(predictions) - y_val) ** 2).sum()
            r2 = float(1 - residual / ((y_val - y_val.mean()) ** 2).sum())
    seconds = time.perf_counter() - started
    return {
        "seconds_per_step": seconds / (epochs * steps_per_epoch),
        "rows_per_second": epochs * len(y_train) / seconds,
        "val_r2": r2,
        "peak_growth": _peak_growth(baseline),
    }


def floor_worker(package: str, rows: int, epochs: int) -> dict:
    """The raw loop's math, data and batches run by Lightning's ``Trainer(barebones=True)``:
    no logger, checkpoint, callback, progress bar or check. What remains over the raw loop
    is the cost of Lightning's own loop (its hooks, closure and optimizer wrapper), which
    any example trained by ``Trainer.fit`` pays on every optimizer step."""
    import lightning as L
    import torch
    import torch.nn.functional as F

    nets = importlib.import_module(f"{package}.core.nets")
    x_train, y_train, x_val, y_val, baseline = _prepared(package, rows)
    y_mean, y_std = float(y_train.mean()), float(y_train.std())
    steps_per_epoch = math.ceil(len(y_train) / BATCH)

    class Batches:
        """The raw loop's batches: slices of a seeded permutation, a new one each epoch."""

        def __init__(self, x: torch.Tensor, y: torch.Tensor, shuffle: bool) -> None:
            self.x, self.y, self.shuffle, self.epoch = x, y, shuffle, 0

        def __len__(self) -> int:
            return math.ceil(len(self.y) / BATCH)

        def __iter__(self):
            generator = torch.Generator().manual_seed(SEED + self.epoch)
            self.epoch += 1
            order = (
                torch.randperm(len(self.y), generator=generator)
                if self.shuffle
                else torch.arange(len(self.y))
            )
            for start in range(0, len(self.y), BATCH):
                batch = order[start : start + BATCH]
                yield self.x[batch], self.y[batch]

    class Floor(harness.TrainClock, L.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            torch.manual_seed(SEED)
            self.net = nets.ScalarMLP(FEATURES, (128, 128), "silu")
            self.predictions: list[torch.Tensor] = []
            self.r2 = float("nan")

        def training_step(self, batch, batch_idx):
            x, y = batch
            return F.mse_loss(self.net(x), (y - y_mean) / y_std)

        def validation_step(self, batch, batch_idx):
            self.predictions.append(self.net(batch[0]) * y_std + y_mean)

        def on_validation_epoch_end(self) -> None:
            residual = ((torch.cat(self.predictions) - y_val) ** 2).sum()
            self.predictions.clear()
            self.r2 = float(1 - residual / ((y_val - y_val.mean()) ** 2).sum())

        def configure_optimizers(self):
            optimizer = torch.optim.AdamW(self.parameters(), lr=3e-3, weight_decay=0.0)
            schedule = torch.optim.lr_scheduler.CosineAnnealingLR(
                optimizer, T_max=epochs * steps_per_epoch
            )
            return {
                "optimizer": optimizer,
                "lr_scheduler": {"scheduler": schedule, "interval": "step"},
            }

    module = Floor()
    trainer = L.Trainer(
        barebones=True, max_epochs=epochs, accelerator="cpu", devices=1, num_sanity_val_steps=0
    )
    trainer.fit(module, Batches(x_train, y_train, True), Batches(x_val, y_val, False))
    return {
        "seconds_per_step": module.seconds / trainer.global_step,
        "rows_per_second": epochs * len(y_train) / module.seconds,
        "val_r2": module.r2,
        "peak_growth": _peak_growth(baseline),
    }


def ours_worker(package: str, rows: int, epochs: int, root: str) -> dict:
    import lightning.pytorch.loggers  # noqa: F401  (every import before the baseline)
    import torch
    import torch.utils.tensorboard  # noqa: F401

    cli = importlib.import_module(f"{package}.regression.__main__")
    torch.set_num_threads(1)
    baseline = _reset_peak()
    cli.main(
        [
            "fit",
            "--config=configs/regression.yaml",
            f"--data.synthetic_samples={rows}",
            f"--trainer.max_epochs={epochs}",
            f"--trainer.default_root_dir={root}",
            "--trainer.logger=lightning.pytorch.loggers.TensorBoardLogger",
            f"--trainer.logger.save_dir={root}",
        ]
    )
    growth = _peak_growth(baseline)
    summary = harness.summary(Path(root))
    train_rows = rows - max(1, round(VAL_FRACTION * rows))
    return {
        "seconds_per_step": summary["train_seconds"] / summary["global_step"],
        "rows_per_second": summary["epochs"] * train_rows / summary["train_seconds"],
        "val_r2": summary["val_r2"],
        "peak_growth": growth,
    }


def compare(
    project: Path, package: str, rows: int, epochs: int, repeats: int
) -> tuple[list[dict], dict[str, list[dict]]]:
    """The figures at ``rows`` rows, and each side's runs."""

    def measure(side: str, repeat: int) -> dict:
        root = project / "runs" / "loop" / f"{rows}-{repeat}-{side}"
        command = [__file__, "--worker", side, package, str(rows), str(epochs), str(root)]
        env = harness.one_thread(project, checks=side == "ours")
        return harness.worker(command, cwd=project, env=env, what=f"{side} worker")

    results: dict[str, list[dict]] = {}
    for repeat, results in harness.turns(SIDES, repeats, measure):
        raw = results["raw"][-1]["seconds_per_step"]
        print(
            f"  {rows} rows, {epochs} epochs, repeat {repeat}: ms/step "
            + ", ".join(
                f"{side} {results[side][-1]['seconds_per_step'] * 1e3:.3f}" for side in SIDES
            )
            + "; ratio to raw "
            + ", ".join(
                f"{side} {results[side][-1]['seconds_per_step'] / raw:.2f}" for side in SIDES[1:]
            )
            + " (val R² "
            + ", ".join(f"{side} {results[side][-1]['val_r2']:.3f}" for side in SIDES)
            + ")",
            flush=True,
        )

    def median(side: str, key: str) -> float:
        return statistics.median(result[key] for result in results[side])

    def ratio(side: str, base: str = "raw") -> float:
        return harness.paired(results[side], results[base], key="seconds_per_step")

    met = "met" if ratio("ours") <= RATIO_TARGET else "MISSED"
    floor = ratio("floor")
    data_bytes = rows * (FEATURES + 1) * 4
    print(
        f"{rows} rows: median ms/step "
        + ", ".join(f"{side} {median(side, 'seconds_per_step') * 1e3:.3f}" for side in SIDES)
        + f"; median ratio ours/raw {ratio('ours'):.2f} ({met}: <= {RATIO_TARGET}), "
        f"Lightning's floor/raw {floor:.2f}"
        + (f" (above {RATIO_TARGET}: no Trainer.fit loop meets it)" if floor > RATIO_TARGET else "")
        + "; rows/s "
        + ", ".join(f"{side} {median(side, 'rows_per_second'):,.0f}" for side in SIDES),
        flush=True,
    )
    over_floor = ratio("ours", "floor")
    met = "met" if over_floor <= FLOOR_TARGET else "MISSED"
    print(f"{rows} rows: median ratio ours/floor {over_floor:.2f} ({met}: <= {FLOOR_TARGET})")
    figures = [
        *(
            harness.figure(
                f"{rows} rows: {side}", median(side, "seconds_per_step") * 1e3, "ms/step"
            )
            for side in SIDES
        ),
        harness.figure(f"{rows} rows: ours / raw", ratio("ours"), at_most=RATIO_TARGET),
        harness.figure(f"{rows} rows: floor / raw", floor),
        harness.figure(f"{rows} rows: ours / floor", over_floor, at_most=FLOOR_TARGET),
    ]
    if rows >= 10**4:
        growth = {side: median(side, "peak_growth") for side in results}
        judged = rows >= 10**5
        met = growth["ours"] <= MEMORY_TARGET * data_bytes
        figures += [
            harness.figure(f"{rows} rows: ours, peak memory growth", growth["ours"] / 2**20, "MiB"),
            harness.figure(
                f"{rows} rows: ours, peak memory growth / float32 data",
                growth["ours"] / data_bytes,
                at_most=MEMORY_TARGET if judged else None,
            ),
        ]
        print(
            f"{rows} rows: peak RSS growth ours {growth['ours'] / 2**20:.1f} MiB, raw "
            f"{growth['raw'] / 2**20:.1f} MiB, floor {growth['floor'] / 2**20:.1f} MiB; "
            f"float32 data {data_bytes / 2**20:.1f} MiB; "
            f"ours/data {growth['ours'] / data_bytes:.2f}"
            + (f" ({'met' if met else 'MISSED'}: <= {MEMORY_TARGET})" if judged else ""),
            flush=True,
        )
    return figures, results


def main() -> None:
    if sys.argv[1] == "--worker":
        side, package, rows, epochs, root = sys.argv[2:7]
        if side == "ours":
            result = ours_worker(package, int(rows), int(epochs), root)
        else:
            worker = raw_worker if side == "raw" else floor_worker
            result = worker(package, int(rows), int(epochs))
        print(json.dumps(result))
        return
    result = harness.Result("loop")
    project, package = Path(sys.argv[1]).resolve(), sys.argv[2]
    repeats = int(sys.argv[3]) if len(sys.argv) > 3 else 5
    scales = [int(rows) for rows in sys.argv[4:]] or [DEFAULT_ROWS, *SCALES]
    figures, details = [], {}
    for rows in scales:
        epochs = SCALES.get(rows, DEFAULT_EPOCHS)
        shown, runs = compare(
            project, package, rows, epochs, repeats if rows == DEFAULT_ROWS else 3
        )
        figures += shown
        details[str(rows)] = runs
    result.write(figures, torch_threads=1, details=details)


if __name__ == "__main__":
    main()
