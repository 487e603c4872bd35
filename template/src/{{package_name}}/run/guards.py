"""Lightning callbacks that put the guards into ``Trainer.fit``: add them to ``callbacks``.
Copy-paste: this file imports third-party packages, ``core/broadcast.py`` and ``shapes``."""

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import lightning as L
import torch
from lightning.pytorch.callbacks import Callback
from lightning.pytorch.utilities import move_data_to_device

from ..core.broadcast import BroadcastGuard, mark_buffer
from ..core.shapes import Float, Int, Scalar, Tensor, typechecked

__all__ = ["BroadcastGuardCallback", "NonFiniteError", "NonFiniteLocator"]


class BroadcastGuardCallback(Callback):
    """Guards the first ``steps`` training batches, then removes itself: a shape bug shows in
    the first steps, and the guard's Python-level overhead is then gone for good. Armed at each
    epoch's start, it also sees batches being fetched (PPO collects its rollout there) and any
    validation in between; backward runs in C++, unseen. Arming, it marks the module's buffers
    (made before any guard) with ``mark_buffer``."""

    def __init__(self, steps: int = 50) -> None:
        self.steps = steps
        self.guarded = 0
        self._guard: BroadcastGuard | None = None

    def on_train_epoch_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if self.guarded < self.steps and self._guard is None:
            for buffer in pl_module.buffers():
                mark_buffer(buffer)
            self._guard = BroadcastGuard()
            self._guard.__enter__()

    def on_train_batch_end(self, *_: Any) -> None:
        if self._guard is not None:
            self.guarded += 1
        if self.guarded >= self.steps:
            self._release()

    def _release(self, *args: Any, **kwargs: Any) -> None:
        if self._guard is not None:
            guard, self._guard = self._guard, None
            guard.__exit__(None, None, None)

    on_train_epoch_end = on_train_end = on_exception = _release


class NonFiniteError(RuntimeError):
    """A NaN or Inf in training; the message is the locator's report, its last line a summary."""


class NonFiniteLocator(Callback):
    """Stops training at the first non-finite loss or gradient and says where it came from.
    While training is finite it costs one fused gradient norm and one host sync per optimizer
    step. The check runs after backward and before the weights move, so they stay finite and no
    checkpoint follows the last good one. The report (also in ``nonfinite_report.txt``) names
    the first submodule whose output went non-finite in a replay of ``training_step``; the batch
    goes to ``nonfinite_batch.pt``. Under fp16 mixed precision infinite gradients are routine
    (the scaler skips those steps), so only the loss is checked there."""

    def __init__(self) -> None:
        self._batch, self._batch_idx = None, 0
        self._losses: list[tuple[int, Any, Tensor]] = []
        """(batch_idx, batch, loss) of each backward since the last optimizer step."""
        self._folder = Path()

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        # Here, not at the failure: log_dir is a collective call under DDP.
        self._folder = Path(trainer.log_dir or trainer.default_root_dir)

    def on_train_batch_start(
        self, trainer: L.Trainer, pl_module: L.LightningModule, batch: Any, batch_idx: int
    ) -> None:
        self._batch, self._batch_idx = batch, batch_idx

    def on_before_backward(
        self, trainer: L.Trainer, pl_module: L.LightningModule, loss: Scalar
    ) -> None:
        self._losses.append((self._batch_idx, self._batch, loss.detach()))

    def on_before_optimizer_step(
        self, trainer: L.Trainer, pl_module: L.LightningModule, optimizer: torch.optim.Optimizer
    ) -> None:
        losses, self._losses = self._losses, []
        scaled = getattr(trainer.precision_plugin, "scaler", None) is not None
        # The gradients this step applies, from the optimizer's own list: walking the
        # module tree for them cost as much as their norms.
        moved = [] if scaled else [p for group in optimizer.param_groups for p in group["params"]]
        grads = [p.grad for p in moved if p.grad is not None]
        norms = torch._foreach_norm(grads) if grads else []  # pyright: ignore[reportPrivateImportUsage]
        values = [loss for _, _, loss in losses] + list(norms)
        if not values or math.isfinite(torch.stack(values).sum().item()):
            return
        # The sum of huge finite gradient norms can overflow: confirm element-wise.
        names = {id(p): name for name, p in pl_module.named_parameters()}
        bad_grads = [
            names.get(id(p), "a parameter outside the module")
            for p in moved
            if p.grad is not None and not _all_finite(p.grad)
        ]
        bad_losses = [entry for entry in losses if not _all_finite(entry[2])]
        if bad_losses or (bad_grads and not scaled):
            suspects = bad_losses or losses or [(self._batch_idx, self._batch, values[0])]
            self._fail(trainer, suspects, bad_grads)

    def _fail(
        self, trainer: L.Trainer, suspects: list[tuple[int, Any, Tensor]], bad_grads: list[str]
    ) -> None:
        pl_module = trainer.lightning_module
        for suspect in suspects:  # more than one only under gradient accumulation
            batch_idx, batch, loss = suspect
            lines, culprit = _replay_forward(pl_module, batch, batch_idx)
            if culprit:
                break
        where = f"batch {batch_idx} of epoch {trainer.current_epoch}"
        bad_inputs = [_describe_tensor(t) for t in _tensors_in(batch) if not _all_finite(t)]
        bad_params = [name for name, p in pl_module.named_parameters() if not _all_finite(p)]
        lines = [
            f"NonFiniteLocator: non-finite values in {where} (global step {trainer.global_step})",
            f"loss: {float(loss):.6g}",
            *[f"the batch itself holds non-finite values: {text}" for text in bad_inputs],
            *lines,
            f"non-finite parameters: {_short_list(bad_params)}",
            f"parameters with non-finite gradients: {_short_list(bad_grads)}",
        ]
        if bad_inputs:
            culprit = "non-finite input data"
        elif not culprit and not _all_finite(loss):
            culprit = "non-finite loss"
        elif not culprit:
            culprit = f"non-finite gradient in {_short_list(bad_grads, limit=1)}"
        self._folder.mkdir(parents=True, exist_ok=True)
        rank = f"_rank{trainer.global_rank}" if trainer.world_size > 1 else ""
        batch_path = self._folder / f"nonfinite_batch{rank}.pt"
        report = "\n".join([*lines, f"{culprit} in {where}; batch saved to {batch_path}"])
        (self._folder / f"nonfinite_report{rank}.txt").write_text(report + "\n")
        saved = {"batch": move_data_to_device(batch, "cpu"), "batch_idx": batch_idx}
        saved |= {"epoch": trainer.current_epoch, "global_step": trainer.global_step}
        torch.save(saved | {"report": report}, batch_path)
        raise NonFiniteError(report)


class _FirstNonFinite(Exception):
    """Raised by a forward hook, with report lines and the culprit, to end the replay."""


def _replay_forward(model: L.LightningModule, batch: Any, batch_idx: int) -> tuple[list[str], str]:
    """Re-run ``training_step`` without gradients or logging, with a hook on every submodule;
    the first module to return a non-finite tensor ends it. Hooks fire as modules finish, so
    the first is the innermost. Returns report lines and the culprit ("" if none)."""
    if not model.automatic_optimization:
        return ["no forward replay: under manual optimization training_step steps itself"], ""

    def hook(name: str) -> Callable[..., None]:
        def check(module: torch.nn.Module, args: tuple, kwargs: dict, output: object) -> None:
            outputs = _tensors_in(output)
            if not all(_all_finite(t) for t in outputs):
                named = f"{name} ({type(module).__name__})"
                inputs = _tensors_in([args, kwargs])
                lines = [f"first non-finite output in the forward replay: {named}"]
                lines += [f"  input {i}: {_describe_tensor(t)}" for i, t in enumerate(inputs)]
                lines += [f"  output {i}: {_describe_tensor(t)}" for i, t in enumerate(outputs)]
                if not all(_all_finite(t) for t in inputs):
                    lines.append(
                        "  its inputs were already non-finite: bad data, or code between modules"
                    )
                raise _FirstNonFinite(lines, f"non-finite output first at {named}")

        return check

    modules = [(name, module) for name, module in model.named_modules() if name]
    handles = [each.register_forward_hook(hook(name), with_kwargs=True) for name, each in modules]
    # A replay must not log: instance attributes shadow ``log`` and ``log_dict``.
    model.log = model.log_dict = lambda *args, **kwargs: None  # type: ignore[method-assign]
    try:
        with torch.no_grad():
            result = model.training_step(batch, batch_idx)
    except _FirstNonFinite as found:
        return found.args
    except Exception as error:  # a failed replay must not hide the report
        return [f"the forward replay failed: {error!r}"], ""
    finally:
        del model.log, model.log_dict
        for handle in handles:
            handle.remove()
    if not all(_all_finite(t) for t in _tensors_in(result)):
        return ["every submodule's output was finite; the loss computation was not"], ""
    return ["the forward replay stayed finite: the values went bad in backward"], ""


def _tensors_in(value: object) -> list[Tensor]:
    """The floating and integer tensors in nested tuples, lists and dicts, in order."""
    if isinstance(value, Tensor):
        return [] if value.dtype == torch.bool or value.is_complex() else [value]
    if isinstance(value, dict):
        value = list(value.values())
    if isinstance(value, list | tuple):
        return [tensor for item in value for tensor in _tensors_in(item)]
    return []


@typechecked
def _all_finite(tensor: Float[Tensor, "*shape"] | Int[Tensor, "*shape"]) -> bool:
    return not tensor.is_floating_point() or bool(tensor.isfinite().all())


@typechecked
def _describe_tensor(tensor: Float[Tensor, "*shape"] | Int[Tensor, "*shape"]) -> str:
    """Dtype, shape, range of the finite entries, and the NaN and Inf counts."""
    finite = tensor[tensor.isfinite()]
    spread = (
        f"min {finite.min():.4g}, max {finite.max():.4g}" if finite.numel() else "no finite values"
    )
    counts = f"{int(tensor.isnan().sum())} NaN, {int(tensor.isinf().sum())} Inf"
    return f"{str(tensor.dtype).removeprefix('torch.')} {tuple(tensor.shape)}, {spread}, {counts}"


def _short_list(names: list[str], limit: int = 8) -> str:
    more = f" and {len(names) - limit} more" if len(names) > limit else ""
    return ", ".join(names[:limit]) + more if names else "none"
