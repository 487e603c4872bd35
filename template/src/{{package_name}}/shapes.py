"""The one switch for runtime shape checking.

Every typed function and every ``forward`` in this project is wrapped by
:func:`typechecked`, so how annotations are enforced can change here and nowhere else.
Checks are on by default; ``JAXTYPING_DISABLE=1`` in the environment turns them off.

Shape strings name axes from one vocabulary: ``batch``, ``time``, ``env``, ``feature``,
``action``, ``class``. A single-axis string starts with a space (``"batch"``) only so that
linters do not read it as a forward reference to a variable named ``batch``.

Copy-paste: this file imports only third-party packages.
"""

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar

import jaxtyping
from beartype import beartype
from jaxtyping import Bool, Float, Int, jaxtyped
from torch import Tensor

__all__ = ["Bool", "Float", "Int", "Scalar", "Tensor", "checks_disabled", "typechecked"]

Function = TypeVar("Function", bound=Callable[..., object])

Scalar = Float[Tensor, ""]
"""A 0-d float tensor: what every loss and metric returns."""


def typechecked(function: Function) -> Function:
    """Check ``function``'s annotated arguments and return value at every call.

    One shape memo per call: an axis name such as ``batch`` must have the same size in
    every argument and in the return value, so ``(N,)`` against ``(N, 1)`` fails here.
    """
    return jaxtyped(typechecker=beartype)(function)


@contextmanager
def checks_disabled() -> Iterator[None]:
    """Run a block with runtime shape checks off, as ``JAXTYPING_DISABLE=1`` would.

    For measurements and for demonstrating what an unchecked bug does; not for hiding one.
    """
    previous = jaxtyping.config.jaxtyping_disable
    jaxtyping.config.update("jaxtyping_disable", True)
    try:
        yield
    finally:
        jaxtyping.config.update("jaxtyping_disable", previous)
