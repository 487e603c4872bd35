"""One :class:`Finding` per distinct problem, and the JSON report (docs/audit.md). Its place: the
innermost frame outside torch, the checkers and the audit; in a library, the user's call into it."""

import importlib.util
import inspect
import json
import linecache
import math
import os
import sysconfig
import weakref
from collections.abc import Callable
from dataclasses import asdict, dataclass
from functools import partial
from pathlib import Path
from types import FrameType
from typing import Any, Literal

import torch
from torch import nn
from torch.nn.modules.module import register_module_forward_hook, register_module_forward_pre_hook

from ..core import broadcast
from ..core.broadcast import Stretch

BehaviourKind = Literal["batch-mixing", "not-causal", "mask-ignored", "causality"]


@dataclass
class Finding:
    """One distinct problem; docs/audit.md has a table of its fields by kind."""

    kind: Literal["broadcast", "annotation", "nonfinite"] | BehaviourKind
    op: str
    shapes: list[list[int]]
    result: list[int]
    file: str
    line: int
    source: str
    count: int = 1
    nonfinite: int | None = None
    saved: str | None = None
    library: str | None = None
    user_file: str | None = None
    user_line: int | None = None
    user_source: str | None = None
    function: str | None = None
    argument: str | None = None
    expected: str | None = None
    actual: str | None = None
    module: str | None = None
    module_class: str | None = None
    causal: bool | None = None

    def summary(self) -> str:
        """Two or three lines for the terminal; the JSON report is the full record."""
        times = f"{self.count} time{'s' * (self.count != 1)}"
        where = f" in {self.module or 'the top module'} ({self.module_class})"
        where *= self.module is not None
        if self.kind == "broadcast":
            shapes = [tuple(shape) for shape in self.shapes]
            listed = ", ".join(map(str, shapes[:-1])) + f" and {shapes[-1]}"
            what = f"{self.op} stretched every operand: {listed} -> {tuple(self.result)}"
        elif self.kind == "nonfinite":
            count = f"{self.nonfinite} of {math.prod(self.result)}"
            what = f"{self.op}{where} made {count} values non-finite"
            times = f"the program stopped; its inputs are in {self.saved}"
        elif self.kind == "annotation":
            what = f"{self.function}: {self.argument} is {self.actual}, not {self.expected}"
        else:  # --behaviour: the module, and the argument changed or not honoured
            what = f"{self.kind}{where}" + (f", argument {self.argument}" if self.argument else "")
        lines = [f"  {what}, {times}", f"    at {self.file}:{self.line}: {self.source}"]
        if self.library is not None:
            lines.append(f"    inside {self.library}")
            if self.user_file is not None:
                lines[-1] += f", called from {self.user_file}:{self.user_line}: {self.user_source}"
        return "\n".join(lines)


class Findings(dict[tuple[Any, ...], Finding]):
    """The findings of one run by their key, in the order they were first seen."""

    def add(self, key: tuple[Any, ...], make: Callable[[], Finding]) -> None:
        """Count one more of ``key``; ``make`` builds the finding the first time only (cost)."""
        if key in self:
            self[key].count += 1
        else:
            self[key] = finding = make()
            if _library(finding.file) is None:
                return
            frame = inspect.currentframe()  # in a library: its name, and the user's call into it
            while frame is not None:
                filename = frame.f_code.co_filename
                if not _is_machinery(filename):
                    library = _library(filename)
                    if library is None:
                        finding.user_file, finding.user_line, finding.user_source = _source(frame)
                        return
                    finding.library = finding.library or library
                frame = frame.f_back

    def add_stretch(self, s: Stretch) -> None:
        file = s.file if s.file.startswith("<") else os.path.abspath(s.file)
        shapes, result = [list(shape) for shape in s.shapes], list(s.result)
        finding = partial(Finding, "broadcast", s.op, shapes, result, file, s.line, s.source)
        self.add((s.file, s.line, s.op, s.shapes), finding)

    def write(self, path: Path) -> None:
        """A JSON list, one finding per line, without the fields that do not apply (None)."""
        rows = [{k: v for k, v in asdict(each).items() if v is not None} for each in self.values()]
        lines = [f"  {json.dumps(row)}" for row in rows]
        path.write_text("[\n" + ",\n".join(lines) + "\n]\n" if rows else "[]\n")


def tensors(value: Any) -> list[torch.Tensor]:
    """The strided tensors in ``value``, in its items, or in theirs."""
    if isinstance(value, tuple | list | dict):
        items = value.values() if isinstance(value, dict) else value
        return [tensor for item in items for tensor in tensors(item)]
    return [value] if isinstance(value, torch.Tensor) and value.layout == torch.strided else []


class Modules:
    """While ``hooks`` are on: the modules being called, innermost last; their qualified names."""

    def __init__(self) -> None:
        self.calling: list[nn.Module] = []
        self.names: weakref.WeakKeyDictionary[nn.Module, str] = weakref.WeakKeyDictionary()

    def hooks(self) -> list:
        leave = register_module_forward_hook(self.leave, with_kwargs=True, always_call=True)
        return [register_module_forward_pre_hook(self.enter), leave]

    def enter(self, module: nn.Module, args: Any) -> None:
        if module not in self.names:
            self.names.update((sub, name) for name, sub in module.named_modules())
        self.calling.append(module)

    def leave(self, *_: Any) -> None:
        del self.calling[-1]


def _folder(name: str) -> str:
    spec = importlib.util.find_spec(name)  # found, not imported: the checkers load on demand
    return os.path.join(os.path.dirname(str(spec and spec.origin)), "")


_MACHINERY = (  # frames that are never a finding's place: torch, the checkers, the audit
    *map(_folder, ("torch", "jaxtyping", "beartype")),
    os.path.join(os.path.dirname(__file__), ""),
    os.path.abspath(str(broadcast.__file__)),
)
_STANDARD_LIBRARY = {os.path.realpath(sysconfig.get_path(key)) for key in ("stdlib", "platstdlib")}


def _library(filename: str) -> str | None:
    """The installed library (``x_transformers``, ``json``) or run-time code a file is in."""
    if filename.startswith("<"):
        return filename
    parts = Path(os.path.realpath(filename)).parts
    for end in reversed(range(1, len(parts))):  # the innermost root: site-packages in stdlib
        root = os.path.join(*parts[:end])
        if parts[end - 1] in ("site-packages", "dist-packages") or root in _STANDARD_LIBRARY:
            return Path(parts[end]).stem
    return None


def _is_machinery(filename: str) -> bool:
    return filename.startswith("<") or os.path.abspath(filename).startswith(_MACHINERY)


def _source(frame: FrameType) -> tuple[str, int, str]:
    filename, line = frame.f_code.co_filename, frame.f_lineno
    return os.path.abspath(filename), line, linecache.getline(filename, line).strip()


def place(frame: FrameType | None) -> tuple[str, int, str] | None:
    """From ``frame`` outwards, the innermost file, line and source outside the machinery."""
    while frame is not None and _is_machinery(frame.f_code.co_filename):
        frame = frame.f_back
    return None if frame is None else _source(frame)
