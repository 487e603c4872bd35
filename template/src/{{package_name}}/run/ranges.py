"""A hyperparameter's valid range, said once, in its type: ``gamma: ClosedUnitInterval``.

The parser reads the type: ``--help`` prints ``float in [0, 1]``, and ``--model.gamma=1.5``
is refused in one line that names the key and the range. A value passes through as a plain
``float`` or ``int``, so checkpoints and ``hparams.yaml`` hold plain numbers. The annotation
does nothing when the class is built in Python, so each ``__init__`` calls
:func:`check_ranges` once. pyright reads each type as the plain number it returns.
"""

import math
import operator
import typing
from collections.abc import Callable, Mapping, Sequence
from types import NoneType, UnionType
from typing import TYPE_CHECKING, Any

from jsonargparse.typing import register_type

_TESTS = {
    "gt": (">", operator.gt),
    "ge": (">=", operator.ge),
    "lt": ("<", operator.lt),
    "le": ("<=", operator.le),
}


def number_range(base: type, **bounds: float) -> type:
    """A type of ``base`` numbers within ``bounds`` (``gt``, ``ge``, ``lt``, ``le``; the lower
    first), named by its range: ``number_range(float, ge=0, lt=1)`` is ``float in [0, 1)``."""
    tests = [(*_TESTS[key], bound) for key, bound in bounds.items()]
    (low, _, a), *upper = tests
    name = f"{base.__name__} {low} {a}"
    if upper:
        (high, _, b), brackets = upper[0], {">": "(", ">=": "[", "<": ")", "<=": "]"}
        name = f"{base.__name__} in {brackets[low]}{a}, {b}{brackets[high]}"
    kind = "a whole number" if base is int else "a finite number"

    def new(cls: type, value: Any) -> Any:
        try:  # a string is the command line's; a number must be one exactly (not 2.5 for int)
            number = base(value)
            exact = isinstance(value, str) or number == value
        except (TypeError, ValueError, OverflowError):
            number, exact = math.nan, False
        if isinstance(value, bool) or not exact or not math.isfinite(number):
            raise ValueError(f"{value} is not {kind}")
        if not all(test(number, bound) for _, test, bound in tests):
            raise ValueError(f"{value} is out of range")
        return number  # a plain number: what the class gets, and its checkpoint holds

    bounded = type(name, (base,), {"__new__": new, "__module__": __name__})
    register_type(bounded, base, bounded)  # read and written as base; checked on every read
    return bounded


def check_ranges(function: Callable, values: Mapping[str, Any]) -> None:
    """Refuse any of ``values`` (a call's arguments, ``locals()``) outside the range its
    parameter declares, through ``X | None`` and sequences: a ``ValueError`` naming it."""
    for name, hint in typing.get_type_hints(function).items():
        try:
            _check(hint, values.get(name))
        except ValueError as error:
            raise ValueError(f"{function.__qualname__}: {name}: {error}") from None


def _check(hint: Any, value: Any) -> None:
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if isinstance(hint, type) and hint.__module__ == __name__:
        try:
            hint(value)
        except ValueError:
            raise ValueError(f"{value!r} is not {hint.__name__}") from None
    elif origin in (typing.Union, UnionType) and value is not None:
        for arg in args:
            if arg is not NoneType:
                _check(arg, value)
    elif origin in (tuple, list, Sequence):
        for item in value or ():
            _check(args[0], item)


if TYPE_CHECKING:
    PositiveInt = int
    NonNegativeInt = int
    PositiveFloat = float
    NonNegativeFloat = float
    ClosedUnitInterval = float
    OpenUnitInterval = float
    ClosedOpenUnitInterval = float
else:
    PositiveInt = number_range(int, ge=1)
    NonNegativeInt = number_range(int, ge=0)
    PositiveFloat = number_range(float, gt=0)
    NonNegativeFloat = number_range(float, ge=0)
    ClosedUnitInterval = number_range(float, ge=0, le=1)
    OpenUnitInterval = number_range(float, gt=0, lt=1)
    ClosedOpenUnitInterval = number_range(float, ge=0, lt=1)
