"""The one switch for runtime shape checking: every typed function and every ``forward`` is
wrapped by :func:`typechecked`, so how annotations are enforced changes here alone. A verdict
is remembered per shape signature: a training loop pays for the full jaxtyping and beartype
check only when something new arrives (``docs/defences.md``, "How shape checks work").

Shape strings name axes from one vocabulary (``batch``, ``time``, ``env``, ``feature``,
``action``, ``class``). A single-axis string starts with a space, ``Float[Tensor, " batch"]``,
as jaxtyping's FAQ advises: ruff's F821 would read ``"batch"`` as a forward reference.
"""

import functools
import inspect
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import UnionType
from typing import Any, TypeVar, Union, get_args, get_origin

import jaxtyping
import torch
from beartype import beartype
from beartype.door import die_if_unbearable
from beartype.roar import BeartypeCallHintViolation
from jaxtyping import Bool, Float, Int, TypeCheckError, jaxtyped
from torch import Tensor, nn

try:  # jaxtyping's axis memo, replayed around a remembered call (same since 0.2.36)
    from jaxtyping._storage import get_shape_memo, pop_shape_memo, push_shape_memo

    _REPLAYS = True
except ImportError:  # moved: nothing is remembered, every call is checked in full
    _REPLAYS = False

__all__ = ["Bool", "Float", "Int", "Scalar", "Tensor", "checks_disabled", "compiled", "typechecked"]

Function = TypeVar("Function", bound=Callable[..., Any])

Scalar = Float[Tensor, ""]
"""A 0-d float tensor: what every loss and metric returns."""

_REMEMBERED_SIGNATURES = 4096
"""Per function; past this the memory is cleared (a run with ever-new shapes stays bounded)."""

_config = jaxtyping.config
_is_compiling = torch.compiler.is_compiling

_SCALARS = frozenset({bool, bytes, complex, float, int, str, type(None)})
_PLAIN_DIMS = re.compile(r"[\w\s*#.]*")
"""Axis strings whose check depends only on shapes; ``"{self.n}"`` or ``"batch+1"`` read
values outside the tensors, which a shape signature does not capture."""


def _summary(value: object) -> object:
    """What every remembered hint can check of ``value``: a tensor's type, shape and dtype,
    a builtin scalar's type, a tuple's items; ``None`` for anything else (a list, a dict,
    a class, an array-like, an object whose ``__class__`` is not its type)."""
    kind = type(value)
    if kind in _SCALARS:
        return kind
    if value.__class__ is not kind:
        return None
    if issubclass(kind, Tensor):
        return (kind, value.shape, value.dtype)  # type: ignore[attr-defined]
    if issubclass(kind, tuple):  # torch.Size and named tuples too; a tuple cannot hold itself
        items = tuple(map(_summary, value))  # type: ignore[arg-type]
        return None if None in items else (kind, items)
    return None


def _plain(hint: object) -> bool:
    """Whether beartype's verdict on ``hint`` is a function of :func:`_summary`, and a
    passing check binds the same axes in any order: a torch jaxtyping array of plain axes,
    a class that ``isinstance`` decides by type, a fixed tuple or a union of such hints
    (no two of which bind axes)."""
    if hint is None:
        return True
    if isinstance(hint, type):
        if issubclass(hint, jaxtyping.AbstractArray):  # dim_str: jaxtyping's, as in 0.2.36
            dims = getattr(hint, "dim_str", "?")
            return hint.array_type is Tensor and bool(_PLAIN_DIMS.fullmatch(str(dims)))
        return type(hint).__instancecheck__ is type.__instancecheck__  # not an ABC or Protocol
    origin, args = get_origin(hint), get_args(hint)
    if origin is tuple:
        return Ellipsis not in args and all(map(_plain, args))
    if origin is Union or origin is UnionType:
        return all(map(_plain, args)) and sum(arg not in _SCALARS for arg in args) <= 1
    return False


class _ShapeCheck:
    """Checks calls of one function and remembers which signatures passed, with the axes
    that the parameters bound, so that a remembered call runs in the same axis memo."""

    def __init__(self, function: Callable[..., Any]) -> None:
        self.function = function
        self.checked = jaxtyped(typechecker=beartype)(function)
        self.passed: dict[object, tuple[dict, dict, set[object]]] = {}
        signature = inspect.signature(function)
        parameters = signature.parameters.values()
        self.names = [p.name for p in parameters if p.kind <= p.POSITIONAL_OR_KEYWORD]
        self.defaults = {p.name: p.default for p in parameters if p.default is not p.empty}
        self.hints = {p.name: p.annotation for p in parameters if p.annotation is not p.empty}
        if signature.return_annotation is not signature.empty:
            self.hints["return"] = signature.return_annotation
        hinted = [name in self.hints for name in self.names]  # leading unhinted: ``self``
        self.skip = hinted.index(True) if True in hinted else len(hinted)
        self.remembers = (
            _REPLAYS
            and all(p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD) for p in parameters)
            and all(map(_plain, self.hints.values()))
        )

    def key(self, args: tuple, kwargs: dict[str, Any]) -> object:
        """The call's signature, or ``None`` when an argument cannot be summarised."""
        items = [  # tensors inline: this runs twice on every call
            (Tensor, value.shape, value.dtype) if type(value) is Tensor else _summary(value)
            for value in args[self.skip :]
        ]
        if kwargs:
            items += kwargs
            items += map(_summary, kwargs.values())
        return None if None in items else tuple(items)

    def __call__(self, run: Callable[..., Any], args: tuple, kwargs: dict[str, Any]) -> Any:
        """Call ``run`` (the function, or a compiled equivalent) with checks as promised."""
        if _is_compiling() or _config.jaxtyping_disable:  # jaxtyping cannot follow dynamo
            return run(*args, **kwargs)
        key = self.key(args, kwargs) if self.remembers else None
        known = None if key is None else self.passed.get(key)
        if known is None:
            return self.check_in_full(key, args, kwargs)
        axes, variadic_axes, returns = known
        arguments = dict(zip(self.names, args, strict=False))  # what jaxtyping's memo holds
        if kwargs or len(arguments) < len(self.names):
            arguments = {**self.defaults, **arguments, **kwargs}
        memo = push_shape_memo(arguments)
        memo[0].update(axes)
        memo[1].update(variadic_axes)
        try:
            result = run(*args, **kwargs)
            # as jaxtyping: arguments and result, in the memo after the body
            if "return" in self.hints:
                after = get_shape_memo()
                same = after[0] == axes and after[1] == variadic_axes and not after[2]
                # the arguments too, which the body may have resized, and the result
                outcome = self.key((*args, result), kwargs)
                if not same or outcome not in returns:
                    self.check_again(args, kwargs, result)
                    if same and outcome is not None:
                        returns.add(outcome)
        finally:
            pop_shape_memo()
        return result

    def check_in_full(self, key: object, args: tuple, kwargs: dict[str, Any]) -> Any:
        """jaxtyping and beartype on arguments and result; remember the verdict, with the
        axes that the arguments bind (found before the body can resize one)."""
        if key is None:
            return self.checked(*args, **kwargs)
        push_shape_memo({})
        try:
            self.check_again(args, kwargs)
            axes = get_shape_memo()
        except Exception:  # noqa: BLE001 - whatever it is, jaxtyping's check reports it
            axes = None
        finally:
            pop_shape_memo()
        result = self.checked(*args, **kwargs)
        if axes is not None and not axes[2] and self.key(args, kwargs) == key:
            if len(self.passed) >= _REMEMBERED_SIGNATURES:
                self.passed.clear()
            self.passed[key] = (axes[0], axes[1], {self.key((*args, result), kwargs)} - {None})
        return result

    def check_again(self, args: tuple, kwargs: dict[str, Any], *result: object) -> None:
        """The passed arguments, and ``result`` if given, in the current axis memo: what
        jaxtyping's return check does (it never checks a default that was not passed)."""
        given = [*zip(self.names, args, strict=False), *kwargs.items()]
        try:
            for name, value in given + [("return", r) for r in result]:
                if name in self.hints:
                    die_if_unbearable(value, self.hints[name])
        except BeartypeCallHintViolation as error:
            raise TypeCheckError(
                f"Type-check error whilst checking the return value of {self.function.__module__}."
                f"{self.function.__qualname__}: {error}"
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
