"""What the audit reports: one :class:`Finding` per distinct problem, with how often it
happened, and the JSON report CI reads. A broadcast is merged by (file, line, op, shapes);
an annotation by (file, line, function, argument, expected hint, the value's type, shapes),
so one violation inside a loop is one finding whatever the value at each step.

A finding's place is the innermost frame outside torch and the checkers (jaxtyping,
beartype, this audit). When that frame is in an installed library (under the standard
library or a site-packages folder), ``library`` names it and ``user_file``, ``user_line``
and ``user_source`` give the first frame in the user's own files: the call to change.
"""

import importlib.util
import json
import linecache
import os
import sys
import sysconfig
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from types import FrameType
from typing import Any, Literal

from ..core.broadcast import Stretch

__all__ = ["Finding", "Findings", "place"]


@dataclass
class Finding:
    """One distinct problem. ``kind`` is ``"broadcast"`` (``op`` stretched ``shapes`` to
    ``result``) or ``"annotation"`` (``function``'s ``argument`` was ``actual``, not
    ``expected``; ``op`` is the function, ``shapes`` the value's shape if it has one, and
    ``result`` empty). ``actual`` is the first value seen; ``count`` counts them all."""

    kind: Literal["broadcast", "annotation"]
    op: str
    shapes: list[list[int]]
    result: list[int]
    file: str
    line: int
    source: str
    count: int = 1
    library: str | None = None
    user_file: str | None = None
    user_line: int | None = None
    user_source: str | None = None
    function: str | None = None
    argument: str | None = None
    expected: str | None = None
    actual: str | None = None

    def as_json(self) -> dict[str, Any]:
        """Every field but those that do not apply to this finding (None)."""
        return {key: value for key, value in asdict(self).items() if value is not None}

    def summary(self) -> str:
        """Two or three lines for the terminal; the JSON report is the full record."""
        times = f"{self.count} time{'s' * (self.count != 1)}"
        if self.kind == "broadcast":
            shapes = [tuple(shape) for shape in self.shapes]
            listed = ", ".join(map(str, shapes[:-1])) + f" and {shapes[-1]}"
            what = f"{self.op} stretched every operand: {listed} -> {tuple(self.result)}"
        else:
            what = f"{self.function}: {self.argument} is {self.actual}, not {self.expected}"
        lines = [f"  {what}, {times}", f"    at {self.file}:{self.line}: {self.source}"]
        if self.library is not None:
            inside = f"    inside {self.library}"
            if self.user_file is not None:
                inside += f", called from {self.user_file}:{self.user_line}: {self.user_source}"
            lines.append(inside)
        return "\n".join(lines)


class Findings:
    """The findings of one run, in the order they were first seen."""

    def __init__(self) -> None:
        self._by_key: dict[tuple[Any, ...], Finding] = {}

    def add(self, key: tuple[Any, ...], make: Callable[[], Finding]) -> None:
        """Count one more of ``key``; ``make`` builds the finding the first time only, so a
        bug inside a training loop costs a dictionary lookup per step after the first."""
        found = self._by_key.get(key)
        if found is None:
            self._by_key[key] = found = make()
            _attribute(found, sys._getframe(1))
        else:
            found.count += 1

    def add_stretch(self, stretch: Stretch) -> None:
        """``BroadcastGuard(on_stretch=...)``."""
        shapes = [list(shape) for shape in stretch.shapes]
        file = stretch.file if stretch.file.startswith("<") else os.path.abspath(stretch.file)

        def make() -> Finding:
            result = list(stretch.result)
            return Finding(
                "broadcast", stretch.op, shapes, result, file, stretch.line, stretch.source
            )

        self.add((stretch.file, stretch.line, stretch.op, stretch.shapes), make)

    def __iter__(self) -> Iterator[Finding]:
        return iter(self._by_key.values())

    def __len__(self) -> int:
        return len(self._by_key)

    def write(self, path: Path) -> None:
        """A JSON list, one finding per line."""
        rows = [json.dumps(finding.as_json()) for finding in self]
        path.write_text(
            "[\n" + ",\n".join(f"  {row}" for row in rows) + "\n]\n" if rows else "[]\n"
        )


def _folder(name: str) -> str | None:
    spec = importlib.util.find_spec(name)  # a top-level name: found, not imported
    return os.path.join(os.path.dirname(spec.origin), "") if spec and spec.origin else None


_MACHINERY = tuple(
    folder
    for folder in (
        *map(_folder, ("torch", "jaxtyping", "beartype")),
        os.path.join(os.path.dirname(__file__), ""),
        os.path.abspath(sys.modules[Stretch.__module__].__file__ or ""),
    )
    if folder
)
"""Frames that are never a finding's place: torch, the checkers, the guard and the audit."""
_STANDARD_LIBRARY = {os.path.realpath(sysconfig.get_path(key)) for key in ("stdlib", "platstdlib")}


def _library(filename: str) -> str | None:
    """The installed library a file is in, by its top-level name (``x_transformers``,
    ``json``); None for the user's own files. Code made at run time counts as a library's."""
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


def _attribute(finding: Finding, frame: FrameType | None) -> None:
    """For a finding placed in a library: the library's name, and the first frame outwards
    in the user's own files."""
    if _library(finding.file) is None:
        return
    while frame is not None:
        filename = frame.f_code.co_filename
        if not _is_machinery(filename):
            library = _library(filename)
            if library is None:
                finding.user_file, finding.user_line, finding.user_source = _source(frame)
                return
            finding.library = finding.library or library
        frame = frame.f_back
