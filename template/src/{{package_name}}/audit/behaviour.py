"""``--behaviour``: the program's modules run again on copies, at each one's first call with
each signature, with inputs changed only by moving their own values: rows stay apart, a
module declared causal ignores the future, a padding mask is honoured (docs/audit.md)."""

import contextlib
import copy
import functools
import inspect
import io
import json
import linecache
import re
import sys
import threading
import typing
import weakref
from pathlib import Path
from typing import Any, NamedTuple

import torch
from torch import Tensor, nn
from torch.nn.modules import module as torch_module
from torch.utils.hooks import RemovableHandle

from .findings import Finding, Findings, _is_machinery, _library

TOLERANCE = 1e-4
"""Unchanged: within ``TOLERANCE`` (``8 * eps`` in half precision) times the largest finite
magnitude of that output; NaNs equal."""
SAID = {
    "batch-mixing": "its middle row moved when only the other rows changed",
    "not-causal": "declared causal, yet the last step of {} moved earlier steps",
    "mask-ignored": "{} is not honoured: the steps it marks moved the other steps",
}
Inputs = list[tuple[str, Tensor]]


class BehaviourFinding(Finding):
    def summary(self) -> str:
        where, n = f"{self.module or 'the top module'} ({self.module_class})", self.count
        said = f"{SAID[self.kind].format(self.argument)}, {n} time{'s' * (n != 1)}"
        text = f"  {self.kind} in {where}: {said}"
        text += f"\n    at {self.file}:{self.line}: {self.source}"
        return text + f"\n    called from {self.user_file}:{self.user_line}" * bool(self.user_file)


class Axis(NamedTuple):
    """The batch or time axis in one call: its size, place in each input, why not checked."""

    size: int
    of: dict[int, int]
    why: str


def _tensors(value: Any) -> list[Tensor]:
    """The tensors in ``value``, nested in tuples, lists and dicts."""
    if isinstance(value, Tensor):
        return [value] if value.layout == torch.strided else []
    items = value.values() if isinstance(value, dict) else value
    nested = isinstance(value, tuple | list | dict)
    return [tensor for item in items for tensor in _tensors(item)] if nested else []


def _signature(value: Any, sizes: tuple) -> tuple:
    """Each tensor's dtype, and which of its axes have the batch or the time size."""
    role = {size: i for i, size in enumerate(sizes) if size}
    return tuple((t.dtype, *(role.get(s, -1) for s in t.shape)) for t in _tensors(value))


@functools.cache
def _named(cls: type) -> dict[str, dict[str, int]]:
    """Per parameter of ``cls.forward``, the axes its jaxtyping hint names ``batch`` and
    ``time`` (or ``#batch``), counted from the end after a variadic axis."""
    try:
        hints = typing.get_type_hints(cls.forward)
    except Exception:  # a hint that does not resolve: the sizes tell instead
        return {}
    named: dict[str, dict[str, int]] = {}
    for parameter, hint in hints.items():
        shapes = [getattr(each, "dim_str", None) for each in typing.get_args(hint) or (hint,)]
        tokens = next((shape.split() for shape in shapes if isinstance(shape, str)), [])
        variadic = next((i for i, token in enumerate(tokens) if token[0] in ".*"), len(tokens))
        for i, token in reversed(list(enumerate(tokens))):  # `time` over `#time`
            if parameter != "return" and token.lstrip("#") in ("batch", "time"):
                axis = i - len(tokens) * (i > variadic)
                named.setdefault(parameter, {})[token.lstrip("#")] = axis
    return named


def _hits(tensor: Tensor, size: int) -> list[int]:
    return [axis for axis, each in enumerate(tensor.shape) if each == size]


def _is_mask(name: str, tensor: Tensor) -> bool:
    return tensor.dtype == torch.bool or "mask" in name.lower()


def _find(what: str, size: int | None, inputs: Inputs, named: dict) -> Axis:
    """Where ``what`` is in each input: where its hint says, else the one axis of ``size``
    (an annotated input's, if any). A mask with two such axes has none."""
    stated = {id(t): named[n][what] % t.ndim for n, t in inputs if what in named.get(n, {})}
    size = next((t.shape[stated[id(t)]] for _, t in inputs if id(t) in stated), size or 0)
    of: dict[int, int] = {}
    for name, tensor in inputs if size else []:
        hits = [stated[id(tensor)]] if id(tensor) in stated else _hits(tensor, size)
        if len(hits) > 1 and not _is_mask(name, tensor):
            return Axis(size, {}, f"two axes of size {size} in {name}")
        of.update({id(tensor): hits[0]} if len(hits) == 1 else {})
    return Axis(size, of, "" if of or not size else f"no input has an axis of size {size}")


def _moved(base: list[Tensor], after: list[Tensor], sizes: tuple, part: Any) -> Tensor | None:
    """The first output whose ``part(where changed, batch axes, time axes)`` moved."""
    for old, new in zip(base, after, strict=False):
        if old.shape != new.shape or old.dtype != new.dtype:
            return old
        changed = old != new
        if old.is_floating_point() or old.is_complex():
            tolerance = max(TOLERANCE, 8 * torch.finfo(old.real.dtype).eps)
            scale = float(old.abs().nan_to_num(0.0, 0.0, 0.0).max())
            changed = ~torch.isclose(new, old, tolerance, tolerance * scale, equal_nan=True)
        picked = part(changed, *(_hits(old, size) for size in sizes))
        if picked is not None and bool(picked.any()):
            return old
    return None


def _fill(tensor: Tensor, batch: int, time: int, marked: Tensor) -> Tensor:
    """``tensor`` with the marked steps of each row given its first unmarked step's value."""
    x, marked = tensor.movedim((batch, time), (0, 1)).clone(), marked.to(tensor.device)
    spread = marked & ~marked.all(1, keepdim=True)  # a row marked throughout stays
    first = x[torch.arange(len(x), device=x.device), (~marked).int().argmax(1)]
    x[spread] = first[spread.nonzero()[:, 0]]
    return x.movedim((0, 1), (batch, time))


def _marks(mask: Tensor, batch: Axis, time: Axis) -> Tensor | None:
    """The ``(batch, time)`` steps a padding mask marks (``-inf`` in an additive one); None
    if ``mask`` is not one, or marks every step or none."""
    ends = (batch.of.get(id(mask)), time.of.get(id(mask)))
    if ends != (0, mask.ndim - 1) or mask.numel() != batch.size * time.size:
        return None
    flat = mask[(slice(None), *[0] * (mask.ndim - 2))]  # the axes between are of size 1
    if flat.is_floating_point() and bool(((flat == 0) | (flat == float("-inf"))).all()):
        flat = flat == float("-inf")
    elif bool(((flat == 0) | (flat == 1)).all()):
        flat = flat != 0
    return flat if flat.dtype == torch.bool and 0 < int(flat.sum()) < flat.numel() else None


def _triangle(buffer: Tensor) -> bool:
    """Whether a buffer is a causal mask: a lower-triangular matrix of ones (any leading
    axes of size 1), or the additive ``triu(-inf, 1)``."""
    n = buffer.shape[-1] if buffer.ndim >= 2 else 0
    if n < 2 or buffer.shape[-2] != n or buffer.numel() != n * n:
        return False
    square, future = buffer[(0,) * (buffer.ndim - 2)], torch.full((n, n), float("-inf")).triu(1)
    additive = buffer.is_floating_point() and torch.equal(square, future.to(square))
    return additive or torch.equal(square, torch.ones_like(square).tril())


@functools.cache
def _users(file: str) -> bool:
    return _library(file) is None and not _is_machinery(file)


@functools.cache
def _forward(cls: type) -> tuple[str, int, str, bool]:
    """The file, line and text of the ``def`` of ``cls.forward``, and whether its text calls
    ``scaled_dot_product_attention(..., is_causal=True)``."""
    code = getattr(inspect.unwrap(cls.forward), "__code__", None)
    file, line = (code.co_filename, code.co_firstlineno) if code else ("<unknown>", 0)
    while (text := linecache.getline(file, line).strip()).startswith("@"):
        line += 1
    with contextlib.suppress(OSError, TypeError):  # no source: no such call seen
        source = re.sub(r"\s", "", inspect.getsource(cls.forward))
        return file, line, text, "dot_product_attention(" in source and "is_causal=True" in source
    return file, line, text, False


class Behaviour:
    """Checks the modules called while its ``hooks`` are on, given the run's batch size and
    sequence length and the classes that must be causal."""

    def __init__(self, findings: Findings, batch: int | None, time: int | None, causal: list):
        self.findings, self.sizes, self.causal = findings, (batch, time), set(causal)
        self.evaluating, self.stack = False, []  # the running module calls, with their copies
        self.names: weakref.WeakKeyDictionary[nn.Module, str] = weakref.WeakKeyDictionary()
        self.seen: weakref.WeakKeyDictionary[nn.Module, set] = weakref.WeakKeyDictionary()
        self.placed: weakref.WeakKeyDictionary[nn.Module, dict] = weakref.WeakKeyDictionary()
        self.classes: set[type] = set()
        self.verdicts: dict[tuple, dict[str, Any]] = {}
        self.why: dict[tuple[str, str, str], str] = {}  # a property never checked, and why
        self.flagged: dict[str, set[int]] = {}  # by kind, the modules found with it

    def hooks(self) -> list[RemovableHandle]:
        """The global module hooks that do the work; removing them ends it."""
        after = torch_module.register_module_forward_hook
        hook = after(self._after, with_kwargs=True, always_call=True)
        return [torch_module.register_module_forward_pre_hook(self._before), hook]

    def _before(self, module: nn.Module, args: tuple) -> None:
        """A copy before a call whose positional arguments are new and hold the sizes."""
        pristine: Any = False  # not checked
        if threading.current_thread() is not threading.main_thread():
            return  # as the guard, the main thread only
        if not self.evaluating:
            if not self.stack and module not in self.names:
                self.names.update((sub, name) for name, sub in module.named_modules())
            self.classes.add(type(module))
            if self._subject(module):
                key = (_signature(args, self.sizes), None)
                held = _named(type(module)) or any(max(t[1:], default=-1) >= 0 for t in key[0])
                new = key not in self.seen.setdefault(module, set())
                pristine = self._copy(module) if new and held else None
                self.seen[module].add(key)
        self.stack.append((module, pristine))

    def _subject(self, module: nn.Module) -> bool:
        """Defined in the user's files, or a torch module that their code called."""
        cls = type(module)
        if _users(getattr(sys.modules.get(cls.__module__), "__file__", None) or "<none>"):
            return True
        if not cls.__module__.startswith("torch.nn."):
            return False
        frame = sys._getframe(2)
        while frame.f_back is not None and frame.f_code.co_filename == torch_module.__file__:
            frame = frame.f_back
        return _users(frame.f_code.co_filename)

    @staticmethod
    def _copy(module: nn.Module) -> nn.Module | None:
        """A deep copy in eval mode, sharing the parameters, which no check writes to."""
        try:
            return copy.deepcopy(module, {id(p): p for p in module.parameters()}).eval()
        except Exception:  # a module holding what cannot be copied: not checked
            return None

    def _after(self, module: nn.Module, args: tuple, *rest: Any) -> None:
        """Checks a call with a new signature: no guard or annotation finding, no output on the
        program's streams (no warnings filter: it would show once-shown warnings again)."""
        main = threading.current_thread() is threading.main_thread()
        _, pristine = self.stack.pop() if self.stack and main else (None, False)
        key = rest[1:] and (_signature(args, self.sizes), _signature(rest[0], self.sizes))
        if pristine is False or not key or key in self.seen[module]:
            return  # not checked, its forward raised, or seen
        self.seen[module].add(key)
        try:
            bound = inspect.signature(module.forward).bind(*args, **rest[0])
        except (TypeError, ValueError):  # a forward without a signature: not checked
            return
        self.evaluating, out = True, io.StringIO()
        recording = getattr(sys.modules.get(f"{__package__}.annotations"), "RECORDING", [])
        recording.append((Findings(), False))
        try:
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out), torch.no_grad():
                self._check(module, pristine, bound)  # a warning too is printed to `out`
        finally:
            self.evaluating = False
            recording.pop()

    def _check(self, module: nn.Module, pristine: Any, bound: inspect.BoundArguments) -> None:
        inputs: Inputs = []  # the tensor arguments, each object once: `q=x, k=x` is one input
        for name, value in bound.arguments.items():
            if isinstance(value, Tensor) and all(value is not tensor for _, tensor in inputs):
                inputs.append((name, value))
        named, where = _named(type(module)), (self.names.get(module, ""), type(module).__qualname__)
        batch, time = (_find(w, s, inputs, named) for w, s in zip(("batch", "time"), self.sizes))  # noqa: B905
        placed = {n: batch.of[id(t)] for n, t in inputs if id(t) in batch.of}
        if any(self.placed.setdefault(module, placed).get(n, a) != a for n, a in placed.items()):
            batch = Axis(batch.size, {}, f"its axis of size {batch.size} moved since")
        for what, axis in (("rows", batch), ("causality", time)):
            self.why.setdefault((*where, what), axis.why)
        pristine = (batch.of or time.of) and (pristine or self._copy(module))
        sizes = (batch.size, time.size)

        def run(new: dict[int, Tensor]) -> list[Tensor]:
            """The outputs of a fresh copy given the inputs with ``new`` in place, from the
            program's random state, restored after; [] if the module raised."""
            model = copy.deepcopy(pristine, {id(p): p for p in pristine.parameters()})
            call = copy.copy(bound)
            call.arguments = {n: new.get(id(v), v) for n, v in bound.arguments.items()}
            devices = range(torch.cuda.device_count()) if torch.cuda.is_initialized() else []
            with torch.random.fork_rng(list(devices)):
                try:
                    outputs = _tensors(model(*call.args, **call.kwargs))
                except Exception:  # a changed input that this module refuses: no verdict
                    return []
            return [output for output in outputs if output.ndim and output.numel()]

        base = run({}) if pristine else []
        if base and batch.of and batch.size > 1:
            order = (torch.arange(batch.size) - 1) % batch.size
            middle = batch.size // 2  # kept, the others rolled: the rows around it change
            order[middle] = middle
            held = [t for _, t in inputs if id(t) in batch.of]
            rolled = {id(t): t.index_select(batch.of[id(t)], order.to(t.device)) for t in held}
            row = lambda changed, b, t: changed.select(b[0], middle) if len(b) == 1 else None  # noqa: E731
            self.why[(*where, "rows")] = ""
            if (moved := _moved(base, run(rolled), sizes, row)) is not None:
                self._record("batch-mixing", module, inputs, moved, None)
        steps = [(n, t) for n, t in inputs if id(t) in time.of and not _is_mask(n, t)]
        if base and steps and time.size > 1:
            self._causality(module, inputs, base, run, sizes, *steps[0], time.of[id(steps[0][1])])
        for name, mask in inputs if base and batch.of and time.of else []:
            marks = _marks(mask, batch, time) if _is_mask(name, mask) else None
            if marks is not None and not self._honoured(inputs, base, run, batch, time, marks):
                self._record("mask-ignored", module, inputs, base[0], name)

    def _causality(self, module, inputs, base, run, sizes, name, tensor, axis) -> None:
        """The first step copied onto the last of ``tensor``: are the earlier steps of each
        output along time unchanged? A verdict, and a finding if the module says causal."""
        order = torch.arange(sizes[1])
        order[-1] = 0
        changed = tensor.index_select(axis, order.to(tensor.device))
        after = [] if torch.equal(changed, tensor) else run({id(tensor): changed})
        earlier = lambda d, b, t: d.narrow(t[0], 0, sizes[1] - 1) if len(t) == 1 else None  # noqa: E731
        compared = [out for out in base if len(_hits(out, sizes[1])) == 1]
        if after and compared:
            moved = _moved(base, after, sizes, earlier)
            result = compared[0] if moved is None else moved
            self._record("causality", module, inputs, result, name, moved is None)
            if moved is not None and (_forward(type(module))[3] or self._declares(module)):
                self._record("not-causal", module, inputs, moved, name)

    def _honoured(self, inputs: Inputs, base, run, batch: Axis, time: Axis, marks: Tensor) -> bool:
        """Whether changing one input where one polarity of ``marks`` marks leaves the
        outputs at the other steps unchanged; True when no change could be made."""
        tried = False
        for marked in (marks, ~marks):

            def others(changed: Tensor, b: list[int], t: list[int], kept=~marked) -> Any:
                if len(b) > 1 or len(t) > 1 or (t and not b):
                    return None  # which step is which cannot be told
                kept = kept.to(changed.device)
                return changed.movedim((b[0], t[0]), (0, 1))[kept] if t else changed

            for name, t in inputs:
                if id(t) in batch.of and id(t) in time.of and not _is_mask(name, t):
                    changed = _fill(t, batch.of[id(t)], time.of[id(t)], marked)
                    after = [] if torch.equal(changed, t) else run({id(t): changed})
                    if after and _moved(base, after, (batch.size, time.size), others) is None:
                        return True
                    tried |= bool(after)
        return not tried

    def _declares(self, module: nn.Module) -> bool:
        """Whether ``module`` says it is causal by an attribute, a buffer or ``--causal``."""
        if {type(module).__name__, type(module).__qualname__} & self.causal:
            return True
        if any(getattr(module, name, None) is True for name in ("causal", "is_causal")):
            return True
        return any(_triangle(buffer) for buffer in module.buffers(recurse=False))

    def _record(self, kind, module, inputs, output: Tensor, argument, causal=None) -> None:
        """A verdict (``causal`` given), or a finding unless a module inside has one of the
        same kind: the innermost is the one to fix."""
        file, line, source, _ = _forward(type(module))
        name, cls = self.names.get(module, ""), type(module).__qualname__
        entry: dict[str, Any] = dict(
            kind=kind, op=cls, shapes=[list(t.shape) for _, t in inputs],
            result=list(output.shape), file=file, line=line, source=source,
            library=_library(file), module=name, module_class=cls, argument=argument,
        )  # fmt: skip
        if causal is not None:
            self.why[(name, cls, "causality")] = ""
            verdict = self.verdicts.setdefault((name, cls, causal), {**entry, "count": 0})
            verdict.update(count=verdict["count"] + 1, causal=causal)
        elif not self.flagged.get(kind, set()) & {id(sub) for sub in module.modules()}:
            self.findings.add((kind, file, line, argument), lambda: BehaviourFinding(**entry))
        self.flagged.setdefault(kind, set()).add(id(module))

    def write_verdicts(self, path: Path) -> None:
        kept = ({k: v for k, v in each.items() if v is not None} for each in self.verdicts.values())
        rows = [json.dumps(each) for each in kept]
        path.write_text("[\n" + ",\n".join(f"  {r}" for r in rows) + "\n]\n" if rows else "[]\n")

    def summary(self) -> list[str]:
        """The causality verdicts counted, and why a module never had a property checked."""
        causal = sum(verdict["causal"] for verdict in self.verdicts.values())
        lines = [f"audit: {len(self.verdicts)} causality verdicts, {causal} causal"]
        for (name, cls, what), why in ((key, why) for key, why in self.why.items() if why):
            lines.append(f"audit: {what} not checked in {name or 'top module'} ({cls}): {why}")
        return lines

    def unknown_classes(self) -> list[str]:
        """The ``--causal`` classes that name no module class the program loaded."""
        known, pending = set(self.classes), [nn.Module]
        while pending:
            known |= set(pending := [sub for cls in pending for sub in cls.__subclasses__()])
        return sorted(self.causal.difference(*((c.__name__, c.__qualname__) for c in known)))
