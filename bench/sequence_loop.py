"""The sequence example's cost per optimizer step against a plain PyTorch loop, and against
Lightning's ``Trainer(barebones=True)`` on the same work.

Ours is the example's own command, ``fit --config configs/sequence.yaml``, checks on: its
``train_seconds / global_step`` from ``summary.json``, which includes validation every
epoch, the guard, the NonFiniteLocator, logging and the checkpoints.

The raw loop trains the same ``SequenceClassifier`` (the same seed, so the same weights) on
the data module's own batches: AdamW with the cosine schedule stepped per optimizer step,
the same epochs, validation accuracy every epoch, no Lightning. The floor is that work run
by ``Trainer(barebones=True)``: the example's module with its logging calls taken out, no
logger, checkpoint, callback or check. Both run with ``JAXTYPING_DISABLE=1``.

Each run is a fresh process with one torch thread; the sides take turns, and the figures
are medians over repeats of each repeat's ratio.

Usage: ``python bench/sequence_loop.py PROJECT_DIR PACKAGE [REPEATS]`` (``nox -s bench --
sequence``).
"""

import importlib
import json
import statistics
import sys
import time
from pathlib import Path

import harness

SIDES = ["raw", "floor", "ours"]
CONFIG = "configs/sequence.yaml"
EPOCHS, SEED = 40, 0
MODEL = {"width": 64, "heads": 4, "layers": 2, "dropout": 0.1}
LEARNING_RATE, WEIGHT_DECAY = 1e-3, 0.01


def _parts(package: str):
    """The shipped data module and a fresh model built from it, seeded as a fit seeds it."""
    import lightning as L
    import torch

    sequence = importlib.import_module(f"{package}.sequence")
    torch.set_num_threads(1)
    L.seed_everything(SEED, verbose=False)
    data = sequence.SequenceData()
    linked = {
        name: getattr(data, name)
        for name in ("num_features", "classes", "feature_mean", "feature_std", "feature_columns")
    }
    return sequence.SequenceClassifier, data, linked


def raw_worker(package: str) -> dict:
    import torch
    import torch.nn.functional as F

    model_class, data, linked = _parts(package)
    model = model_class(**linked, **MODEL)
    train, val = data.train_dataloader(), data.val_dataloader()
    optimizer = torch.optim.AdamW(model.parameters(), lr=LEARNING_RATE, weight_decay=WEIGHT_DECAY)
    schedule = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=EPOCHS * len(train))
    accuracy, steps = float("nan"), 0
    started = time.perf_counter()
    for epoch in range(EPOCHS):
        model.train()
        train.sampler.set_epoch(epoch)
        for features, keep, labels in train:
            loss = F.cross_entropy(model(features, keep), labels)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            schedule.step()
            steps += 1
        model.eval()
        with torch.no_grad():
            correct = [
                (model(features, keep).argmax(dim=-1) == labels).double()
                for features, keep, labels in val
            ]
        accuracy = float(torch.cat(correct).mean())
    seconds = time.perf_counter() - started
    return {"seconds_per_step": seconds / steps, "val_accuracy": accuracy}


def floor_worker(package: str) -> dict:
    import lightning as L
    import torch
    import torch.nn.functional as F

    model_class, data, linked = _parts(package)

    class Floor(harness.TrainClock, model_class):
        """The example's module without its ``self.log`` calls, which barebones refuses."""

        def training_step(self, batch, batch_idx):
            features, keep, labels = batch
            return F.cross_entropy(self(features, keep), labels)

        def on_validation_epoch_start(self) -> None:
            self.correct: list[torch.Tensor] = []

        def validation_step(self, batch, batch_idx):
            features, keep, labels = batch
            self.correct.append((self(features, keep).argmax(dim=-1) == labels).double())

        def on_validation_epoch_end(self) -> None:
            self.accuracy = float(torch.cat(self.correct).mean())

    model = Floor(**linked, **MODEL, learning_rate=LEARNING_RATE, weight_decay=WEIGHT_DECAY)
    trainer = L.Trainer(
        barebones=True, max_epochs=EPOCHS, accelerator="cpu", devices=1, num_sanity_val_steps=0
    )
    trainer.fit(model, data.train_dataloader(), data.val_dataloader())
    return {"seconds_per_step": model.seconds / trainer.global_step, "val_accuracy": model.accuracy}


def ours_worker(package: str, root: str) -> dict:
    import torch

    cli = importlib.import_module(f"{package}.sequence.__main__")
    torch.set_num_threads(1)
    cli.main(["fit", f"--config={CONFIG}", f"--trainer.default_root_dir={root}"])
    summary = harness.summary(Path(root))
    return {
        "seconds_per_step": summary["train_seconds"] / summary["global_step"],
        "val_accuracy": summary["val_accuracy"],
    }


def main() -> None:
    if sys.argv[1] == "--worker":
        side, package, root = sys.argv[2:5]
        workers = {"raw": raw_worker, "floor": floor_worker}
        result = ours_worker(package, root) if side == "ours" else workers[side](package)
        print(json.dumps(result))
        return
    result = harness.Result("sequence")
    project, package = Path(sys.argv[1]).resolve(), sys.argv[2]
    repeats = int(sys.argv[3]) if len(sys.argv) > 3 else 5

    def measure(side: str, repeat: int) -> dict:
        root = project / "runs" / "sequence-loop" / f"{repeat}-{side}"
        command = [__file__, "--worker", side, package, str(root)]
        env = harness.one_thread(project, checks=side == "ours")
        return harness.worker(command, cwd=project, env=env, what=f"{side} worker")

    results: dict[str, list[dict]] = {}
    for repeat, results in harness.turns(SIDES, repeats, measure):
        print(
            f"  repeat {repeat}: ms/step "
            + ", ".join(f"{s} {results[s][-1]['seconds_per_step'] * 1e3:.2f}" for s in SIDES)
            + " (val_accuracy "
            + ", ".join(f"{s} {results[s][-1]['val_accuracy']:.4f}" for s in SIDES)
            + ")",
            flush=True,
        )

    def ratio(side: str, base: str) -> float:
        return harness.paired(results[side], results[base], key="seconds_per_step")

    medians = {s: statistics.median(r["seconds_per_step"] for r in results[s]) for s in SIDES}
    ratios = {pair: ratio(*pair) for pair in (("ours", "raw"), ("ours", "floor"), ("floor", "raw"))}
    print(
        "sequence step: median ms "
        + ", ".join(f"{s} {medians[s] * 1e3:.2f}" for s in SIDES)
        + "; median ratios "
        + ", ".join(f"{top}/{bottom} {value:.2f}" for (top, bottom), value in ratios.items())
    )
    accuracy = statistics.median(run["val_accuracy"] for run in results["ours"])
    result.write(
        [
            *(harness.figure(side, medians[side] * 1e3, "ms/step") for side in SIDES),
            *(
                harness.figure(f"{top} / {bottom}", value)
                for (top, bottom), value in ratios.items()
            ),
            harness.figure("ours: val_accuracy", accuracy),
        ],
        torch_threads=1,
        details=results,
    )


if __name__ == "__main__":
    main()
