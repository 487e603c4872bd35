"""What the audit reports: one :class:`Finding` per distinct problem, with how often it
happened, and the JSON report CI reads. A broadcast is merged by (file, line, op, shapes);
an annotation by (file, line, function, argument, expected hint, the value's type, shapes),
so one violation inside a loop is one finding whatever the value at each step.

A finding is attributed to the innermost frame outside torch and the checkers (jaxtyping,
beartype, this audit). When that frame is in an installed library, ``user_file``,
``user_line`` and ``user_source`` also give the first frame in the user's own files: the
call to change. A file is the user's unless it lies under the interpreter's standard
library or a site-packages folder.
"""

import importlib.util
import json
import linecache
import os
import site
import sys
import sysconfig
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from types import FrameType
from typing import Any, Literal

from ..core.broadcast import Stretch

__all__ = ["Finding", "Findings", "places"]

_REQUIRED = ("kind", "op", "shapes", "result", "file", "line", "source", "count")
"""Keys every finding has in the report; the others appear only when they apply."""


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
    user_file: str | None = None
    user_line: int | None = None
    user_source: str | None = None
    function: str | None = None
    argument: str | None = None
    expected: str | None = None
    actual: str | None = None

    def as_json(self) -> dict[str, Any]:
        fields = asdict(self).items()
        return {key: value for key, value in fields if value is not None or key in _REQUIRED}

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
        if self.user_file is not None:
            lines.append(f"    from {self.user_file}:{self.user_line}: {self.user_source}")
        return "\n".join(lines)


class Findings:
    """The findings of one run, in the order they were first seen."""

    def __init__(self) -> None:
        self._by_key: dict[tuple[Any, ...], Finding] = {}

    def add(self, key: tuple[Any, ...], make: Callable[[], Finding]) -> Finding:
        """Count one more of ``key``; ``make`` builds the finding the first time only, so a
        bug inside a training loop costs a dictionary lookup per step after the first."""
        found = self._by_key.get(key)
        if found is None:
            found = self._by_key[key] = make()
        else:
            found.count += 1
        return found

    def add_stretch(self, stretch: Stretch) -> Finding:
        """``BroadcastGuard(on_stretch=...)``: the guard already names the innermost line
        outside torch; the user's own frame is looked up only when that line is a library's."""
        key = (stretch.file, stretch.line, stretch.op, stretch.shapes)

        def make() -> Finding:
            user = _user_place() if _in_library(stretch.file) else None
            return Finding(
                "broadcast",
                stretch.op,
                [list(shape) for shape in stretch.shapes],
                list(stretch.result),
                os.path.abspath(stretch.file),
                stretch.line,
                stretch.source,
                **_user_fields(user),
            )

        return self.add(key, make)

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


_Place = tuple[str, int, str]
"""An absolute file, a line and its source text."""


def _folder(path: str) -> str:
    return os.path.join(path, "")


def _package_folder(name: str) -> str | None:
    spec = importlib.util.find_spec(name)  # a top-level name: found, not imported
    return _folder(os.path.dirname(spec.origin)) if spec and spec.origin else None


_MACHINERY = tuple(
    folder
    for folder in (
        *map(_package_folder, ("torch", "jaxtyping", "beartype")),
        _folder(os.path.dirname(__file__)),
        os.path.abspath(sys.modules[Stretch.__module__].__file__ or ""),
    )
    if folder
)
"""Frames that are never a finding's place: torch, the checkers, the guard and the audit."""

_LIBRARY_ROOTS = {
    path
    for key in ("stdlib", "platstdlib", "purelib", "platlib")
    if (path := sysconfig.get_paths().get(key))
}
_LIBRARY_ROOTS |= {*getattr(site, "getsitepackages", list)(), site.getusersitepackages()}
_LIBRARIES = tuple(
    {_folder(path) for path in _LIBRARY_ROOTS}
    | {_folder(os.path.realpath(path)) for path in _LIBRARY_ROOTS}
)


def _in_library(filename: str) -> bool:
    return filename.startswith("<") or os.path.abspath(filename).startswith(_LIBRARIES)


def _is_machinery(filename: str) -> bool:
    return filename.startswith("<") or os.path.abspath(filename).startswith(_MACHINERY)


def _place(frame: FrameType) -> _Place:
    filename, line = frame.f_code.co_filename, frame.f_lineno
    return os.path.abspath(filename), line, linecache.getline(filename, line).strip()


def places(frame: FrameType | None) -> tuple[_Place | None, _Place | None]:
    """From ``frame`` outwards: the innermost place outside the machinery, and the first in
    the user's own files when the innermost is in a library (else None)."""
    while frame is not None and _is_machinery(frame.f_code.co_filename):
        frame = frame.f_back
    if frame is None:
        return None, None
    innermost = _place(frame)
    return innermost, _user_place(frame) if _in_library(frame.f_code.co_filename) else None


def _user_place(frame: FrameType | None = None) -> _Place | None:
    frame = frame or sys._getframe(1)
    while frame is not None:
        filename = frame.f_code.co_filename
        if not _is_machinery(filename) and not _in_library(filename):
            return _place(frame)
        frame = frame.f_back
    return None


def _user_fields(user: _Place | None) -> dict[str, Any]:
    if user is None:
        return {}
    return dict(zip(("user_file", "user_line", "user_source"), user, strict=True))
