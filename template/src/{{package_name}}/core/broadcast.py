"""Find the silent broadcast: ``with BroadcastGuard():`` raises :class:`BroadcastError` at the
first elementwise op that stretches *every* operand, as ``(N, 1) - (N,)`` -> ``(N, N)`` does
inside an untyped helper; ``BroadcastGuard(on_stretch=f)`` calls ``f(stretch)`` and goes on.
Imports only torch and the standard library: copy it into any PyTorch code.

While a guard is on it follows where tensors came from. A *grid* descends from ``arange``,
``linspace``, ``logspace``, ``eye`` or ``tril``/``triu`` of a constant; a *constant* is stated
(``ones``, ``full``, a tensor of Python numbers); a *mask* compares a grid with anything;
writing data into a grid (``copy_``, ``grid[i] = x``) makes it data. The rest is data.

| passes | example |
| --- | --- |
| one operand stretched: a bias, scalar, column or mask | ``x (N, F) + b (F,)`` |
| ``einsum``, ``matmul``, ``outer``, a package's code | ``einx.add("b i, b j -> b i j", x, y)`` |
| grids and constants, at least one a grid | ``pos[None, :] - pos[:, None]`` |
| a grid compared with anything, or int math on one | ``arange(T)[None] < lengths[:, None]`` |
| booleans: all grids or masks, or a tensor with itself | ``m[..., None] & m[:, None]`` |
| raises: data against data, whatever the dtypes | ``pred (N, 1) == y (N,)`` |
| raises: floats with a grid, constants with data | ``ones(N) * column`` |

A grid made before the guard counts as data: ``mark_grid`` and ``mark_constant`` say what it is,
and ``mark_buffer`` counts a module's integer and boolean buffers as grids, float ones as
constants."""

import functools
import linecache
import os
import sys
import weakref
from collections.abc import Callable, Mapping, Sequence
from types import FrameType
from typing import Any, NamedTuple

import torch
from torch.overrides import TorchFunctionMode

__all__ = ["BroadcastError", "BroadcastGuard", "Stretch"]
__all__ += ["mark_buffer", "mark_constant", "mark_grid"]

_TORCH_DIR = os.path.dirname(torch.__file__) + os.sep
_ALIASES = {"and": "bitwise_and", "or": "bitwise_or", "xor": "bitwise_xor", "truediv": "div"}
_ALIASES |= {"lshift": "__lshift__", "rshift": "__rshift__", "floordiv": "floor_divide"}
_ALIASES |= {"mod": "remainder", "subtract": "sub", "multiply": "mul", "divide": "div"}
_ALSO_ELEMENTWISE = {"floor_divide", "broadcast_tensors"}
"""Broadcasting aten ops without the ``pointwise`` tag. ``torch.distributions`` calls
``broadcast_tensors`` on its parameters, so ``Normal(loc (N, 1), scale (N,))`` fails."""
_LOSSES = "mse_loss l1_loss smooth_l1_loss huber_loss kl_div soft_margin_loss hinge_embedding_loss"
_LOSSES += " binary_cross_entropy binary_cross_entropy_with_logits gaussian_nll_loss"
_LOSSES += " poisson_nll_loss"
_LOSS_OPERANDS: dict[str, tuple[str, ...]] = dict.fromkeys(_LOSSES.split(), ("input", "target"))
_LOSS_OPERANDS["margin_ranking_loss"] = ("input1", "input2", "target")
"""``torch.nn.functional`` losses that broadcast internally, with the arguments that must
agree: their inner ops run with the guard popped. Weights and variances may broadcast
one-sidedly."""

# What a call does to the provenance of tensors (see the module docstring).
_DERIVES, _MAKES_GRID, _MAKES_CONSTANT, _MAKES_DATA, _LITERAL = range(5)
_TRIANGLE, _SHAPE_ONLY, _WRITES, _COMPARES = range(5, 9)
_FACTORIES = (_MAKES_GRID, _MAKES_CONSTANT, _LITERAL)
_ROLES = {
    _MAKES_GRID: "arange range linspace logspace eye tril_indices triu_indices",
    _MAKES_CONSTANT: "ones zeros full ones_like zeros_like full_like new_ones new_zeros new_full",
    _MAKES_DATA: "normal uniform bernoulli random exponential geometric cauchy log_normal poisson"
    " multinomial dropout randperm rand_like randn_like randint_like empty_like new_empty"
    " new_tensor",
    _LITERAL: "tensor as_tensor scalar_tensor",
    _TRIANGLE: "tril triu",
    _SHAPE_ONLY: "expand_as view_as reshape_as type_as to",
}
_ROLE_OF = {name: role for role, names in _ROLES.items() for name in names.split()}
_IN_PLACE = "add sub mul truediv floordiv mod pow and or xor lshift rshift"
_WRITERS = {"__setitem__", "__set__", *(f"__i{operator}__" for operator in _IN_PLACE.split())}
_COMPARISONS = {"eq", "ne", "lt", "le", "gt", "ge", "greater", "greater_equal", "less"}
_COMPARISONS |= {"less_equal", "not_equal"}
_MASK_LOGIC = {f"{kind}_{op}" for kind in ("bitwise", "logical") for op in ("and", "or", "xor")}

_CONSTANT, _GRID, _MASK, _DATA = 0, 1, 2, 3
"""Provenance, ordered: a result is the most data-like of its inputs, except that comparing
a grid with data makes a mask."""
_MADE = {_MAKES_GRID: _GRID, _MAKES_CONSTANT: _CONSTANT, _MAKES_DATA: _DATA}
_TRACKED: dict[int, tuple[weakref.ref[torch.Tensor], int]] = {}
"""``id`` -> (weak reference, ``_CONSTANT``, ``_GRID`` or ``_MASK``); the rest is data."""


class BroadcastError(ValueError):
    """An elementwise operation stretched every operand to a shape none of them had."""


def _aten_name(name: str) -> str:
    """The aten op behind a Python-level name: ``__rsub__`` -> ``rsub``, ``add_`` -> ``add``."""
    if name.startswith("__") and name.endswith("__"):
        core = name[2:-2]
        if core not in _ALIASES and not hasattr(torch.ops.aten, core) and core[:1] in "ri":
            core = core[1:]  # reflected (__radd__) or in-place (__iand__) operator
    else:
        core = name.removesuffix("_")
    return _ALIASES.get(core, core)


def _is_elementwise(name: str) -> bool:
    """Whether the aten op ``name`` broadcasts its tensor arguments, by aten's tags."""
    if name in _ALSO_ELEMENTWISE:
        return True
    if not name or (name.startswith("_") and not name.startswith("__")):
        return False  # private ops, including the optimizers' _foreach_* on lists
    try:
        op = getattr(torch.ops.aten, name)
        return any(torch.Tag.pointwise in getattr(op, each).tags for each in op.overloads())
    except (AttributeError, RuntimeError):
        return False


@functools.cache  # every call in a guarded block asks: a call on data costs one lookup here
def _classify(func: Callable[..., Any]) -> tuple[tuple[str, ...] | bool, int]:
    """What to check in a call of ``func`` (False nothing, True every tensor argument, or the
    named ones), and what the call does to provenance."""
    name = getattr(func, "__name__", "")
    if getattr(func, "__module__", None) == "torch.nn.functional" and name in _LOSS_OPERANDS:
        return _LOSS_OPERANDS[name], _DERIVES
    core = _aten_name(name)
    writes = name.endswith("_") and not name.endswith("__") or name in _WRITERS
    role = _WRITES if writes else _COMPARES if core in _COMPARISONS else _DERIVES
    return _is_elementwise(core), _ROLE_OF.get(core, role)


def _kind(value: object) -> int:
    """``_CONSTANT``, ``_GRID`` or ``_MASK`` if tracked, else ``_DATA``."""
    entry = _TRACKED.get(id(value))
    return _DATA if entry is None or entry[0]() is not value else entry[1]


def _remember(result: object, kind: int) -> None:
    """Record ``kind`` for ``result`` and for each tensor in a tuple or list result."""
    for tensor in _tensor_items(result):
        key = id(tensor)
        if kind == _DATA:
            _TRACKED.pop(key, None)
        else:
            _TRACKED[key] = (weakref.ref(tensor, lambda _, key=key: _TRACKED.pop(key, None)), kind)


def mark_grid(tensor: torch.Tensor) -> torch.Tensor:
    """Count ``tensor``, made before any guard started, as an index grid, and return it:
    ``POSITIONS = mark_grid(torch.arange(T))`` at import time."""
    _remember(tensor, _GRID)
    return tensor


def mark_constant(tensor: torch.Tensor) -> torch.Tensor:
    """Count ``tensor``, made before any guard started, as a constant, and return it."""
    _remember(tensor, _CONSTANT)
    return tensor


def mark_buffer(tensor: torch.Tensor) -> torch.Tensor:
    """Count a module's buffer as a constant if float or complex, else as a grid; return it."""
    _remember(tensor, _CONSTANT if tensor.is_floating_point() or tensor.is_complex() else _GRID)
    return tensor


def _numbers(value: object) -> bool:
    """Whether ``value`` is Python numbers only, nested in lists and tuples (not NumPy)."""
    if isinstance(value, tuple | list):
        return all(map(_numbers, value))
    return type(value) in (int, float)  # not a NumPy scalar, which subclasses float


def _tensor_items(result: object) -> list[torch.Tensor]:
    """``result`` if it is a tensor, the tensors of a tuple or list of them (``unbind``,
    ``max(dim=...)``), else nothing: a long ``tolist()`` is not walked."""
    if isinstance(result, torch.Tensor):
        return [result]
    if isinstance(result, tuple | list) and result and isinstance(result[0], torch.Tensor):
        return [item for item in result if isinstance(item, torch.Tensor)]
    return []


def _first(value: object) -> object:
    """The first item of a list or tuple argument (``torch.cat([grid, ...])``), else itself."""
    return value[0] if isinstance(value, tuple | list) and value else value


def _track(role: int, args: Sequence[Any], kwargs: Mapping[str, Any], result: Any) -> None:
    """Update provenance after a call. Runs only for factories, for comparisons while
    anything is tracked, and for calls whose first argument is tracked (an entry leaves
    ``_TRACKED`` when its tensor dies), so data-only code pays one lookup."""
    if role == _LITERAL:
        stated = args[0] if args else kwargs.get("data")
        if isinstance(result, torch.Tensor) and result.is_floating_point() and _numbers(stated):
            _remember(result, _CONSTANT)
    elif role in _MADE:
        _remember(result, _MADE[role])  # data: out of place the result is new, untracked already
    elif role == _TRIANGLE:
        _remember(result, max(_GRID, _kind(args[0])))
    elif role == _SHAPE_ONLY:
        _remember(result, _kind(args[0]))  # the other argument gives a shape, dtype or device
    else:
        writes = role == _WRITES
        target = args[0] if writes else result
        values = [*(args[1:] if writes else args), *(v for k, v in kwargs.items() if k != "out")]
        items = (item for v in values for item in (v if isinstance(v, tuple | list) else [v]))
        kinds = [_kind(item) for item in items if isinstance(item, torch.Tensor)]
        kind = max(kinds + [_kind(target)] if writes else kinds, default=_DATA)
        if role == _COMPARES and kind == _DATA and _GRID in kinds:
            kind = _MASK  # a padding mask: arange(T)[None, :] < lengths[:, None]
        if kind != _DATA:
            _remember(target, kind)
        elif writes:  # data written in makes the target data; written through a view, also
            # its buffer and the buffer's other views (``buf[t].copy_(x)``). Views taken before
            # a write into the buffer itself keep their kind: constants excuse nothing.
            for tensor in _tensor_items(target):
                _TRACKED.pop(id(tensor), None)
                base = tensor._base
                for key, (ref, _) in [] if base is None else list(_TRACKED.items()):
                    other = ref()
                    if other is None or other is base or other._base is base:
                        _TRACKED.pop(key, None)


def _user_frame(shapes: list[tuple[int, ...]]) -> FrameType | None:
    """The innermost frame outside torch and this file, or ``None`` for a stretch made on
    purpose: in ``<string>`` code whose nearest caller with a file is an installed package
    other than torch (FX's code, IPython's cells and the user's own ``exec`` are checked), or
    in ``Categorical.log_prob``, which pairs indices ``(*sample, *batch, 1)`` with logits
    ``(*batch, class)``; a ``(N, 1)`` column of actions against ``(N, class)`` logits does
    not end in the batch shape: the critic bug again."""
    frame = sys._getframe(1)
    while frame.f_back is not None and (
        frame.f_code.co_filename.startswith(_TORCH_DIR) or frame.f_code.co_filename == __file__
    ):
        code = frame.f_code
        if (os.path.basename(code.co_filename), code.co_name) == ("categorical.py", "log_prob"):
            indices, batch = shapes[0], shapes[-1][:-1]
            if len(shapes) == 2 and indices[-1:] == (1,) and indices[-1 - len(batch) : -1] == batch:
                return None
        frame = frame.f_back
    caller = frame.f_back
    while caller is not None and caller.f_code.co_filename == "<string>":
        caller = caller.f_back
    if frame.f_code.co_filename == "<string>" and caller and _installed(caller.f_code.co_filename):
        return None
    return frame


def _installed(filename: str) -> bool:
    """Whether a file is a third-party package's: in site-packages, and not torch's."""
    parts = set(os.path.normpath(filename).split(os.sep))
    return bool(parts & {"site-packages", "dist-packages"}) and not filename.startswith(_TORCH_DIR)


def _builds_grid_or_mask(func: Callable[..., Any], tensors: list[torch.Tensor]) -> bool:
    """Whether a stretch passes by the module docstring's rule."""
    name = _aten_name(getattr(func, "__name__", ""))
    kinds = [_kind(tensor) for tensor in tensors]
    integers = not any(t.is_floating_point() or t.is_complex() for t in tensors)
    if _GRID in kinds and (max(kinds) == _GRID or name in _COMPARISONS or integers):
        return True
    if name not in _MASK_LOGIC or any(tensor.dtype != torch.bool for tensor in tensors):
        return False
    first = tensors[0]
    base = first if first._base is None else first._base
    return all(kind in (_GRID, _MASK) for kind in kinds) or all(
        (tensor if tensor._base is None else tensor._base) is base
        and tensor.storage_offset() == first.storage_offset()
        and tensor.numel() == first.numel()
        for tensor in tensors
    )


def _op_name(func: Callable[..., Any]) -> str:
    """``torch.add``, ``Tensor.sub`` or ``torch.nn.functional.mse_loss``, as the user wrote it."""
    qualname = getattr(func, "__qualname__", repr(func))
    owner, _, name = qualname.rpartition(".")
    owners = {"_VariableFunctionsClass": "torch", "TensorBase": "Tensor", "Tensor": "Tensor"}
    if owner in owners:
        return f"{owners[owner]}.{name}"
    module = getattr(func, "__module__", None) or ""
    module = {"torch.functional": "torch"}.get(module, module)
    return f"{module}.{qualname}" if module else qualname


class Stretch(NamedTuple):
    """One elementwise call that stretched every operand, at the innermost line outside
    torch; what ``BroadcastGuard(on_stretch=...)`` receives."""

    op: str
    shapes: tuple[tuple[int, ...], ...]
    result: tuple[int, ...]
    file: str
    line: int
    source: str

    def message(self) -> str:
        """The text of the :class:`BroadcastError` the guard raises for this stretch."""
        listed = ", ".join(str(shape) for shape in self.shapes[:-1]) + f" and {self.shapes[-1]}"
        return (
            f"{self.op} stretched every operand: {listed} -> {self.result}\n"
            f"  at {self.file}:{self.line}: {self.source}\n  Make the shapes agree with "
            "einops.rearrange; for an intended outer product use einsum, torch.outer or an "
            "explicit expand."
        )


def _stretch(
    func: Callable[..., Any], operands: tuple[str, ...] | bool, args: Sequence, kwargs: Mapping
) -> Stretch | None:
    """The stretch this call makes, if any. Runs on every elementwise call, so the common
    cases (equal shapes, one-sided broadcasting) return first. A 0-d tensor never stretches."""
    if isinstance(operands, tuple):
        values = [*args[: len(operands)], *(kwargs[key] for key in operands if key in kwargs)]
    else:
        values = [*args, *(value for key, value in kwargs.items() if key != "out")]
    tensors = [value for value in values if isinstance(value, torch.Tensor) and value.ndim > 0]
    shapes = [tuple(tensor.shape) for tensor in tensors]
    if len(shapes) < 2 or all(shape == shapes[0] for shape in shapes):
        return None
    rank = max(map(len, shapes))
    padded = [(1,) * (rank - len(shape)) + shape for shape in shapes]
    result = tuple(map(max, *padded))  # exact unless a size is 0, and empty tensors are harmless
    if result in padded:
        return None  # one operand already has the full shape; the others broadcast one-sidedly
    if any(size not in (1, full) for s in padded for size, full in zip(s, result, strict=True)):
        return None  # not broadcastable at all: torch's own error is clearer
    if _builds_grid_or_mask(func, tensors) or (frame := _user_frame(shapes)) is None:
        return None
    filename, line = frame.f_code.co_filename, frame.f_lineno
    source = linecache.getline(filename, line).strip()
    return Stretch(_op_name(func), tuple(shapes), result, filename, line, source)


class BroadcastGuard(TorchFunctionMode):
    """Raises :class:`BroadcastError` naming the op, the shapes and your source line, or
    with ``on_stretch`` passes it a :class:`Stretch` and runs the operation as torch would."""

    def __init__(self, on_stretch: Callable[[Stretch], None] | None = None) -> None:
        super().__init__()
        self.on_stretch = on_stretch

    def __torch_function__(
        self, func: Callable, types: Any, args: Sequence = (), kwargs: Mapping | None = None
    ) -> Any:
        __tracebackhide__ = True  # pytest shows the failing test's line, not this frame
        kwargs = kwargs or {}
        operands, role = _classify(func)
        if operands is not False and (stretch := _stretch(func, operands, args, kwargs)):
            if self.on_stretch is None:
                raise BroadcastError(stretch.message())
            self.on_stretch(stretch)
        result = func(*args, **kwargs)
        if role in _FACTORIES or (
            _TRACKED and args and (role == _COMPARES or id(_first(args[0])) in _TRACKED)
        ):
            _track(role, args, kwargs, result)
        return result
