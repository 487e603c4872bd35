"""A hyperparameter's range, said once, in its type: ``gamma: ranges.ClosedUnitInterval``. The
parser reads it: ``--help`` prints ``float in [0, 1]``, a value outside is one ``error:`` line
naming the key, and the class gets a plain number (which its checkpoint holds). Built in Python,
a class checks its arguments with :func:`check`. pyright reads each type as its number type."""

import math
import typing
from collections.abc import Callable, Iterator, Mapping, Sequence
from types import UnionType
from typing import TYPE_CHECKING, Any

from jsonargparse.typing import register_type


def number_range(base: type, low: float, high: float = math.inf, brackets: str = "[)") -> type:
    """The ``base`` numbers from ``low`` to ``high``, each bound in or out as its bracket says:
    ``number_range(float, 0, 1, "[]")`` is ``float in [0, 1]``; with no ``high``, ``float >= 0``."""
    left, right = brackets
    name = f"{base.__name__} in {left}{low}, {high}{right}"
    if high == math.inf:
        name = f"{base.__name__} {'>=' if left == '[' else '>'} {low}"

    def new(cls: type, value: Any) -> Any:
        number = base(value)  # text that is no number raises here
        above = low <= number if left == "[" else low < number  # nan fails both
        below = number <= high if right == "]" else number < high  # inf fails with no high
        if not (above and below) or not isinstance(value, str) and number != value:  # int(2.5)
            raise ValueError(f"{value} is out of range")
        return number  # a plain number, as the checkpoint holds it

    bounded = type(name, (base,), {"__new__": new, "__module__": __name__})
    register_type(bounded, base, bounded)  # read and written as ``base``, checked on each read
    return bounded


def check(function: Callable, values: Mapping[str, Any]) -> None:
    """Refuse any of ``values`` (the call's ``locals()``) outside the range its parameter's
    type declares, through ``X | None`` and sequences: a ``ValueError`` that names it."""
    for name, hint in typing.get_type_hints(function).items():
        for bounded, value in _ranged(hint, values.get(name)):
            try:
                bounded(value)
            except (TypeError, ValueError):
                message = f"{function.__qualname__}: {name}: {value!r} is not {bounded.__name__}"
                raise ValueError(message) from None


def _ranged(hint: Any, value: Any) -> Iterator[tuple[type, Any]]:
    """Each range type in ``hint`` with the part of ``value`` it types."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if isinstance(hint, type) and hint.__module__ == __name__:
        yield hint, value
    elif origin in (typing.Union, UnionType) and value is not None:
        for arg in args:  # None's type holds no range
            yield from _ranged(arg, value)
    elif origin in (tuple, list, Sequence):
        for item in value or ():
            yield from _ranged(args[0], item)


if TYPE_CHECKING:
    PositiveInt = NonNegativeInt = int
    PositiveFloat = NonNegativeFloat = float
    ClosedUnitInterval = OpenUnitInterval = ClosedOpenUnitInterval = float
else:
    PositiveInt, NonNegativeInt = number_range(int, 1), number_range(int, 0)
    PositiveFloat, NonNegativeFloat = number_range(float, 0, brackets="()"), number_range(float, 0)
    ClosedUnitInterval = number_range(float, 0, 1, "[]")
    OpenUnitInterval = number_range(float, 0, 1, "()")
    ClosedOpenUnitInterval = number_range(float, 0, 1)
