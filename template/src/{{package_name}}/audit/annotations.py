"""The typechecker behind ``--typecheck PACKAGE``: jaxtyping's import hook puts
``@jaxtyped(typechecker=...)`` on every function of the package, and this typechecker is
beartype's check, except that while an audit runs a violation becomes a finding and the
call goes on. Every violated hint counts, not only shapes.

jaxtyping applies the typechecker to two stand-ins that share the function's signature:
one takes the parameters, the other also takes the return value as an extra keyword. It
calls the function itself between them, so recording instead of raising neither skips nor
repeats the call. A violation in the parameters is reported by the first stand-in only.
"""

import functools
import inspect
import sys
from collections.abc import Callable
from typing import Any

from beartype import beartype
from beartype.door import is_bearable
from beartype.roar import (
    BeartypeCallHintReturnViolation,
    BeartypeCallHintViolation,
    BeartypeException,
)

from .findings import Finding, Findings, describe, hint_text, places

__all__ = ["TYPECHECKER", "recording", "reporting_beartype"]

TYPECHECKER = f"{__name__}.reporting_beartype"
"""What ``jaxtyping.install_import_hook(..., typechecker=...)`` takes: a dotted name."""

_findings: Findings | None = None
"""Where violations go while an audit runs; outside one they raise as beartype's would."""
_raise_after_recording = False


def recording(findings: Findings | None, stop_on_first: bool = False) -> None:
    """Send violations to ``findings`` (None: raise them again); with ``stop_on_first`` the
    first one is recorded and then raised."""
    global _findings, _raise_after_recording
    _findings, _raise_after_recording = findings, stop_on_first


def reporting_beartype(stand_in: Callable[..., Any]) -> Callable[..., Any]:
    """beartype's check of ``stand_in``, recording violations while an audit runs."""
    try:
        checked = beartype(stand_in)
    except BeartypeException:
        return stand_in  # a hint beartype cannot read: unchecked, rather than a failed import
    output = _return_value_parameter(stand_in)

    @functools.wraps(stand_in)
    def check(*args: Any, **kwargs: Any) -> Any:
        try:
            return checked(*args, **kwargs)
        except BeartypeCallHintViolation as violation:
            findings = _findings
            if findings is None:
                raise
            if output is None:
                _record(findings, stand_in, *_culprit(stand_in, args, kwargs))
            elif isinstance(violation, BeartypeCallHintReturnViolation):
                hint = stand_in.__annotations__.get("return")
                _record(findings, stand_in, "return", hint, kwargs.get(output))
            else:
                return None  # the parameters: already reported by the other stand-in
            if _raise_after_recording:
                recording(None)  # jaxtyping's own report of the error re-runs the check
                raise
            return None

    return check


def _return_value_parameter(stand_in: Callable[..., Any]) -> str | None:
    """The keyword through which jaxtyping passes the return value to the second stand-in
    (``ret0``, or another free name starting with ``ret``); None for the first stand-in."""
    parameters = list(inspect.signature(stand_in).parameters.values())
    last = parameters[-1] if parameters else None
    if last is None or last.kind is not inspect.Parameter.KEYWORD_ONLY:
        return None
    hinted = stand_in.__annotations__.get(last.name)
    return last.name if last.name.startswith("ret") and hinted is Any else None


def _culprit(
    stand_in: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]
) -> tuple[str, object, object]:
    """The first parameter whose value its hint refuses, checked in order within the same
    shape memo, so axis sizes bound by the earlier parameters still count."""
    signature = inspect.signature(stand_in)
    bound = signature.bind(*args, **kwargs)
    for name, value in bound.arguments.items():
        hint = stand_in.__annotations__.get(name, Any)
        kind = signature.parameters[name].kind
        if kind is inspect.Parameter.VAR_POSITIONAL:
            values = value
        elif kind is inspect.Parameter.VAR_KEYWORD:
            values = value.values()
        else:
            values = (value,)
        for item in values:
            if not is_bearable(item, hint):
                return name, hint, item
    return "(parameters)", None, None


def _record(
    findings: Findings, stand_in: Callable[..., Any], argument: str, hint: object, value: object
) -> None:
    function = f"{stand_in.__module__}.{stand_in.__qualname__}"
    expected, (actual, shapes) = hint_text(hint), describe(value)
    innermost, user = places(sys._getframe(1))
    file, line, source = innermost or ("<unknown>", 0, "")
    key = ("annotation", file, line, function, argument, expected, actual)

    def make() -> Finding:
        finding = Finding("annotation", function, shapes, None, file, line, source)
        finding.function, finding.argument = function, argument
        finding.expected, finding.actual = expected, actual
        if user is not None:
            finding.user_file, finding.user_line, finding.user_source = user
        return finding

    findings.add(key, make)
