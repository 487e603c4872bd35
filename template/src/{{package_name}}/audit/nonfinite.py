"""``--nonfinite`` (docs/audit.md): stop at the first NaN an op makes from NaN-free inputs, or at an
infinity once it reaches a loss or a gradient. A result costs one sum: finite iff every value is."""

import functools
import linecache
import math
import os
import sys
import weakref
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NamedTuple, NoReturn

import torch
from torch import nn
from torch.overrides import TorchFunctionMode

from ..core import broadcast
from .findings import _MACHINERY, Finding, Findings, Modules, tensors

_BACKWARD = {torch.Tensor.backward, torch.autograd.backward, torch.autograd.grad}
_FACTORIES = {"empty_like", "full_like", "new_empty", "new_full"}
_UNCHECKED = tuple(os.path.join(os.path.dirname(torch.__file__), d, "") for d in ("optim", "amp"))
"""Ops called from here are not checked: optimizers (cost), GradScaler (routine infinities)."""


class NonFiniteFound(BaseException):
    """Stops the program at the finding: its own ``except Exception`` cannot catch it."""


class _Op(NamedTuple):
    name: str
    module: nn.Module | None  # the innermost it ran in
    file: str
    line: int


_Origin = tuple[_Op, list[torch.Tensor], torch.Size, int]  # inputs, result's shape, how many


@functools.cache
def _plan(func: Callable[..., Any]) -> tuple[bool, bool, str]:
    """Whether ``func``'s results are skipped (views: checked), it writes in place; its name."""
    name = getattr(func, "__name__", "")
    packet = getattr(torch.ops.aten, name, None) if name.isidentifier() else None
    views = [getattr(packet, o).is_view for o in getattr(packet, "overloads", list)()]
    view = name != "to" and any(views)
    writes = name == "__setitem__" or name.endswith("_") and not name.endswith("__")
    shown = broadcast._op_name(func).replace("torch._C._nn.", "torch.nn.functional.")
    return view or name in ("__get__", "__set__", "__getitem__"), writes, shown


def _floats(value: object) -> list[torch.Tensor]:
    return [tensor for tensor in tensors(value) if tensor.dtype.is_floating_point]


def _total(tensors: list[torch.Tensor]) -> float:
    """Their sum; NaN where values cannot be read (meta tensors, vmap): the count decides."""
    try:
        return sum(tensor.detach().sum().item() for tensor in tensors)
    except RuntimeError:
        return math.nan


def _count(tensor: torch.Tensor, nan: bool = False) -> int:
    """How many values are not finite (``x - x`` is 0 for the others), or are NaN."""
    try:
        values = tensor.detach()
        return int(torch.count_nonzero(values.isnan() if nan else values - values))
    except RuntimeError:
        return 0


class NonFiniteCheck(TorchFunctionMode):
    """Checks every op's floating results; at a finding, saves its inputs and stops the program."""

    def __init__(self, findings: Findings, report: Path) -> None:
        super().__init__()
        self.findings, self.modules = findings, Modules()
        self.saved = report.with_suffix(".nonfinite.pt")
        self.origins: dict[int, tuple[weakref.ref[torch.Tensor], _Origin]] = {}

    def _here(self, name: str) -> _Op:
        frame, calling = sys._getframe(1), self.modules.calling
        while frame.f_back is not None and frame.f_code.co_filename.startswith(_MACHINERY):
            frame = frame.f_back
        return _Op(name, calling[-1] if calling else None, frame.f_code.co_filename, frame.f_lineno)

    def _origin(self, tensor: torch.Tensor) -> _Origin | None:
        entry = self.origins.get(id(tensor))
        return entry[1] if entry is not None and entry[0]() is tensor else None

    def __torch_function__(self, func: Callable, types, args=(), kwargs: dict | None = None) -> Any:
        kwargs = kwargs or {}
        if func in _BACKWARD:  # the loss
            for loss in _floats(args[0] if args else kwargs.get("tensors", kwargs.get("outputs"))):
                if not math.isfinite(_total([loss])) and _count(loss):
                    here = (self._here(broadcast._op_name(func)), [loss], loss.shape, 1)
                    self._found(self._origin(loss) or here)
            return func(*args, **kwargs)
        result = func(*args, **kwargs)
        skip, writes, name = _plan(func)
        if skip or not (outputs := _floats(args[0] if writes and result is None else result)):
            return result
        caller = sys._getframe(1)
        if caller.f_code.co_filename == broadcast.__file__ and caller.f_back is not None:
            caller = caller.f_back  # the guard's frame, above this mode
        if caller.f_code.co_filename.startswith(_UNCHECKED):
            return result
        if not math.isfinite(_total(outputs)):
            for output in outputs:
                self._nonfinite(name, [*_floats(args), *_floats(kwargs)], output)
        elif writes:  # values written over
            self.origins.pop(id(outputs[0]), None)
        for output in outputs if torch.is_grad_enabled() else ():
            if output.grad_fn is not None:
                output.grad_fn.register_hook(functools.partial(self._gradients, self._here(name)))
        return result

    def _nonfinite(self, name: str, inputs: list[torch.Tensor], output: torch.Tensor) -> None:
        """A new NaN is the finding; else where non-finite values first appeared (not a factory)."""
        if not (count := _count(output)):
            return  # finite values whose sum overflowed
        before = [t for t in inputs if t is not output]
        factory = not before or name.rpartition(".")[2] in _FACTORIES
        if not factory and _count(output, nan=True) and not any(_count(t, True) for t in before):
            self._found((self._here(name), inputs, output.shape, count))
        known = next(filter(None, map(self._origin, inputs)), None)
        if known is None and not factory:  # an in-place op's input is its result: a copy
            inputs = [t.detach().clone() if t is output else t for t in inputs]
            known = (self._here(name), inputs, output.shape, count)
        if known is not None:
            key = id(output)
            self.origins[key] = (weakref.ref(output, lambda _: self.origins.pop(key, None)), known)

    def _gradients(self, op: _Op, made: Sequence[Any], received: Sequence[Any]) -> None:
        """A node's hook: the gradients it made are finite (float16 overflows: GradScaler's)."""
        grads = [g for g in _floats(made) if g.dtype != torch.float16]
        if not math.isfinite(_total(grads)):
            for grad in filter(_count, grads):
                backward = op._replace(name=f"{op.name} (backward)")
                self._found((backward, _floats(received), grad.shape, _count(grad)))

    def _found(self, origin: _Origin) -> NoReturn:
        op, inputs, shape, count = origin
        torch.save([t.detach().cpu() for t in inputs], self.saved)
        file = op.file if op.file.startswith("<") else os.path.abspath(op.file)
        shapes = [list(t.shape) for t in inputs]
        source = linecache.getline(op.file, op.line).strip()
        finding = Finding("nonfinite", op.name, shapes, list(shape), file, op.line, source)
        finding.nonfinite, finding.saved = count, str(self.saved)
        if (module := op.module) is not None:
            finding.module, finding.module_class = self.modules.names[module], type(module).__name__
        self.findings.add(("nonfinite",), lambda: finding)
        raise NonFiniteFound
