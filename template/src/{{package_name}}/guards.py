"""Runtime guards for mistakes that annotations cannot see.

Copy-paste: this file imports only third-party packages and ``shapes``.

Annotations check function boundaries only: ``((pred - target) ** 2).mean()`` inside an
untyped helper still turns ``(N, 1)`` and ``(N,)`` into ``(N, N)``. :class:`BroadcastGuard`
watches every elementwise operation instead, and raises :class:`BroadcastError` when one
stretches *both* operands, which is almost never meant. One-sided broadcasting (a bias, a
scalar, a ``(N, 1)`` column, an attention mask) passes. ``einsum``, ``matmul`` and
``torch.outer`` are never checked: an outer product should say so.

The examples' full training steps (data, forward, loss, optimizer, validation) raise no
false alarm, which their tests check; :class:`BroadcastGuardCallback` removes the guard
after a few steps, so its steady-state cost is zero.

:class:`NonFiniteLocator` costs one fused gradient norm per optimizer step until a loss or
gradient is NaN or Inf; then it replays the batch with a hook on every submodule, names the
first module whose output went non-finite, saves the batch beside the logs and raises
:class:`NonFiniteError` before the optimizer step, so no checkpoint holds broken weights.
"""

import linecache
import math
import os
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import Any

import lightning as L
import torch
from lightning.pytorch.callbacks import Callback
from lightning.pytorch.utilities import move_data_to_device
from torch.overrides import TorchFunctionMode

from .shapes import Float, Int, Scalar, Tensor, typechecked

__all__ = [
    "BroadcastError",
    "BroadcastGuard",
    "BroadcastGuardCallback",
    "NonFiniteError",
    "NonFiniteLocator",
]

_TORCH_DIR = os.path.dirname(torch.__file__) + os.sep
_HINT = (
    "Make the shapes agree with einops.rearrange; for an intended outer product use "
    "einsum, torch.outer or an explicit expand."
)
_ALIASES = {
    "and": "bitwise_and",
    "or": "bitwise_or",
    "xor": "bitwise_xor",
    "lshift": "__lshift__",
    "rshift": "__rshift__",
    "floordiv": "floor_divide",
    "truediv": "div",
    "mod": "remainder",
}
_ALSO_ELEMENTWISE = {"floor_divide", "broadcast_tensors"}
"""Broadcasting aten ops that lack the ``pointwise`` tag. ``broadcast_tensors`` is what
``torch.distributions`` calls on its parameters, so ``Normal(loc (N, 1), scale (N,))`` fails."""
_STRETCHED_BY_DESIGN = {("categorical.py", "log_prob")}
"""torch functions that stretch both operands on purpose: ``Categorical.log_prob`` pairs
indices ``(*sample, *batch, 1)`` with the class axis of logits ``(*batch, class)``."""
_LOSS_OPERANDS: dict[str, tuple[str, ...]] = {
    name: ("input", "target")
    for name in (
        "mse_loss",
        "l1_loss",
        "smooth_l1_loss",
        "huber_loss",
        "binary_cross_entropy",
        "binary_cross_entropy_with_logits",
        "gaussian_nll_loss",
        "poisson_nll_loss",
        "kl_div",
        "soft_margin_loss",
        "hinge_embedding_loss",
    )
} | {"margin_ranking_loss": ("input1", "input2", "target")}
"""``torch.nn.functional`` losses that broadcast internally, with the arguments that must
agree. Their inner ops run with the guard popped, so they are checked at this level.
Weights and variances (``weight``, ``var``, ``pos_weight``) may broadcast one-sidedly."""

_Operands = tuple[str, ...] | bool
"""What to check in a call: False nothing, True every tensor argument, or the named ones."""
_CLASSIFIED: dict[Callable[..., Any], _Operands] = {}
"""The ``_Operands`` of each function seen so far; every torch call looks itself up here."""


class BroadcastError(ValueError):
    """An elementwise operation stretched every operand to a shape none of them had."""


def _aten_name(name: str) -> str:
    """The aten op behind a Python-level name: ``__rsub__`` -> ``rsub``, ``add_`` -> ``add``."""
    if name.startswith("__") and name.endswith("__"):
        core = name[2:-2]
        if core not in _ALIASES and not hasattr(torch.ops.aten, core) and core[:1] in "ri":
            core = core[1:]  # reflected (__radd__) or in-place (__iand__) operator
        return _ALIASES.get(core, core)
    return name.removesuffix("_")


def _is_elementwise(func: Callable[..., Any]) -> bool:
    """Whether ``func`` broadcasts its tensor arguments against each other, by aten's tags."""
    name = _aten_name(getattr(func, "__name__", ""))
    if name in _ALSO_ELEMENTWISE:
        return True
    if not name or (name.startswith("_") and not name.startswith("__")):
        return False  # private ops, including the optimizers' _foreach_* on lists
    try:
        op = getattr(torch.ops.aten, name)
        return any(torch.Tag.pointwise in getattr(op, each).tags for each in op.overloads())
    except (AttributeError, RuntimeError):
        return False


def _classify(func: Callable[..., Any]) -> _Operands:
    name = getattr(func, "__name__", "")
    if getattr(func, "__module__", None) == "torch.nn.functional" and name in _LOSS_OPERANDS:
        return _LOSS_OPERANDS[name]
    return _is_elementwise(func)


def _broadcast_operands(
    operands: _Operands, args: Sequence[Any], kwargs: Mapping[str, Any]
) -> list[Any]:
    """The tensors that broadcast against each other; 0-d tensors can never be stretched."""
    if operands is True and not kwargs:
        values = args
    elif operands is True:
        values = [*args, *(value for key, value in kwargs.items() if key != "out")]
    else:
        names = operands or ()
        values = [*args[: len(names)], *(kwargs[key] for key in names if key in kwargs)]
    return [value for value in values if isinstance(value, torch.Tensor) and value.ndim > 0]


def _op_name(func: Callable[..., Any]) -> str:
    """``torch.add``, ``Tensor.sub`` or ``torch.nn.functional.mse_loss``, as the user wrote it."""
    qualname = getattr(func, "__qualname__", repr(func))
    owner, _, name = qualname.rpartition(".")
    if owner == "_VariableFunctionsClass":
        return f"torch.{name}"
    if owner in ("TensorBase", "Tensor"):
        return f"Tensor.{name}"
    module = getattr(func, "__module__", None) or ""
    module = {"torch.functional": "torch"}.get(module, module)
    return f"{module}.{qualname}" if module else qualname


def _user_frame() -> tuple[FrameType, bool]:
    """The innermost frame outside torch and this file, and whether the torch frames within
    it include one in ``_STRETCHED_BY_DESIGN``."""
    frame, by_design = sys._getframe(1), False
    while frame.f_back is not None and (
        frame.f_code.co_filename.startswith(_TORCH_DIR) or frame.f_code.co_filename == __file__
    ):
        code = frame.f_code
        by_design |= (os.path.basename(code.co_filename), code.co_name) in _STRETCHED_BY_DESIGN
        frame = frame.f_back
    return frame, by_design


def _sampled_indices(shapes: list[tuple[int, ...]]) -> bool:
    """``Categorical.log_prob``'s intended stretch: indices ``(*sample, *batch, 1)`` against
    logits ``(*batch, class)``. Indices that do not end in the batch shape, such as a
    ``(N, 1)`` column of actions against ``(N, class)`` logits, are the critic bug again."""
    if len(shapes) != 2:
        return False
    indices, logits = shapes
    batch = logits[:-1]
    return indices[-1:] == (1,) and indices[:-1][len(indices) - 1 - len(batch) :] == batch


def _check(func: Callable[..., Any], tensors: list[torch.Tensor]) -> None:
    """Raise if no operand already has the broadcast shape. Runs on every elementwise call,
    so the common cases (equal shapes, one-sided broadcasting) return first."""
    shapes = [tuple(tensor.shape) for tensor in tensors]
    if all(shape == shapes[0] for shape in shapes):
        return
    rank = max(map(len, shapes))
    padded = [(1,) * (rank - len(shape)) + shape for shape in shapes]
    result = tuple(map(max, *padded))  # exact unless a size is 0, and empty tensors are harmless
    if result in padded:
        return  # one operand already has the full shape; the others broadcast one-sidedly
    pairs = (pair for shape in padded for pair in zip(shape, result, strict=True))
    if any(size not in (1, full) for size, full in pairs):
        return  # not broadcastable at all: torch's own error is clearer
    frame, by_design = _user_frame()
    if by_design and _sampled_indices(shapes):
        return
    filename, line = frame.f_code.co_filename, frame.f_lineno
    listed = ", ".join(str(shape) for shape in shapes[:-1]) + f" and {shapes[-1]}"
    raise BroadcastError(
        f"{_op_name(func)} stretched every operand: {listed} -> {result}\n"
        f"  at {filename}:{line}: {linecache.getline(filename, line).strip()}\n  {_HINT}"
    )


class BroadcastGuard(TorchFunctionMode):
    """``with BroadcastGuard():`` raises :class:`BroadcastError` at the first elementwise
    operation that stretches both operands, naming the op, the shapes and your source line.

    Every torch call in the block passes through here, so classification is cached per
    function and non-elementwise calls return after one dictionary lookup.
    """

    def __torch_function__(
        self,
        func: Callable[..., Any],
        types: Any,
        args: Sequence[Any] = (),
        kwargs: Mapping[str, Any] | None = None,
    ) -> Any:
        if kwargs is None:
            kwargs = {}
        operands = _CLASSIFIED.get(func)
        if operands is None:
            operands = _CLASSIFIED[func] = _classify(func)
        if operands is not False:
            tensors = _broadcast_operands(operands, args, kwargs)
            if len(tensors) > 1:
                _check(func, tensors)
        return func(*args, **kwargs)


class BroadcastGuardCallback(Callback):
    """Guards the first ``steps`` training batches, then removes itself: a shape bug shows
    in the first steps, and the guard's Python-level overhead is then gone for good.

    The guard is on from ``on_train_epoch_start`` until the ``steps``-th
    ``on_train_batch_end``, so it also sees each batch being fetched (PPO collects its
    rollout there) and any validation run in between. Backward runs in C++ and is not seen.
    """

    def __init__(self, steps: int = 50) -> None:
        """
        Args:
            steps: Training batches to guard from the start of ``fit``.
        """
        self.steps = steps
        self.guarded = 0
        self._guard: BroadcastGuard | None = None

    def on_train_epoch_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._arm()

    def on_train_batch_start(
        self, trainer: L.Trainer, pl_module: L.LightningModule, batch: Any, batch_idx: int
    ) -> None:
        self._arm()

    def on_train_batch_end(
        self,
        trainer: L.Trainer,
        pl_module: L.LightningModule,
        outputs: Any,
        batch: Any,
        batch_idx: int,
    ) -> None:
        if self._guard is not None:
            self.guarded += 1
        if self.guarded >= self.steps:
            self._release()

    def on_train_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._release()

    def on_train_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._release()

    def on_exception(
        self, trainer: L.Trainer, pl_module: L.LightningModule, exception: BaseException
    ) -> None:
        self._release()

    def _arm(self) -> None:
        if self.guarded < self.steps and self._guard is None:
            self._guard = BroadcastGuard()
            self._guard.__enter__()

    def _release(self) -> None:
        if self._guard is not None:
            guard, self._guard = self._guard, None
            guard.__exit__(None, None, None)


# --- NonFiniteLocator ---
# Nearly free while training is finite: one fused norm over the gradients and one host sync
# per optimizer step. On a NaN or Inf it replays the batch's forward with a hook on every
# submodule, names the first module whose output went non-finite, saves the batch and
# raises before the optimizer step: the weights stay finite, and since fit ends there no
# checkpoint is written after the last good one.


class NonFiniteError(RuntimeError):
    """Training produced a NaN or Inf; the message is the locator's report, whose last line
    is a one-line summary."""


class NonFiniteLocator(Callback):
    """Stops training at the first non-finite loss or gradient and says where it came from.

    The check runs in ``on_before_optimizer_step``: after backward, before the weights move.
    On a hit the report (also written to ``nonfinite_report.txt``) names the first submodule,
    by qualified name, whose output held a NaN or Inf in a replay of ``training_step``, with
    its inputs' range, and lists non-finite parameters and gradients; the batch is saved to
    ``nonfinite_batch.pt`` in the log directory. Under fp16 mixed precision infinite
    gradients are routine (the scaler skips those steps), so only the loss is checked there.
    """

    def __init__(self) -> None:
        self._batch: Any = None
        self._batch_idx = 0
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
        grads = [] if scaled else [p.grad for p in pl_module.parameters() if p.grad is not None]
        norms = torch._foreach_norm(grads) if grads else []  # pyright: ignore[reportPrivateImportUsage]
        values = [loss for _, _, loss in losses] + list(norms)
        if not values or math.isfinite(torch.stack(values).sum().item()):
            return
        # The sum of huge finite gradient norms can overflow: confirm element-wise.
        bad_grads = _parameter_names(
            pl_module, lambda p: p.grad is not None and not _all_finite(p.grad)
        )
        bad_losses = [entry for entry in losses if not _all_finite(entry[2])]
        if bad_losses or (bad_grads and not scaled):
            suspects = bad_losses or losses or [(self._batch_idx, self._batch, values[0])]
            self._fail(trainer, pl_module, suspects, bad_grads)

    def _fail(
        self,
        trainer: L.Trainer,
        pl_module: L.LightningModule,
        suspects: list[tuple[int, Any, Tensor]],
        bad_grads: list[str],
    ) -> None:
        batch_idx, batch, loss = suspects[0]
        lines, culprit = _replay_forward(pl_module, batch, batch_idx)
        for later in suspects[1:]:  # more than one only under gradient accumulation
            if culprit:
                break
            batch_idx, batch, loss = later
            lines, culprit = _replay_forward(pl_module, batch, batch_idx)
        where = f"batch {batch_idx} of epoch {trainer.current_epoch}"
        bad_inputs = [_describe_tensor(t) for t in _tensors_in(batch) if not _all_finite(t)]
        bad_params = _parameter_names(pl_module, lambda p: not _all_finite(p))
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

        folder = self._folder
        folder.mkdir(parents=True, exist_ok=True)
        rank = f"_rank{trainer.global_rank}" if trainer.world_size > 1 else ""
        batch_path = folder / f"nonfinite_batch{rank}.pt"
        report = "\n".join([*lines, f"{culprit} in {where}; batch saved to {batch_path}"])
        (folder / f"nonfinite_report{rank}.txt").write_text(report + "\n")
        saved = {"batch": move_data_to_device(batch, "cpu"), "batch_idx": batch_idx}
        saved |= {"epoch": trainer.current_epoch, "global_step": trainer.global_step}
        torch.save(saved | {"report": report}, batch_path)
        raise NonFiniteError(report)


class _FirstNonFinite(Exception):
    """Raised by a forward hook to end the replay at the first non-finite output."""

    def __init__(self, lines: list[str], culprit: str) -> None:
        super().__init__(culprit)
        self.lines, self.culprit = lines, culprit


@contextmanager
def _logging_silenced(pl_module: L.LightningModule) -> Iterator[None]:
    """A replay must not log: instance attributes shadow ``log`` and ``log_dict``."""
    pl_module.log = pl_module.log_dict = lambda *args, **kwargs: None  # type: ignore[method-assign]
    try:
        yield
    finally:
        del pl_module.log, pl_module.log_dict


def _replay_forward(
    pl_module: L.LightningModule, batch: Any, batch_idx: int
) -> tuple[list[str], str]:
    """Re-run ``training_step`` without gradients or logging, with a hook on every submodule;
    the first module to return a non-finite tensor ends it. Hooks fire as modules finish, so
    the first is the innermost. Returns report lines and the culprit ("" if none)."""
    if not pl_module.automatic_optimization:
        return ["no forward replay: under manual optimization training_step steps itself"], ""

    def hook(name: str) -> Callable[..., None]:
        def check(module: torch.nn.Module, args: tuple, kwargs: dict, output: object) -> None:
            if not all(_all_finite(t) for t in _tensors_in(output)):
                named = f"{name} ({type(module).__name__})"
                inputs = _tensors_in([args, kwargs])
                lines = [f"first non-finite output in the forward replay: {named}"]
                lines += [f"  input {i}: {_describe_tensor(t)}" for i, t in enumerate(inputs)]
                lines += [
                    f"  output {i}: {_describe_tensor(t)}"
                    for i, t in enumerate(_tensors_in(output))
                ]
                if not all(_all_finite(t) for t in inputs):
                    lines.append(
                        "  its inputs were already non-finite: bad data, or code between modules"
                    )
                raise _FirstNonFinite(lines, f"non-finite output first at {named}")

        return check

    modules = [(name, module) for name, module in pl_module.named_modules() if name]
    handles = [
        module.register_forward_hook(hook(name), with_kwargs=True) for name, module in modules
    ]
    try:
        with torch.no_grad(), _logging_silenced(pl_module):
            result = pl_module.training_step(batch, batch_idx)
    except _FirstNonFinite as found:
        return found.lines, found.culprit
    except Exception as error:  # a failed replay must not hide the report
        return [f"the forward replay failed: {error!r}"], ""
    finally:
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


def _parameter_names(
    module: torch.nn.Module, test: Callable[[torch.nn.Parameter], bool]
) -> list[str]:
    return [name for name, parameter in module.named_parameters() if test(parameter)]


def _short_list(names: list[str], limit: int = 8) -> str:
    more = f" and {len(names) - limit} more" if len(names) > limit else ""
    return ", ".join(names[:limit]) + more if names else "none"
