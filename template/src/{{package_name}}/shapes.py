"""The one switch for runtime shape checking.

Every typed function and every ``forward`` in this project is wrapped by
:func:`typechecked`, so how annotations are enforced can change here and nowhere else.
Checks are on by default; ``JAXTYPING_DISABLE=1`` in the environment turns them off.

What the decorator guarantees, and what it costs:

- The first call with a new *shape signature* (every tensor argument's shape and dtype,
  and the type of every other argument) is checked in full by jaxtyping and beartype.
  A mismatch raises ``jaxtyping.TypeCheckError`` naming the argument and both shapes.
- A signature that passed before, with a return signature that passed before, is not
  checked again: the verdict is remembered. The last partial batch, batch size 1 or a new
  sequence length are new signatures, so each is checked the first time it arrives.
- Inside ``torch.compile`` tracing, checks step aside (jaxtyping cannot follow dynamo's
  fake tensors). :func:`compiled` puts the same check at the compiled module's boundary.

Shape strings name axes from one vocabulary: ``batch``, ``time``, ``env``, ``feature``,
``action``, ``class``. A single-axis string starts with a space (``"batch"``) only so that
linters do not read it as a forward reference to a variable named ``batch``.

Copy-paste: this file imports only third-party packages.
"""

import enum
import functools
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import jaxtyping
import torch
from beartype import beartype
from jaxtyping import Bool, Float, Int, jaxtyped
from torch import Tensor, nn

__all__ = [
    "Bool",
    "Float",
    "Int",
    "Scalar",
    "Tensor",
    "checks_disabled",
    "compiled",
    "typechecked",
]

Function = TypeVar("Function", bound=Callable[..., Any])

Scalar = Float[Tensor, ""]
"""A 0-d float tensor: what every loss and metric returns."""

_REMEMBERED_SIGNATURES = 4096
"""Per function; past this the memory is cleared (a run with ever-new shapes stays bounded)."""

_VALUE_KEYED = frozenset({bool, int, str, type(None)})
"""Argument types whose value, not only type, is part of a signature (``Literal`` hints)."""


def _signature(value: object) -> object:
    """A hashable summary of everything an annotation can check about ``value``, or
    ``None`` when it cannot be summarised (then the call is checked in full every time)."""
    if isinstance(value, Tensor):
        return (value.shape, value.dtype)
    kind = type(value)
    if kind is float:
        return float
    if kind in _VALUE_KEYED or isinstance(value, enum.Enum):
        return (kind, value)
    if kind is tuple or kind is list:
        items = tuple(map(_signature, value))  # type: ignore[arg-type]
        return None if None in items else (kind, items)
    if isinstance(value, dict | set | frozenset) or hasattr(kind, "__array__"):
        return None  # containers and NumPy-like arrays: checked in full every time
    return kind  # the type decides (an nn.Module's ``self``, a distribution, ...)


def _call_signature(args: tuple, kwargs: dict[str, Any]) -> object:
    items = tuple(map(_signature, args))
    if kwargs:
        items += tuple(kwargs) + tuple(map(_signature, kwargs.values()))
    return None if None in items else items


class _ShapeCheck:
    """Checks calls of one function and remembers which signatures passed."""

    def __init__(self, function: Callable[..., Any]) -> None:
        self.checked = jaxtyped(typechecker=beartype)(function)
        self.passed: dict[object, set[object]] = {}

    def __call__(self, run: Callable[..., Any], args: tuple, kwargs: dict[str, Any]) -> Any:
        """Call ``run`` (the function, or a compiled equivalent) with checks as promised."""
        if jaxtyping.config.jaxtyping_disable:
            return run(*args, **kwargs)
        key = _call_signature(args, kwargs)
        if key is None:
            return self.checked(*args, **kwargs)
        returns = self.passed.get(key)
        if returns is not None:
            result = run(*args, **kwargs)
            if _signature(result) in returns:
                return result
            # Rare: known arguments, new kind of result. Re-run under the full check, which
            # checks the arguments and the result together.
        result = self.checked(*args, **kwargs)
        returned = _signature(result)
        if returned is not None:
            if len(self.passed) >= _REMEMBERED_SIGNATURES:
                self.passed.clear()
            self.passed.setdefault(key, set()).add(returned)
        return result


def typechecked(function: Function) -> Function:
    """Check ``function``'s annotated arguments and return value.

    One shape memo per call: an axis name such as ``batch`` must have the same size in
    every argument and in the return value, so ``(N,)`` against ``(N, 1)`` fails here.
    A class (a dataclass of tensors) gets jaxtyping's own check of its ``__init__``.
    """
    if isinstance(function, type):
        return jaxtyped(typechecker=beartype)(function)  # type: ignore[return-value]
    check = _ShapeCheck(function)

    @functools.wraps(function)
    def checked_call(*args: Any, **kwargs: Any) -> Any:
        if torch.compiler.is_compiling():
            return function(*args, **kwargs)
        return check(function, args, kwargs)

    checked_call.__typechecked__ = True  # type: ignore[attr-defined]
    checked_call.shape_check = check  # type: ignore[attr-defined]
    return checked_call  # type: ignore[return-value]


def compiled(module: nn.Module, **compile_options: Any) -> Callable[..., Any]:
    """``torch.compile(module)``, with ``module.forward``'s annotations checked at the boundary.

    Inside the compiled graph the checks step aside (no graph breaks); here each new shape
    signature first runs eagerly under the full check, then later calls with that signature
    run compiled. The result shares ``module``'s parameters; keep ``module`` as the
    registered submodule so checkpoints keep their names.
    """
    optimized = torch.compile(module, **compile_options)
    forward = type(module).forward
    check = getattr(forward, "shape_check", None)
    if check is None:
        return optimized

    def run(_: nn.Module, *args: Any, **kwargs: Any) -> Any:
        return optimized(*args, **kwargs)

    def boundary(*args: Any, **kwargs: Any) -> Any:
        return check(run, (module, *args), kwargs)

    return boundary


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
