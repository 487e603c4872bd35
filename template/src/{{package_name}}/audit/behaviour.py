"""``--behaviour`` (docs/audit.md): modules the program calls run again on copies, with inputs
changed only by moving their own values: rows stay apart, causal ignores the future, masks hold."""

import contextlib
import copy
import inspect
import io
import linecache
import sys
import threading
import weakref
from collections.abc import Callable
from functools import cache, partial
from math import inf
from typing import Any, NamedTuple, get_args, get_type_hints

import torch
from torch import Tensor, nn

from .findings import Finding, Findings, Modules, _is_machinery, _library, tensors

TOLERANCE = 1e-4  # of each output's largest finite magnitude (8 eps in half precision)
Inputs = list[tuple[str, Tensor]]  # a call's tensor arguments by name, each object once
Part = Callable[[Tensor, list[int], list[int]], Tensor | None]  # of where an output moved


class Axis(NamedTuple):
    """The batch or time axis of a call: its size, place in each input by ``id``, why none."""

    size: int
    of: dict[int, int]
    why: str

    @classmethod
    def find(cls, what: str, size: int | None, inputs: Inputs, named: dict) -> "Axis":
        """Where a hint names it, else the one axis of ``size`` (a hint's size first)."""
        stated = {id(t): named[n][what] % t.ndim for n, t in inputs if what in named.get(n, {})}
        size = next((t.shape[stated[id(t)]] for _, t in inputs if id(t) in stated), size or 0)
        of: dict[int, int] = {}
        for name, tensor in inputs if size else []:
            hits = [stated[id(tensor)]] if id(tensor) in stated else _hits(tensor, size)
            if len(hits) > 1 and not _is_mask(name, tensor):
                return cls(size, {}, f"two axes of size {size} in {name}")
            of.update({id(tensor): hits[0]} if len(hits) == 1 else {})
        return cls(size, of, "" if of or not size else f"no input has an axis of size {size}")


@cache
def _named(cls: type) -> dict[str, dict[str, int]]:
    """Per argument of ``cls.forward``, the axes its hint names ``batch`` or ``time``."""
    named: dict[str, dict[str, int]] = {}
    with contextlib.suppress(Exception):  # a hint that does not resolve: the sizes tell
        for parameter, hint in get_type_hints(cls.forward).items():
            shapes = [getattr(each, "dim_str", None) for each in get_args(hint) or (hint,)]
            tokens = next((shape.split() for shape in shapes if isinstance(shape, str)), [])
            variadic = next((i for i, t in enumerate(tokens) if t[0] in ".*"), len(tokens))
            for i, token in enumerate(t.lstrip("#") for t in tokens):
                if token in ("batch", "time") and parameter != "return":
                    named.setdefault(parameter, {})[token] = i - len(tokens) * (i > variadic)
    return named


def _hits(tensor: Tensor, size: int) -> list[int]:
    return [axis for axis, each in enumerate(tensor.shape) if each == size]


def _is_mask(name: str, tensor: Tensor) -> bool:
    return tensor.dtype == torch.bool or "mask" in name.lower()


def _marks(mask: Tensor, batch: Axis, time: Axis) -> Tensor | None:
    """The ``(batch, time)`` steps a padding mask marks (non-zero, or ``-inf``); None if none."""
    ends = (batch.of.get(id(mask)), time.of.get(id(mask)))
    if ends != (0, mask.ndim - 1) or mask.numel() != batch.size * time.size:
        return None
    flat = mask[(slice(None), *[0] * (mask.ndim - 2))]  # the axes between are of size 1
    marked = flat == -inf if bool(((flat == 0) | (flat == -inf)).all()) else flat == 1
    one = bool(((flat == 0) | marked).all()) and 0 < int(marked.sum()) < marked.numel()
    return marked if one else None


def _select(tensor: Tensor, axis: Axis, order: list[int]) -> Tensor:
    return tensor.index_select(axis.of[id(tensor)], torch.tensor(order, device=tensor.device))


def _fill(tensor: Tensor, batch: Axis, time: Axis, marked: Tensor) -> Tensor:
    """Each row's marked steps given its first unmarked step's value (not a row marked all)."""
    axes = (batch.of[id(tensor)], time.of[id(tensor)])
    x, marked = tensor.movedim(axes, (0, 1)), marked.to(tensor.device)
    marked = marked & ~marked.all(1, keepdim=True)
    steps = torch.arange(x.shape[1], device=x.device).expand_as(marked)
    steps = torch.where(marked, (~marked).int().argmax(1, keepdim=True), steps)
    return torch.stack([row[s] for row, s in zip(x, steps, strict=True)]).movedim((0, 1), axes)


def _others(kept: Tensor, moved: Tensor, batch: list[int], time: list[int]) -> Tensor | None:
    """A :data:`Part`: the ``kept`` steps of an output, or all of it if it has no time axis."""
    if len(batch) > 1 or len(time) > 1 or (time and not batch):
        return None  # which step is which cannot be told
    return moved.movedim((batch[0], time[0]), (0, 1))[kept.to(moved.device)] if time else moved


def _triangle(buffer: Tensor) -> bool:
    """A causal mask: ``tril(ones)``, with any leading axes of size 1, or ``triu(-inf, 1)``."""
    n = buffer.shape[-1] if buffer.ndim >= 2 else 0
    if n < 2 or buffer.shape[-2] != n or buffer.numel() != n * n:
        return False
    square = buffer[(0,) * (buffer.ndim - 2)]
    if square.is_floating_point() and torch.equal(square, torch.full_like(square, -inf).triu(1)):
        return True
    return torch.equal(square, torch.ones_like(square).tril())


def _copy(module: nn.Module) -> Any:
    """In eval mode, sharing the parameters, which no check writes to; None if it cannot be."""
    with contextlib.suppress(Exception):
        return copy.deepcopy(module, {id(p): p for p in module.parameters()}).eval()


@cache
def _users(file: str) -> bool:
    return _library(file) is None and not _is_machinery(file)


class Behaviour(Modules):
    """Checks the modules called while its ``hooks`` are on (docs/audit.md: which, and how)."""

    def __init__(self, findings: Findings, batch: int | None, time: int | None, causal: list):
        super().__init__()
        self.findings, self.sizes, self.causal = findings, (batch, time), set(causal)
        self.evaluating, self.pending = False, {}  # per module to check, its copy or None
        self.seen, self.placed = weakref.WeakKeyDictionary(), weakref.WeakKeyDictionary()
        self.verdicts, self.flagged, self.why = Findings(), set(), {}

    def enter(self, module: nn.Module, args: tuple) -> None:
        """A copy per signature's first call of a checked module; None if no input has the sizes."""
        super().enter(module, args)
        if self.evaluating or threading.current_thread() is not threading.main_thread():
            return  # as the guard, the main thread only
        cls, frame = type(module), sys._getframe(1)
        while frame.f_back is not None and frame.f_code.co_filename == nn.modules.module.__file__:
            frame = frame.f_back  # the call
        called = cls.__module__.startswith("torch.nn.") and _users(frame.f_code.co_filename)
        if called or _users(getattr(sys.modules.get(cls.__module__), "__file__", None) or "<none>"):
            key = tuple((t.dtype, *(s * (s in self.sizes) for s in t.shape)) for t in tensors(args))
            if key not in (seen := self.seen.setdefault(module, set())):
                seen.add(key)
                held = _named(cls) or any(any(sizes[1:]) for sizes in key)
                self.pending[module] = _copy(module) if held else None

    def leave(self, module: nn.Module, args: tuple, *kwargs_output: Any) -> None:
        """Checks a call ``enter`` chose, silently (a warnings filter would repeat shown ones)."""
        super().leave()
        copied = self.pending.pop(module, False)
        if copied is False or len(kwargs_output) < 2:
            return
        try:
            bound = inspect.signature(module.forward).bind(*args, **kwargs_output[0])
        except (TypeError, ValueError):  # a forward without a signature: not checked
            return
        recording = getattr(sys.modules.get(f"{__package__}.annotations"), "RECORDING", [])
        self.evaluating, out = True, io.StringIO()
        recording.append((Findings(), False))
        try:
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out), torch.no_grad():
                self._check(module, copied, bound)
        finally:
            self.evaluating = False
            recording.pop()

    def _check(self, module: nn.Module, copied: Any, bound: inspect.BoundArguments) -> None:
        inputs: Inputs = []
        for name, value in bound.arguments.items():
            if isinstance(value, Tensor) and all(value is not tensor for _, tensor in inputs):
                inputs.append((name, value))  # `q=x, k=x, v=x` is one input
        where, named = (self.names[module], type(module).__qualname__), _named(type(module))
        batch = Axis.find("batch", self.sizes[0], inputs, named)
        time = Axis.find("time", self.sizes[1], inputs, named)
        placed = {n: batch.of[id(t)] for n, t in inputs if id(t) in batch.of}
        if any(self.placed.setdefault(module, placed).get(n, a) != a for n, a in placed.items()):
            batch = batch._replace(of={})  # not where it was: a prompt growing through B
        for what, axis in (("rows", batch), ("causality", time)):
            if self.why.get((*where, what)) != "":  # listed until found once
                self.why[(*where, what)] = axis.why

        def outputs(new: dict[int, Tensor]) -> list[Tensor]:
            """A fresh copy's, on ``new`` inputs, in the program's random state; [] if refused."""
            call = copy.copy(bound)
            call.arguments = {n: new.get(id(v), v) for n, v in bound.arguments.items()}
            cuda = range(torch.cuda.device_count()) if torch.cuda.is_initialized() else []
            with torch.random.fork_rng(list(cuda)), contextlib.suppress(Exception):
                results = tensors(_copy(copied)(*call.args, **call.kwargs))
                return [result for result in results if result.ndim and result.numel()]
            return []

        if copied is None or not (batch.of or time.of) or not (base := outputs({})):
            return

        def compare(changes: list[tuple[Tensor, Tensor]], part: Part) -> tuple[Tensor, bool] | None:
            """(the first output whose part moved, True), (the first compared, False) or None."""
            if all(torch.equal(old, new) for old, new in changes):
                return None
            compared = None
            for old, new in zip(base, outputs({id(o): n for o, n in changes}), strict=False):
                if old.shape != new.shape or old.dtype != new.dtype:
                    return old, True
                moved = old != new
                if old.is_floating_point() or old.is_complex():
                    tolerance = max(TOLERANCE, 8 * torch.finfo(old.real.dtype).eps)
                    scale = float(old.abs().nan_to_num(0.0, 0.0, 0.0).max())
                    moved = ~torch.isclose(new, old, tolerance, tolerance * scale, equal_nan=True)
                picked = part(moved, _hits(old, batch.size), _hits(old, time.size))
                if picked is not None and bool(picked.any()):
                    return old, True
                compared = compared or (None if picked is None else (old, False))
            return compared

        plans: list[tuple[str, str | None, list]] = []  # a kind, its argument, the tries
        found = ((n, _marks(t, batch, time)) for n, t in inputs if _is_mask(n, t))
        pads = [(n, m) for n, m in found if m is not None]
        held = [s for s in range(time.size) if all((m[:, s] == m[:, 0]).any() for _, m in pads)]
        rows, kept, last = batch.size, batch.size // 2, max(held, default=0)
        if batch.of and rows > 1:  # the middle row kept, the others rolled: its neighbours change
            order = [kept if i == kept else (i - 1) % rows for i in range(rows)]
            rolled = [(t, _select(t, batch, order)) for _, t in inputs if id(t) in batch.of]
            row: Part = lambda d, b, t: d.select(b[0], kept) if len(b) == 1 else None  # noqa: E731
            plans.append(("batch-mixing", None, [(rolled, row)]))
        steps = [(name, t) for name, t in inputs if id(t) in time.of and not _is_mask(name, t)]
        if steps and last > 0:  # step 0 copied onto the last step that some row does not pad
            (name, x), on_last = steps[0], [0 if s == last else s for s in range(time.size)]
            earlier: Part = lambda d, b, t: d.narrow(t[0], 0, last) if len(t) == 1 else None  # noqa: E731
            plans.append(("not-causal", name, [([(x, _select(x, time, on_last))], earlier)]))
        both = [t for _, t in steps if id(t) in batch.of]
        for name, marks in pads if both else []:  # one input changed where one polarity marks
            fills = [(t, marked) for marked in (marks, ~marks) for t in both]
            tries = [([(t, _fill(t, batch, time, m))], partial(_others, ~m)) for t, m in fills]
            plans.append(("mask-ignored", name, tries))
        for kind, argument, tries in plans:  # moved if every try that could be made moved
            outcomes = filter(None, (compare(changes, part) for changes, part in tries))
            if (first := next(outcomes, None)) is None:
                continue
            moved = first[1] and all(outcome[1] for outcome in outcomes)
            if kind == "not-causal":  # a verdict, and a finding only where declared
                self._record("causality", module, inputs, first[0], argument, not moved)
            if moved and (kind != "not-causal" or self._declares(module)):
                self._record(kind, module, inputs, first[0], argument)

    def _declares(self, module: nn.Module) -> bool:
        cls, source = type(module), ""
        with contextlib.suppress(OSError, TypeError):  # no source: no such call seen
            source = "".join(inspect.getsource(cls.forward).split())
        return (
            bool({cls.__name__, cls.__qualname__} & self.causal)
            or any(getattr(module, name, None) is True for name in ("causal", "is_causal"))
            or any(_triangle(buffer) for buffer in module.buffers(recurse=False))
            or ("dot_product_attention(" in source and "is_causal=True" in source)
        )

    def _record(self, kind, module, inputs: Inputs, output: Tensor, argument, causal=None) -> None:
        """A verdict (``causal`` given), or a finding unless an inner module has it (to fix)."""
        code = getattr(inspect.unwrap(type(module).forward), "__code__", None)
        file, line = (code.co_filename, code.co_firstlineno) if code else ("<unknown>", 0)
        while (source := linecache.getline(file, line).strip()).startswith("@"):
            line += 1  # the def, not its decorators
        name, cls = self.names[module], type(module).__qualname__
        shapes, result = [list(t.shape) for _, t in inputs], list(output.shape)
        found = Finding(kind, cls, shapes, result, file, line, source, library=_library(file))
        found.module, found.module_class, found.argument, found.causal = name, cls, argument, causal
        if causal is not None:
            self.verdicts.add((name, cls, causal), lambda: found)
        elif not any((kind, id(sub)) in self.flagged for sub in module.modules()):
            self.findings.add((kind, file, line, argument), lambda: found)
        self.flagged.add((kind, id(module)))

    def summary(self) -> list[str]:
        causal = sum(verdict.causal is True for verdict in self.verdicts.values())
        lines = [f"audit: {len(self.verdicts)} causality verdicts, {causal} causal"]
        for (name, cls, what), why in ((key, why) for key, why in self.why.items() if why):
            lines.append(f"audit: {what} not checked in {name or 'top module'} ({cls}): {why}")
        return lines
