"""How a jaxtyping annotation reads, and whether given values fit it: what decides which
broken calls of ``annotation_cases`` must raise. It reads each shape string itself rather
than calling jaxtyping, so that a verdict cached wrongly by the decorator cannot also be the
verdict the tests expect. Its agreement with jaxtyping is tested; an axis form it does not
know raises, never guesses.
"""

import types
import typing
from collections.abc import Sequence
from typing import Any

import torch
from jaxtyping import AbstractArray

UNIONS = (typing.Union, types.UnionType)
Memo = dict[str, Any]


def members(hint: object) -> tuple[Any, ...]:
    return typing.get_args(hint) if typing.get_origin(hint) in UNIONS else (hint,)


def is_array(hint: object) -> bool:
    return isinstance(hint, type) and issubclass(hint, AbstractArray)


def axes(hint: Any) -> list[tuple[str, Any]]:
    """The shape string as (kind, name or size): named, broadcast (``#name``), fixed, any,
    group (variadic)."""
    parsed: list[tuple[str, Any]] = []
    for token in hint.dim_str.split():
        name = token.removeprefix("*")
        if token == "..." or (token.startswith("*") and name.isidentifier()):
            parsed.append(("group", None if token == "..." or name.startswith("_") else name))
        elif token.isdigit():
            parsed.append(("fixed", int(token)))
        elif token.startswith("_"):
            parsed.append(("any", None))
        elif token.isidentifier():
            parsed.append(("named", token))
        elif token.startswith("#") and token[1:].isidentifier():
            parsed.append(("broadcast", token[1:]))  # the named size, or 1
        else:
            raise ValueError(f"{hint.dim_str!r}: axis {token!r} is beyond what these tests read")
    return parsed


def allowed(hint: Any) -> tuple[str, ...] | None:
    """The dtype names an array annotation accepts; None for any dtype (``Shaped``)."""
    return tuple(hint.dtypes) if isinstance(hint.dtypes, list | tuple) else None


def satisfied(pairs: Sequence[tuple[Any, Any]]) -> bool:
    """Whether some choice of union members fits every value with one size per axis name."""
    memos: list[Memo] = [{}]
    for hint, value in pairs:
        memos = [after for memo in memos for after in _fits(hint, value, memo)]
    return bool(memos)


def _fits(hint: Any, value: Any, memo: Memo) -> list[Memo]:
    origin = typing.get_origin(hint)
    if origin in UNIONS:
        return [after for member in typing.get_args(hint) for after in _fits(member, value, memo)]
    if origin is tuple and Ellipsis not in typing.get_args(hint):
        elements = typing.get_args(hint)
        if not isinstance(value, tuple) or len(value) != len(elements):
            return []
        memos = [memo]
        for element, item in zip(elements, value, strict=True):
            memos = [after for before in memos for after in _fits(element, item, before)]
        return memos
    if is_array(hint):
        after = _fits_array(hint, value, memo)
        return [] if after is None else [after]
    if hint is type(None):
        return [memo] if value is None else []
    if isinstance(hint, type) and origin is None:
        return [memo] if isinstance(value, hint) else []
    return [memo]  # Literal, Sequence[int] and the like: never tensors, never perturbed


def _fits_array(hint: Any, value: Any, memo: Memo) -> Memo | None:
    names = allowed(hint)
    dtype = str(getattr(value, "dtype", "")).rsplit(".", 1)[-1]
    if not isinstance(value, torch.Tensor) or (names is not None and dtype not in names):
        return None
    parsed, shape = axes(hint), tuple(value.shape)
    groups = [index for index, (kind, _) in enumerate(parsed) if kind == "group"]
    extra = len(shape) - len(parsed) + 1
    if (not groups and len(shape) != len(parsed)) or (groups and extra < 0):
        return None
    after = dict(memo)
    if groups:
        at, name = groups[0], parsed[groups[0]][1]
        extents = shape[at : at + extra]
        if name is not None and after.setdefault("*" + name, extents) != extents:
            return None
        parsed, shape = parsed[:at] + parsed[at + 1 :], shape[:at] + shape[at + extra :]
    for (kind, name), extent in zip(parsed, shape, strict=True):
        if kind == "fixed" and name != extent:
            return None
        if kind == "named" and after.setdefault(name, extent) != extent:
            return None
        if kind == "broadcast" and extent != 1 and after.setdefault(name, extent) != extent:
            return None
    return after
