"""``--behaviour``: what shapes cannot show, checked on the program's modules as it runs.
Each module defined in the user's files, and each torch module their code calls, is run
again at its first call with each signature, on a copy, with inputs changed only by moving
their own values: rows stay apart (``batch-mixing``), a module that declares itself causal
ignores the future (``not-causal``), a padding mask is honoured (``mask-ignored``).
docs/audit.md says which axis is which, the tolerance, and what the checks cannot see.
"""

import contextlib
import copy
import functools
import inspect
import io
import json
import linecache
import sys
import typing
import warnings
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.nn.modules import module as torch_module
from torch.overrides import TorchFunctionMode

from .findings import Finding, Findings, _is_machinery, _library

TOLERANCE = 1e-4
"""Unchanged: within ``TOLERANCE`` (``8 * eps`` in half precision) times the largest finite
magnitude of that output; NaNs equal."""
SAID = {
    "batch-mixing": "row 0 of an output moved when only the other rows changed",
    "not-causal": "declared causal, yet the last step of {} moved earlier steps",
    "mask-ignored": "{} is not honoured: the steps it marks moved the other steps",
}
Leaves = list[tuple[str, Tensor]]
Select = Callable[[Tensor, list[int], list[int]], Tensor | None]
"""From where an output changed, and its batch and time axes, the part a check compares."""


class BehaviourFinding(Finding):
    def summary(self) -> str:
        where, said = f"{self.module or 'the top module'} ({self.module_class})", SAID[self.kind]
        times = f"{self.count} time{'s' * (self.count != 1)}"
        first = f"  {self.kind} in {where}: {said.format(self.argument)}, {times}"
        return f"{first}\n    at {self.file}:{self.line}: {self.source}"


class Axis(NamedTuple):
    """The batch or time axis in one call: its size, where each input has it, and why it
    cannot be checked."""

    size: int
    of: dict[int, int]
    why: str


def _leaves(value: Any, name: str = "", found: Leaves | None = None) -> Leaves:
    """The tensors in ``value``, nested in tuples, lists and dicts, each object once."""
    found = [] if found is None else found
    if isinstance(value, Tensor) and value.layout == torch.strided:
        found += [] if any(value is seen for _, seen in found) else [(name, value)]
    elif isinstance(value, tuple | list | dict):
        for item in value.values() if isinstance(value, dict) else value:
            _leaves(item, name, found)
    return found


def _swap(value: Any, new: dict[int, Tensor]) -> Any:
    """``value`` with each tensor whose ``id`` is in ``new`` replaced."""
    if isinstance(value, Tensor):
        return new.get(id(value), value)
    if isinstance(value, dict):
        return {key: _swap(item, new) for key, item in value.items()}
    if not isinstance(value, tuple | list) or not _leaves(value):
        return value
    items = [_swap(item, new) for item in value]
    return type(value)(*items) if hasattr(value, "_fields") else type(value)(items)


def _signature(value: Any, sizes: tuple) -> tuple:
    """Each tensor's dtype, and which of its axes have the batch or the time size."""
    role = {size: i for i, size in enumerate(sizes) if size}
    return tuple((t.dtype, *(role.get(s, -1) for s in t.shape)) for _, t in _leaves(value))


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
                axis = i if i < variadic else i - len(tokens)
                named.setdefault(parameter, {})[token.lstrip("#")] = axis
    return named


def _hits(tensor: Tensor, size: int) -> list[int]:
    return [axis for axis, each in enumerate(tensor.shape) if each == size]


def _is_mask(name: str, tensor: Tensor) -> bool:
    return tensor.dtype == torch.bool or "mask" in name.lower()


def _find(what: str, size: int | None, inputs: Leaves, named: dict) -> Axis:
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


def _moved(base: list[Tensor], after: list[Tensor], batch: int, time: int, select: Select):
    """The first output whose ``select``ed part moved, within the tolerance."""
    for old, new in zip(base, after, strict=False):
        if old.shape != new.shape or old.dtype != new.dtype:
            return old
        if old.is_floating_point() or old.is_complex():
            tolerance = max(TOLERANCE, 8 * torch.finfo(old.real.dtype).eps)
            scale = float(old.abs().nan_to_num(0.0, 0.0, 0.0).max())
            changed = ~torch.isclose(new, old, tolerance, tolerance * scale, equal_nan=True)
        else:
            changed = old != new
        part = select(changed, _hits(old, batch), _hits(old, time))
        if part is not None and bool(part.any()):
            return old
    return None


def _fill(tensor: Tensor, batch: int, time: int, marked: Tensor) -> Tensor:
    """``tensor`` with the marked steps of each row given its first unmarked step's value."""
    x, marked = tensor.movedim((batch, time), (0, 1)), marked.to(tensor.device)
    first = (~marked).int().argmax(1).view(-1, 1, *[1] * (x.ndim - 2)).expand_as(x[:, :1])
    spread = (marked & ~marked.all(1, keepdim=True)).view(*marked.shape, *[1] * (x.ndim - 2))
    return torch.where(spread, x.gather(1, first), x).movedim((0, 1), (batch, time))


def _marks(mask: Tensor, batch: Axis, time: Axis) -> Tensor | None:
    """The ``(batch, time)`` steps a padding mask marks (``-inf`` in an additive one); None
    if ``mask`` is not one, or marks every step or none."""
    ends = (batch.of.get(id(mask)), time.of.get(id(mask)))
    if ends != (0, mask.ndim - 1) or mask.ndim < 2 or mask.numel() != batch.size * time.size:
        return None
    flat = mask.reshape(batch.size, time.size)
    if flat.is_floating_point() and bool(((flat == 0) | (flat == float("-inf"))).all()):
        flat = flat == float("-inf")
    elif bool(((flat == 0) | (flat == 1)).all()):
        flat = flat != 0
    return flat if flat.dtype == torch.bool and 0 < int(flat.sum()) < flat.numel() else None


def _triangle(buffer: Tensor) -> bool:
    """Whether a buffer is a causal mask: a lower-triangular matrix of ones (any leading
    axes of size 1), or the additive ``triu(-inf, 1)``."""
    n = buffer.shape[-1] if buffer.ndim >= 2 else 0
    if n < 2 or buffer.numel() != n * n or buffer.shape[-2] != n:
        return False
    square = buffer.reshape(n, n)
    additive = square.is_floating_point() and torch.equal(
        square, torch.full_like(square, float("-inf")).triu(1)
    )
    return additive or torch.equal(square, torch.ones_like(square).tril())


def _own(filename: str) -> bool:
    return _library(filename) is None and not _is_machinery(filename)


@functools.cache
def _own_class(cls: type) -> bool:
    return _own(getattr(sys.modules.get(cls.__module__), "__file__", None) or "<none>")


@functools.cache
def _forward_place(cls: type) -> tuple[str, int, str]:
    """The file, line and text of the ``def`` of ``cls.forward``."""
    code = getattr(inspect.unwrap(cls.forward), "__code__", None)
    file, line = (code.co_filename, code.co_firstlineno) if code else ("<unknown>", 0)
    while (text := linecache.getline(file, line).strip()).startswith("@"):
        line += 1
    return file, line, text


class _CausalSpy(TorchFunctionMode):
    """Sees ``scaled_dot_product_attention(..., is_causal=True)`` called in the forward of
    the module at ``depth`` in the stack of running module calls: the one evaluated."""

    def __init__(self, stack: list, depth: int) -> None:
        super().__init__()
        self.stack, self.depth, self.seen = stack, depth, False

    def __torch_function__(self, func, types, args=(), kwargs=None):  # noqa: ANN001
        kwargs = kwargs or {}
        if func is F.scaled_dot_product_attention and len(self.stack) == self.depth:
            self.seen |= bool(kwargs.get("is_causal", len(args) > 5 and args[5]))
        return func(*args, **kwargs)


class Behaviour:
    """``with Behaviour(findings, batch, time, causal):`` checks the modules called inside,
    given the run's batch size and sequence length and the classes that must be causal."""

    def __init__(self, findings: Findings, batch: int | None, time: int | None, causal: list):
        self.findings, self.sizes, self.causal = findings, (batch, time), set(causal)
        self.evaluating, self.stack = False, []  # the running calls, with their copies
        self.names: weakref.WeakKeyDictionary[nn.Module, str] = weakref.WeakKeyDictionary()
        self.seen: weakref.WeakKeyDictionary[nn.Module, set] = weakref.WeakKeyDictionary()
        self.classes: set[type] = set()
        self.verdicts: dict[tuple, dict[str, Any]] = {}
        self.why: dict[tuple[str, str, str], str] = {}  # a property never checked, and why
        self.flagged: dict[str, set[int]] = {kind: set() for kind in SAID}
        self.placed: weakref.WeakKeyDictionary[nn.Module, dict] = weakref.WeakKeyDictionary()

    def __enter__(self) -> "Behaviour":
        self.hooks = contextlib.ExitStack()
        self.hooks.callback(torch_module.register_module_forward_pre_hook(self._before).remove)
        after = torch_module.register_module_forward_hook
        self.hooks.callback(after(self._after, with_kwargs=True, always_call=True).remove)
        return self

    def __exit__(self, *exc: object) -> None:
        self.hooks.close()

    def _before(self, module: nn.Module, args: tuple) -> None:
        """A copy before each call whose positional arguments have a new signature (one new
        by its keyword arguments only is copied after it)."""
        pristine: Any = False  # not checked
        if not self.evaluating:
            if not self.stack and module not in self.names:
                self.names.update((sub, name) for name, sub in module.named_modules())
            self.classes.add(type(module))
            if self._subject(module):
                key = (_signature(args, self.sizes), None)
                seen = self.seen.setdefault(module, set())
                touched = any(max(axes[1:], default=-1) >= 0 for axes in key[0])
                new = key not in seen and (touched or _named(type(module)))
                pristine = self._copy(module) if new else None
                seen.add(key)
        self.stack.append((module, pristine))

    def _subject(self, module: nn.Module) -> bool:
        """Defined in the user's files, or a torch module that their code called."""
        if _own_class(type(module)) or not type(module).__module__.startswith("torch."):
            return _own_class(type(module))
        frame = sys._getframe(2)
        while frame.f_back is not None and frame.f_code.co_filename == torch_module.__file__:
            frame = frame.f_back
        return _own(frame.f_code.co_filename)

    @staticmethod
    def _copy(module: nn.Module) -> nn.Module | None:
        """A deep copy in eval mode, sharing the parameters, which no check writes to."""
        try:
            return copy.deepcopy(module, {id(p): p for p in module.parameters()}).eval()
        except Exception:  # a module holding what cannot be copied: not checked
            return None

    def _after(self, module: nn.Module, args: tuple, *rest: Any) -> None:
        """Checks a call with a new signature, with no guard or annotation finding (while
        ``evaluating``), no output or warning of the program's, and no gradient."""
        _, pristine = self.stack.pop() if self.stack else (None, False)
        if pristine is False or len(rest) != 2:  # not checked, or the forward raised
            return
        key = (_signature(args, self.sizes), _signature(rest[0], self.sizes))
        if key in self.seen[module]:
            return
        self.seen[module].add(key)
        self.evaluating = True
        recording = getattr(sys.modules.get(f"{__package__}.annotations"), "RECORDING", [])
        recording.append((Findings(), False))
        try:
            out, stop = io.StringIO(), contextlib.redirect_stdout
            with (
                stop(out),
                contextlib.redirect_stderr(out),
                warnings.catch_warnings(),
                torch.no_grad(),
            ):
                warnings.simplefilter("ignore")
                self._check(module, pristine, args, rest[0])
        finally:
            self.evaluating = False
            recording.pop()

    def _check(self, module: nn.Module, pristine: Any, args: tuple, kwargs: dict) -> None:
        try:
            arguments = inspect.signature(module.forward).bind(*args, **kwargs).arguments
        except (TypeError, ValueError):
            arguments = {**{f"args[{i}]": arg for i, arg in enumerate(args)}, **kwargs}
        inputs: Leaves = []
        for name, value in arguments.items():
            _leaves(value, name, inputs)
        named, where = _named(type(module)), (self.names.get(module, ""), type(module).__qualname__)
        batch, time = (_find(w, s, inputs, named) for w, s in zip(("batch", "time"), self.sizes))  # noqa: B905
        placed = {n: batch.of[id(t)] for n, t in inputs if id(t) in batch.of}
        if any(self.placed.setdefault(module, placed).get(n, a) != a for n, a in placed.items()):
            batch = Axis(batch.size, {}, "")  # it was elsewhere before: a length, not a batch
        for what, axis in (("rows", batch), ("causality", time)):
            self.why.setdefault((*where, what), axis.why)
        spy = _CausalSpy(self.stack, len(self.stack) + 1)

        def run(new: dict[int, Tensor]) -> list[Tensor]:
            """The outputs of a fresh copy, given the inputs with ``new`` swapped in, from the
            program's random state, restored after; [] if the module raised."""
            model = copy.deepcopy(pristine, {id(p): p for p in pristine.parameters()})
            devices = range(torch.cuda.device_count()) if torch.cuda.is_initialized() else []
            spying = spy if time.of and not new else contextlib.nullcontext()
            with torch.random.fork_rng(list(devices)), spying:
                try:
                    outputs = _leaves(model(*_swap(args, new), **_swap(kwargs, new)))
                except Exception:  # a changed input that this module refuses: no verdict
                    return []
            return [output for _, output in outputs if output.numel() and output.ndim]

        pristine = (batch.of or time.of) and (pristine or self._copy(module))
        base = run({}) if pristine else []
        if base and batch.of and batch.size > 1:
            order = (torch.arange(batch.size) - 1) % batch.size
            order[0] = 0  # row 0 kept, the others rolled: the rows around it change
            new = {
                i: t.index_select(a, order.to(t.device))
                for _, t in inputs
                if (a := batch.of.get(i := id(t))) is not None
            }
            after = run(new)
            row = lambda d, b, t: d.select(b[0], 0) if len(b) == 1 else None  # noqa: E731
            self.why[(*where, "rows")] = ""
            if after and (moved := _moved(base, after, batch.size, time.size, row)) is not None:
                self._record("batch-mixing", module, inputs, moved, None)
        steps = [(n, t) for n, t in inputs if id(t) in time.of and not _is_mask(n, t)]
        if base and steps and time.size > 1:
            self._causality(module, inputs, base, run, batch, time, *steps[0], spy.seen)
        for name, mask in inputs if base and batch.of and time.of else []:
            marks = _marks(mask, batch, time) if _is_mask(name, mask) else None
            if marks is not None and not self._honoured(inputs, base, run, batch, time, marks):
                self._record("mask-ignored", module, inputs, base[0], name)

    def _causality(self, module, inputs, base, run, batch, time, name, tensor, spy) -> None:
        """The first step copied onto the last of the first input along time: are the
        earlier steps of each output along time unchanged?"""
        order = torch.arange(time.size)
        order[-1] = 0
        changed = tensor.index_select(time.of[id(tensor)], order.to(tensor.device))
        after = [] if torch.equal(changed, tensor) else run({id(tensor): changed})
        compared = [output for output in base if len(_hits(output, time.size)) == 1]
        if not (after and compared):
            return
        earlier: Select = lambda d, b, t: d.narrow(t[0], 0, time.size - 1) if len(t) == 1 else None  # noqa: E731
        moved = _moved(base, after, batch.size, time.size, earlier)
        self._record(
            "causality",
            module,
            inputs,
            compared[0] if moved is None else moved,
            name,
            moved is None,
        )
        if moved is not None and (spy or self._declares(module)):
            self._record("not-causal", module, inputs, moved, name)

    def _honoured(self, inputs, base, run, batch: Axis, time: Axis, marks: Tensor) -> bool:
        """Whether changing one input where one polarity of ``marks`` marks leaves the
        outputs at the other steps unchanged; True when no change could be made."""
        tried = False
        for marked in (marks, ~marks):

            def other_steps(changed: Tensor, b: list[int], t: list[int], kept=~marked) -> Any:
                if len(b) > 1 or len(t) > 1 or (t and not b):
                    return None  # which step is which cannot be told
                return (
                    changed.movedim((b[0], t[0]), (0, 1))[kept.to(changed.device)] if t else changed
                )

            for name, t in inputs:
                if id(t) in batch.of and id(t) in time.of and not _is_mask(name, t):
                    changed = _fill(t, batch.of[id(t)], time.of[id(t)], marked)
                    after = [] if torch.equal(changed, t) else run({id(t): changed})
                    if after and _moved(base, after, batch.size, time.size, other_steps) is None:
                        return True
                    tried |= bool(after)
        return not tried

    def _declares(self, module: nn.Module) -> bool:
        """Whether ``module`` says it is causal, other than by SDPA's ``is_causal=True``."""
        cls = type(module)
        if {cls.__name__, cls.__qualname__, f"{cls.__module__}.{cls.__qualname__}"} & self.causal:
            return True
        if any(getattr(module, name, None) is True for name in ("causal", "is_causal")):
            return True
        return any(_triangle(buffer) for buffer in module.buffers(recurse=False))

    def _record(self, kind, module, inputs, output: Tensor, argument, causal=None) -> None:
        """A verdict (``causal`` given), or a finding unless a module inside has one of the
        same kind: the innermost is the one to fix."""
        file, line, source = _forward_place(type(module))
        name, cls = self.names.get(module, ""), type(module).__qualname__
        entry = dict(kind=kind, op=cls, shapes=[list(t.shape) for _, t in inputs],
                     result=list(output.shape), file=file, line=line, source=source,
                     module=name, module_class=cls, argument=argument)  # fmt: skip
        if causal is not None:
            self.why[(name, cls, "causality")] = ""
            self.verdicts.setdefault((name, cls, causal), {**entry, "count": 0, "causal": causal})[
                "count"
            ] += 1
            return
        inside = any(id(sub) in self.flagged[kind] for sub in module.modules() if sub is not module)
        self.flagged[kind].add(id(module))
        if not inside:
            self.findings.add((kind, file, line, argument), lambda: BehaviourFinding(**entry))

    def write_verdicts(self, path: Path) -> None:
        rows = [json.dumps(verdict) for verdict in self.verdicts.values()]
        path.write_text("[\n" + ",\n".join(f"  {r}" for r in rows) + "\n]\n" if rows else "[]\n")

    def summary(self) -> list[str]:
        """The causality verdicts counted, and why a module never had a property checked."""
        causal = sum(verdict["causal"] for verdict in self.verdicts.values())
        lines = [f"audit: {len(self.verdicts)} causality verdicts, {causal} causal"]
        for (name, cls, what), why in self.why.items():
            lines += [f"audit: {what} not checked in {name or 'top module'} ({cls}): {why}"] * bool(
                why
            )
        return lines

    def unknown_classes(self) -> list[str]:
        """The ``--causal`` classes that name no module class the program loaded."""
        known, pending = set(self.classes), [nn.Module]
        while pending:
            known |= set(pending := [sub for cls in pending for sub in cls.__subclasses__()])
        names = [(c.__name__, c.__qualname__, f"{c.__module__}.{c.__qualname__}") for c in known]
        return sorted(self.causal.difference(*names))
