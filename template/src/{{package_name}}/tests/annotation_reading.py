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
        memos = _fits(hint, value, memos)
    return bool(memos)


def _fits(hint: Any, value: Any, memos: list[Memo]) -> list[Memo]:
    """Each of ``memos`` (axis name -> size) that ``value`` fits, as ``value`` extends it."""
    origin = typing.get_origin(hint)
    if origin in UNIONS:
        return [after for member in typing.get_args(hint) for after in _fits(member, value, memos)]
    if origin is tuple and Ellipsis not in typing.get_args(hint):
        elements = typing.get_args(hint)
        if not isinstance(value, tuple) or len(value) != len(elements):
            return []
        for element, item in zip(elements, value, strict=True):
            memos = _fits(element, item, memos)
        return memos
    if is_array(hint):
        return [after for memo in memos if (after := _fits_array(hint, value, memo)) is not None]
    if hint is type(None):
        return memos if value is None else []
    if isinstance(hint, type) and origin is None:
        return memos if isinstance(value, hint) else []
    return memos  # Literal, Sequence[int] and the like: never tensors, never perturbed


def _fits_array(hint: Any, value: Any, memo: Memo) -> Memo | None:
    names = allowed(hint)
    dtype = str(getattr(value, "dtype", "")).rsplit(".", 1)[-1]
    if not isinstance(value, torch.Tensor) or (names is not None and dtype not in names):
        return None
    parsed, after = axes(hint), dict(memo)
    shape: list[Any] = list(value.shape)
    groups = [index for index, (kind, _) in enumerate(parsed) if kind == "group"]
    extra = len(shape) - len(parsed) + 1  # the axes a group spans
    if groups and extra >= 0:  # the group's extents, as one entry
        at = groups[0]
        shape[at : at + extra] = [tuple(shape[at : at + extra])]
    if len(shape) != len(parsed):
        return None
    for (kind, name), extent in zip(parsed, shape, strict=True):
        if kind == "group" and name:
            kind, name = "named", "*" + name
        if kind == "fixed" and name != extent:
            return None
        sized = kind == "named" or (kind == "broadcast" and extent != 1)  # ``#`` takes a 1 too
        if sized and after.setdefault(name, extent) != extent:
            return None
    return after
