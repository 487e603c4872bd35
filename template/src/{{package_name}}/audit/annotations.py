"""``--typecheck PACKAGE``: beartype's check, but while an audit runs a violated hint is a finding
and the call goes on. Of jaxtyping's two stand-ins, the first reports a violated parameter."""

import dis
import inspect
import re
from collections.abc import Callable
from functools import partial, wraps
from typing import Any

from beartype import beartype, roar
from beartype.door import is_bearable

from .findings import Finding, Findings, place

TYPECHECKER = f"{__name__}.reporting_beartype"  # install_import_hook takes a dotted name

RECORDING: list[tuple[Findings, bool]] = []
"""While an audit runs: where violations go, and whether to raise them (``--stop-on-first``)."""


def reporting_beartype(stand_in: Callable[..., Any]) -> Callable[..., Any]:
    """beartype's check of ``stand_in``, recording violations while an audit runs."""
    try:
        checked = beartype(stand_in)
    except roar.BeartypeException:
        return stand_in  # a hint beartype cannot read: unchecked, rather than a failed import
    read = dis.get_instructions(stand_in)  # the one local the return value's stand-in reads
    output = next((op.argval for op in read if op.opname.startswith("LOAD_FAST")), None)

    @wraps(stand_in)
    def check(*args: Any, **kwargs: Any) -> Any:
        try:
            return checked(*args, **kwargs)
        except roar.BeartypeCallHintViolation as violation:
            if not RECORDING:
                raise
            findings, stop_on_first = RECORDING[-1]
            if output is None:
                _record(findings, stand_in, *_culprit(stand_in, args, kwargs))
            elif isinstance(violation, roar.BeartypeCallHintReturnViolation):
                hint = stand_in.__annotations__.get("return")
                _record(findings, stand_in, "return", hint, kwargs.get(output))
            else:
                return None  # the parameters: already reported by the other stand-in
            if stop_on_first:
                RECORDING.clear()  # jaxtyping's own report of the error re-runs the check
                raise
            return None

    return check


def _culprit(stand_in: Callable, args: tuple, kwargs: dict) -> tuple[str, object, object]:
    """The first parameter its hint refuses, in order in one shape memo: earlier sizes bind."""
    signature = inspect.signature(stand_in)
    for name, value in signature.bind(*args, **kwargs).arguments.items():
        hint = stand_in.__annotations__.get(name, Any)
        kind, items = signature.parameters[name].kind, (value,)
        if kind in (kind.VAR_POSITIONAL, kind.VAR_KEYWORD):  # a tuple, or a dict
            items = value.values() if isinstance(value, dict) else value
        for item in items:
            if not is_bearable(item, hint):
                return name, hint, item
    return "(parameters)", None, None


def _record(findings: Findings, stand_in: Callable, argument: str, hint, value) -> None:
    """Keyed by the value's type and shape: a new wrong value each step stays one finding."""
    function = f"{stand_in.__module__}.{stand_in.__qualname__}"
    expected = re.sub(r"^<class '(.*)'>$", r"\1", repr(hint))  # as its author wrote it
    expected = re.sub(r"\b(jaxtyping|typing|builtins|torch)\.", "", expected)
    actual, value_type, shapes = _describe(value)
    where = place(inspect.currentframe()) or ("<unknown>", 0, "")  # file, line, source
    key = ("annotation", *where[:2], function, argument, expected, value_type, *map(tuple, shapes))
    fields = dict(function=function, argument=argument, expected=expected, actual=actual)
    findings.add(key, partial(Finding, "annotation", function, shapes, [], *where, **fields))


def _describe(value: object) -> tuple[str, str, list[list[int]]]:
    """The finding's ``actual``, the value's type (and dtype) for the key, its ``shapes``."""
    shape, dtype = getattr(value, "shape", None), getattr(value, "dtype", None)
    value_type = type(value).__qualname__
    if isinstance(shape, tuple) and dtype is not None:  # a tensor or a NumPy array
        dims, dtype_name = [int(size) for size in shape], str(dtype).removeprefix("torch.")
        return f"{dtype_name} {tuple(dims)}", f"{value_type} {dtype_name}", [dims]
    if isinstance(value, bool | int | float | str) or value is None:
        return f"{type(value).__name__} {value!r:.60}", value_type, []
    return value_type, value_type, []
