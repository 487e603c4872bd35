"""The one switch for runtime shape checking: every typed function and every ``forward`` is
wrapped by :func:`typechecked`, so how annotations are enforced changes here and nowhere
else. A verdict is remembered per shape signature, so a training loop pays for the full
jaxtyping and beartype check only when something new arrives; ``docs/defences.md`` ("How
shape checks work") states what a signature holds and what is checked at every call.

Shape strings name axes from one vocabulary (``batch``, ``time``, ``env``, ``feature``,
``action``, ``class``). A single-axis string starts with a space, ``Float[Tensor, " batch"]``,
as jaxtyping's FAQ advises: ruff's F821 would read ``"batch"`` as a forward reference.
"""

import functools
import inspect
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Annotated, Any, Literal, TypeVar, get_args, get_origin, get_type_hints

import jaxtyping
import torch
from beartype import beartype
from beartype.door import die_if_unbearable
from beartype.roar import BeartypeCallHintViolation
from jaxtyping import Bool, Float, Int, TypeCheckError, jaxtyped
from torch import Tensor, nn

__all__ = ["Bool", "Float", "Int", "Scalar", "Tensor", "checks_disabled", "compiled", "typechecked"]

Function = TypeVar("Function", bound=Callable[..., Any])

Scalar = Float[Tensor, ""]
"""A 0-d float tensor: what every loss and metric returns."""

_REMEMBERED_SIGNATURES = 4096
"""Per function; past this the memory is cleared (a run with ever-new shapes stays bounded)."""

_config = jaxtyping.config
_is_compiling = torch.compiler.is_compiling

_PLAIN_TYPES: set[type] = set()
"""Types found to be summarised by the type alone, so the next value skips the tests."""


def _signature(value: object) -> object:
    """A hashable summary of everything an annotation without ``Literal`` can check about
    ``value``, or ``None`` when it cannot be summarised (then the call is checked in full)."""
    if isinstance(value, Tensor):
        return (type(value), value.shape, value.dtype)
    kind = type(value)
    if kind in _PLAIN_TYPES:
        return kind
    if isinstance(value, tuple | list):  # torch.Size and named tuples too
        items = tuple(map(_signature, value))
        return None if None in items else (kind, items)
    if issubclass(kind, dict | set | frozenset) or hasattr(kind, "__array__"):
        return None  # containers and NumPy-like arrays: checked in full every time
    _PLAIN_TYPES.add(kind)
    return kind  # the type decides (an int, a str, an nn.Module's ``self``, ...)


def _call_signature(args: tuple, kwargs: dict[str, Any]) -> object:
    """The signature of a call, or ``None`` when an argument cannot be summarised."""
    # Tensors inline: this runs on every call, and most arguments are tensors.
    items = [
        (Tensor, value.shape, value.dtype) if type(value) is Tensor else _signature(value)
        for value in args
    ]
    if kwargs:
        items += kwargs
        items += map(_signature, kwargs.values())
    return None if None in items else tuple(items)


_PLAIN_DIMS = re.compile(r"[\w\s*#?.]*")
"""Axis strings whose check depends only on shapes; ``"{self.n}"`` or ``"batch+1"`` read
values outside the tensors, which a shape signature does not capture."""


def _depends_only_on_signatures(function: Callable[..., Any]) -> bool:
    """Whether a verdict can be remembered: no axis expression, ``Literal`` or ``Annotated``
    value validator in the annotations (those see values, not shapes), and no hint that
    could hide one (a string, a ``TypeVar``, a ``type`` alias)."""
    pending = list(getattr(function, "__annotations__", {}).values())
    while pending:
        hint = pending.pop()
        if isinstance(hint, str | TypeVar) or get_origin(hint) in (Annotated, Literal):
            return False
        if type(hint).__name__ in ("ForwardRef", "TypeAliasType"):  # also ``type X = ...``
            return False
        dims = getattr(hint, "dim_str", None)
        if isinstance(dims, str) and not _PLAIN_DIMS.fullmatch(dims):
            return False
        pending.extend(get_args(hint))  # every nested hint (not a Literal's values: gone above)
    return True


class _ShapeCheck:
    """Checks calls of one function and remembers which signatures passed."""

    def __init__(self, function: Callable[..., Any]) -> None:
        self.function = function
        self.checked = jaxtyped(typechecker=beartype)(function)
        self.passed: dict[object, set[object]] = {}
        self.remembers = _depends_only_on_signatures(function)

    def __call__(self, run: Callable[..., Any], args: tuple, kwargs: dict[str, Any]) -> Any:
        """Call ``run`` (the function, or a compiled equivalent) with checks as promised."""
        if _is_compiling() or _config.jaxtyping_disable:  # jaxtyping cannot follow dynamo
            return run(*args, **kwargs)
        key = _call_signature(args, kwargs) if self.remembers else None
        returns = None if key is None else self.passed.get(key)
        if returns is None:
            return self.check_in_full(key, args, kwargs)
        result = run(*args, **kwargs)
        tensor = type(result) is Tensor  # inline, as in _call_signature
        returned = (Tensor, result.shape, result.dtype) if tensor else _signature(result)
        if returned not in returns:
            self.check_result(args, kwargs, result)
            returns.add(returned)
        return result

    def check_in_full(self, key: object, args: tuple, kwargs: dict[str, Any]) -> Any:
        """jaxtyping and beartype on arguments and result; remember the verdict."""
        result = self.checked(*args, **kwargs)
        returned = _signature(result)
        if key is not None and returned is not None:
            if len(self.passed) >= _REMEMBERED_SIGNATURES:
                self.passed.clear()
            self.passed.setdefault(key, set()).add(returned)
        return result

    def check_result(self, args: tuple, kwargs: dict[str, Any], result: object) -> None:
        """Known arguments, a new kind of result (a shape that depends on values): check
        the arguments and the result together without running the function again."""
        hints = get_type_hints(self.function, include_extras=True)
        bound = inspect.signature(self.function).bind(*args, **kwargs)
        bound.apply_defaults()
        try:
            with jaxtyped("context"):
                for name, value in bound.arguments.items():
                    if name in hints:
                        die_if_unbearable(value, hints[name])
                if "return" in hints:
                    die_if_unbearable(result, hints["return"])
        except BeartypeCallHintViolation as error:
            raise TypeCheckError(
                f"Type-check error whilst checking the return value of "
                f"{self.function.__module__}.{self.function.__qualname__}: {error}"
            ) from None


def typechecked(function: Function) -> Function:
    """Check ``function``'s annotated arguments and return value, with one shape memo per
    call: ``batch`` must have one size in every argument and the result, so ``(N,)`` against
    ``(N, 1)`` fails. A class (a dataclass of tensors) gets jaxtyping's check of ``__init__``."""
    if isinstance(function, type):
        return jaxtyped(typechecker=beartype)(function)  # type: ignore[return-value]
    check = _ShapeCheck(function)
    call = check.__call__  # a bound method: calling it is cheaper than calling ``check``

    @functools.wraps(function)
    def checked_call(*args: Any, **kwargs: Any) -> Any:
        return call(function, args, kwargs)

    checked_call.__typechecked__ = True  # type: ignore[attr-defined]
    checked_call.shape_check = check  # type: ignore[attr-defined]
    return checked_call  # type: ignore[return-value]


def compiled(module: nn.Module, **compile_options: Any) -> Callable[..., Any]:
    """``torch.compile(module)``, with ``module.forward``'s annotations checked at the boundary:
    each new shape signature runs once eagerly under the full check, then compiled. The result
    shares ``module``'s parameters; keep ``module`` as the registered submodule so checkpoints
    keep their names."""
    optimized = torch.compile(module, **compile_options)
    check = getattr(type(module).forward, "shape_check", None)
    if check is None:
        return optimized

    def run(_: nn.Module, *args: Any, **kwargs: Any) -> Any:
        return optimized(*args, **kwargs)

    def boundary(*args: Any, **kwargs: Any) -> Any:
        return check(run, (module, *args), kwargs)

    return boundary


@contextmanager
def checks_disabled() -> Iterator[None]:
    """Run a block with runtime shape checks off, as ``JAXTYPING_DISABLE=1`` would: for
    measurements and for demonstrating what an unchecked bug does, not for hiding one."""
    previous = jaxtyping.config.jaxtyping_disable
    jaxtyping.config.update("jaxtyping_disable", True)
    try:
        yield
    finally:
        jaxtyping.config.update("jaxtyping_disable", previous)
