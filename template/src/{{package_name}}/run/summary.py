"""A callback that ends every ``fit`` with a short printed summary and ``summary.json`` in
the run's log directory, so a script can read a run's outcome without parsing logs.
Another callback adds keys with a ``summary_extras(trainer, pl_module)`` method (PPO's
reporting does)."""

import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import lightning as L
import torch
from lightning.pytorch.callbacks import Callback, ModelCheckpoint


class RunSummary(Callback):
    def __init__(self, metrics: Sequence[str] = ("val_loss",)) -> None:
        """``metrics``: the logged values to report, as last logged."""
        self.metrics = list(metrics)
        self.train_seconds = 0.0

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._train_start = time.perf_counter()

    def on_train_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self.train_seconds = time.perf_counter() - self._train_start

    def on_fit_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        log_dir = Path(trainer.log_dir or trainer.default_root_dir)  # a collective under DDP
        if not trainer.is_global_zero:
            return
        logged = trainer.callback_metrics
        summary: dict[str, Any] = dict.fromkeys(self.metrics)
        summary |= {name: float(logged[name]) for name in self.metrics if name in logged}
        summary |= {
            "train_seconds": round(self.train_seconds, 3),
            "epochs": trainer.current_epoch,
            "global_step": trainer.global_step,
            "processes": trainer.world_size,
            "torch_threads": torch.get_num_threads(),
        }
        if trainer.ckpt_path:
            summary["resumed_from"] = str(trainer.ckpt_path)
        for callback in trainer.callbacks:  # type: ignore[attr-defined]
            extras = getattr(callback, "summary_extras", None)
            if callable(extras) and isinstance(values := extras(trainer, pl_module), dict):
                summary.update(values)
        checkpoint = trainer.checkpoint_callback
        if isinstance(checkpoint, ModelCheckpoint) and checkpoint.best_model_path:
            summary["best_checkpoint"] = checkpoint.best_model_path
        summary["log_dir"] = str(log_dir)
        log_dir.mkdir(parents=True, exist_ok=True)
        (log_dir / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")

        shown = "  ".join(
            f"{name} {value:.4g}"
            for name, value in summary.items()
            if isinstance(value, float) and name != "train_seconds"
        )
        print(
            f"\n{type(pl_module).__name__}: {shown}\n"
            f"{summary['epochs']} epochs, {summary['global_step']} steps "
            f"in {summary['train_seconds']:.1f} s of training\n"
            f"logs and summary.json: {log_dir}"
        )
