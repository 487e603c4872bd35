"""Find the silent broadcast: ``with BroadcastGuard():`` raises at the first elementwise
operation that stretches *every* operand, such as ``(N, 1) - (N,)`` -> ``(N, N)``.

Copy-paste: this file imports only torch and the standard library, so it can be dropped into
plain PyTorch code as it is.

Annotations check function boundaries only: ``((pred - target) ** 2).mean()`` inside an
untyped helper still turns ``(N, 1)`` and ``(N,)`` into ``(N, N)``. The guard watches every
elementwise operation instead, and raises :class:`BroadcastError` when one stretches *both*
operands, which is almost never meant. One-sided broadcasting (a bias, a scalar, a ``(N, 1)``
column, an attention mask) passes. ``einsum``, ``matmul`` and ``torch.outer`` are never
checked: an outer product should say so.
"""

import linecache
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from types import FrameType
from typing import Any

import torch
from torch.overrides import TorchFunctionMode

__all__ = ["BroadcastError", "BroadcastGuard"]

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
