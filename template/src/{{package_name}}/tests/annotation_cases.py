"""Test cases read off the annotations: every typed callable, inputs that fit, inputs that don't.

An annotation is a contract only if breaking it raises, and a hand-written test covers only
the functions someone remembered. Here every callable that ``typechecked`` wraps gets valid
arguments and, per tensor argument, arguments broken in one way that
``annotation_reading.satisfied`` confirms are invalid. A record argument (a dataclass or
named tuple of tensors) is built from its fields, another class by :func:`build`.
"""

import ast
import dataclasses
import importlib
import inspect
import types
import typing
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import torch

from .annotation_reading import allowed, axes, is_array, members, satisfied

PACKAGE = __name__.split(".")[0]
SIZES: dict[str, tuple[int, tuple[int, ...]]] = {"ones": (1, ()), "base": (3, (2,))}
"""(size of every named axis, shape of every variadic group): one size for all named axes
lets a module be built to match; broadcasting hides mistakes behind ``ones``."""
HIDDEN = (4,)  # the hidden layer sizes of a built module
SPACES: dict[str, tuple[str, Callable[[Any, int], object]]] = {
    "Discrete": ("int", lambda space, n: space(n)),
    "Box": ("float", lambda space, n: space(-1.0, 1.0, (n,))),
}
"""Gymnasium spaces by class name: the action kind each implies, and how to make one."""
CONSTRUCTORS: dict[str, Callable[[int, str], object]] = {}
"""``module.Class`` -> (size, kind) -> instance, for classes :func:`build` cannot build."""
_STARRED = (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
_GENERATOR = torch.Generator().manual_seed(0)


class Spec(NamedTuple):
    dtype: torch.dtype
    shape: tuple[int, ...]
    names: tuple[str | None, ...] = ()  # of the axes of a valid shape, None for unnamed ones


class Record(NamedTuple):  # a record argument: its class, a Spec (or value) per field
    kind: type
    fields: dict[str, Any]


@dataclass(frozen=True)
class Target:
    """A function, a method of ``owner``, or a class to construct: ``function`` unwrapped,
    ``typed`` the decorated function or class to call (None for a method)."""

    name: str
    function: Callable[..., Any]
    typed: Any = None
    owner: type | None = None


@dataclass(frozen=True)
class Case:
    """A target at one size; ``kind`` ("int", "float") picks union members and spaces."""

    target: Target
    size: str
    kind: str

    def __str__(self) -> str:
        return f"{self.target.name}{f'[{self.kind}]' if self.kind else ''}-{self.size}"


class Perturbed(NamedTuple):  # a case with one tensor argument broken, which is invalid
    case: Case
    argument: str
    change: str
    spec: Spec

    def __str__(self) -> str:
        return f"{self.case}-{self.argument}.{self.change}"


def is_typechecked(obj: object) -> bool:
    # A typechecked dataclass keeps jaxtyping's own wrapper on its __init__.
    code = getattr(obj, "__code__", None)
    wrapper = hasattr(obj, "__wrapped__") and "jaxtyping" in getattr(code, "co_filename", "")
    return getattr(obj, "__typechecked__", False) is True or wrapper


def available_modules() -> list[types.ModuleType]:
    """The package's modules but its tests, less those missing an optional dependency."""
    root = Path(str(importlib.import_module(PACKAGE).__file__)).parent
    modules = []
    for path in sorted(root.rglob("*.py")):
        parts = path.relative_to(root).with_suffix("").parts
        if parts[0] == "tests":
            continue
        name = ".".join((PACKAGE, *parts[: -1 if parts[-1] == "__init__" else None]))
        try:
            with warnings.catch_warnings():
                modules.append(importlib.import_module(name))
        except ModuleNotFoundError as error:
            if not error.name or error.name.split(".")[0] == PACKAGE:
                raise
    return modules


def decorators_in_source(module: types.ModuleType) -> int:
    """How many ``@typechecked`` the module's source has: what discovery must match."""
    return sum(
        getattr(decorator, "attr", getattr(decorator, "id", "")) == "typechecked"
        for node in ast.walk(ast.parse(Path(str(module.__file__)).read_text()))
        for decorator in getattr(node, "decorator_list", [])
    )


def discover(modules: Sequence[types.ModuleType]) -> list[Target]:
    targets = []
    for module in modules:
        prefix = module.__name__.removeprefix(PACKAGE + ".")
        for name, obj in vars(module).items():
            if getattr(inspect.unwrap(obj), "__module__", None) != module.__name__:
                continue
            attributes = vars(obj) if inspect.isclass(obj) else {}
            if is_typechecked(obj) or is_typechecked(attributes.get("__init__")):
                function = inspect.unwrap(obj.__init__ if inspect.isclass(obj) else obj)
                targets.append(Target(f"{prefix}.{name}", function, typed=obj))
            for attribute, member in attributes.items():
                if attribute != "__init__" and is_typechecked(member):
                    method = inspect.unwrap(member)
                    targets.append(Target(f"{prefix}.{name}.{attribute}", method, owner=obj))
    return sorted(targets, key=lambda target: target.name)


def parameters(function: Callable[..., Any]) -> list[tuple[inspect.Parameter, Any]]:
    """Parameters after ``self``, with resolved annotations."""
    hints = typing.get_type_hints(function)
    listed = list(inspect.signature(function).parameters.values())
    skip = 1 if listed and listed[0].name == "self" else 0
    return [(param, hints.get(param.name)) for param in listed[skip:]]


def dtype_of(hint: Any) -> torch.dtype:
    names = allowed(hint) or ("float32",)
    for name in ("float32", "int64", "bool", *names):
        if name in names and isinstance(getattr(torch, name, None), torch.dtype):
            return getattr(torch, name)
    raise ValueError(f"{hint}: no torch dtype among {names}")


def kind_of(hint: Any) -> str:
    dtype = dtype_of(hint)
    return "float" if dtype.is_floating_point else "bool" if dtype == torch.bool else "int"


def wrong_dtype(hint: object) -> torch.dtype | None:
    """A dtype outside every dtype that ``hint`` allows; None if it allows any."""
    names = [allowed(member) for member in members(hint) if is_array(member)]
    union = {name for each in names for name in each or ()}
    wrong = [name for name in ("float32", "int64", "bool", "complex64") if name not in union]
    return getattr(torch, wrong[0]) if wrong and None not in names else None


def record_fields(hint: object) -> dict[str, Any]:
    """A record's init fields, in order, with resolved annotations; none if ``hint`` is not a
    record: a dataclass or named tuple with a tensor field."""
    if not isinstance(hint, type):
        return {}
    if dataclasses.is_dataclass(hint):
        names = [field.name for field in dataclasses.fields(hint) if field.init]
    else:
        names = list(getattr(hint, "_fields", [])) if issubclass(hint, tuple) else []
    fields = {name: typing.get_type_hints(hint).get(name) for name in names}
    tensors = any(is_array(member) for field in fields.values() for member in members(field))
    return fields if tensors else {}


def kinds(target: Target) -> list[str]:
    """Variants to test: one per space kind the owner (or a class argument) takes, else per
    union member kind of the arguments and of their records' fields."""
    owners = [target.owner] if target.owner is not None else []
    owners += [hint for param, hint in parameters(target.function) if _required_built(param, hint)]
    found = []
    for owner in owners:
        for _, hint in parameters(owner.__init__):
            found += [SPACES[m.__name__][0] for m in members(hint) if _is_space(m)]
    if not found:
        for _, hint in parameters(target.function):
            for field in list(record_fields(hint).values()) or [hint]:
                arrays = [member for member in members(field) if is_array(member)]
                found += [kind_of(member) for member in arrays] if len(arrays) > 1 else []
    return list(dict.fromkeys(found)) or [""]


def _required_built(param: inspect.Parameter, hint: object) -> bool:
    """A required argument the constructor rule makes (a network, an agent): any class but
    a plain value's or a record's."""
    plain_class = hint in (float, int, bool, str, type(None)) or record_fields(hint)
    required = param.default is param.empty and param.kind not in _STARRED
    return required and isinstance(hint, type) and not plain_class


def _is_space(hint: object) -> bool:
    module = getattr(hint, "__module__", "")
    return module.startswith("gymnasium") and getattr(hint, "__name__", "") in SPACES


def plain(hint: object) -> object:
    """A valid value for a required non-tensor parameter."""
    for member in members(hint):
        if member in (float, int, bool):
            return {float: 0.5, int: 1, bool: False}[member]
    raise TypeError(f"no rule builds a value of type {hint}")


def spec(hint: object, case: Case) -> Spec | None:
    """The valid tensor for ``hint`` in ``case``, of its first array member of the case's
    kind, else of its first; None if ``hint`` is not a tensor's."""
    arrays = [member for member in members(hint) if is_array(member)]
    if not arrays:
        return None
    member = ([each for each in arrays if kind_of(each) == case.kind] or arrays)[0]
    size, group = SIZES[case.size]
    names: list[str | None] = []
    shape: list[int] = []
    for kind, value in axes(member):
        names += [None] * len(group) if kind == "group" else [None if kind == "fixed" else value]
        shape += group if kind == "group" else [value if kind == "fixed" else size]
    return Spec(dtype_of(member), tuple(shape), tuple(names))


def arguments(case: Case) -> dict[str, Any]:
    """Valid arguments: a :class:`Spec` per tensor parameter, a :class:`Record` per record
    parameter, and a value per other required one (a built instance for a class)."""
    built: dict[str, Any] = {}
    for param, hint in parameters(case.target.function):
        tensor_spec = spec(hint, case)
        if tensor_spec is not None:
            built[param.name] = tensor_spec
        elif fields := record_fields(hint).items():
            built[param.name] = Record(hint, {n: spec(f, case) or plain(f) for n, f in fields})
        elif _required_built(param, hint):
            built[param.name] = build(hint, SIZES[case.size][0], case.kind)
        elif param.default is param.empty:
            built[param.name] = plain(hint)
    return built


def tensor(spec: Spec) -> torch.Tensor:
    """Values valid for any math: floats in (0.1, 1), integer zeros, bools with one True."""
    if spec.dtype.is_floating_point:
        return (0.1 + 0.9 * torch.rand(spec.shape, generator=_GENERATOR)).to(spec.dtype)
    if spec.dtype == torch.bool:
        mask = torch.rand(spec.shape, generator=_GENERATOR) < 0.5
        mask[(0,) * len(spec.shape)] = True
        return mask
    return torch.zeros(spec.shape, dtype=spec.dtype)


def values(built: dict[str, Any]) -> dict[str, Any]:
    """A tensor for each :class:`Spec`, the record for each :class:`Record`, else the value."""
    made = dict(built)
    for name, given in built.items():
        if isinstance(given, Spec):
            made[name] = tensor(given)
        elif isinstance(given, Record):
            made[name] = given.kind(**values(given.fields))
    return made


def _is_int(hint: object) -> bool:
    """``int``, or a range of ints (``run/ranges.py``), which is its subclass; not ``bool``."""
    return isinstance(hint, type) and issubclass(hint, int) and hint is not bool


def build(owner: type, size: int, kind: str) -> object:
    """The constructor rule: every int argument is ``size``, int sequences are ``HIDDEN``,
    a gymnasium space is the one of ``kind`` with ``size`` actions, the rest take defaults."""
    key = f"{owner.__module__}.{owner.__qualname__}"
    if key in CONSTRUCTORS:
        return CONSTRUCTORS[key](size, kind)
    built = {}
    for param, hint in parameters(owner.__init__):
        spaces = [m for m in members(hint) if _is_space(m) and SPACES[m.__name__][0] == kind]
        origin, element = typing.get_origin(hint), typing.get_args(hint)[:1]
        if _is_int(hint):
            built[param.name] = size
        elif origin in (Sequence, tuple, list) and element and _is_int(element[0]):
            built[param.name] = HIDDEN
        elif spaces:
            built[param.name] = SPACES[spaces[0].__name__][1](spaces[0], size)
        elif param.default is param.empty and param.kind not in _STARRED:
            raise TypeError(
                f"{key}: no rule builds its argument {param.name}: {hint}; "
                f"add the class to CONSTRUCTORS in {__name__}"
            )
    return owner(**built)


def bind(case: Case) -> Callable[..., Any]:
    """What the case calls: the decorated function or class, or the method on a new instance."""
    target = case.target
    if target.owner is None:
        return target.typed
    return getattr(build(target.owner, SIZES[case.size][0], case.kind), target.function.__name__)


def hinted(case: Case, given: dict[str, Any], *result: Any) -> list[tuple[Any, Any]]:
    """(annotation, value) pairs of the annotated ``given``, then of ``result`` (any object for
    a constructor)."""
    hints = typing.get_type_hints(case.target.function)
    returned = object if inspect.isclass(case.target.typed) else hints.get("return", object)
    pairs = [(hints[name], value) for name, value in given.items() if name in hints]
    return pairs + [(returned, value) for value in result]


def perturbations(case: Case) -> list[Perturbed]:
    """Ways of breaking one tensor argument that really violate the annotations: a trailing
    size-1 axis, the last axis dropped, a dtype outside the allowed ones, and for each axis
    name used more than once, its first and its last use grown by one. At size 1 only what
    broadcasting could hide (a trailing 1, a 1 against a 2); at a second kind (``int`` after
    ``float``) only union arguments, the only ones it changes."""
    built = arguments(case)
    again = case.kind != kinds(case.target)[0]
    every = SIZES[case.size][0] > 1
    changes: list[tuple[str, str, Spec]] = []
    uses: dict[str, list[tuple[str, int]]] = {}
    for param, hint in parameters(case.target.function):
        spec = built.get(param.name)
        if not isinstance(spec, Spec) or (again and len(members(hint)) < 2):
            continue
        shape, wrong = spec.shape, wrong_dtype(hint)
        changes.append((param.name, "trailing_one", spec._replace(shape=(*shape, 1))))
        if shape and every:
            changes.append((param.name, "drop_last", spec._replace(shape=shape[:-1])))
        if wrong is not None and every:
            changes.append((param.name, "wrong_dtype", spec._replace(dtype=wrong)))
        for axis, name in enumerate(spec.names):
            if name is not None:
                uses.setdefault(name, []).append((param.name, axis))
    for name, places in uses.items():
        for argument, axis in (places[0], places[-1]) if len(places) > 1 else ():
            valid = built[argument]
            grown = (*valid.shape[:axis], valid.shape[axis] + 1, *valid.shape[axis + 1 :])
            changes.append((argument, f"unequal_{name}_axis{axis}", valid._replace(shape=grown)))
    return [
        Perturbed(case, argument, change, spec)
        for argument, change, spec in changes
        if not satisfied(hinted(case, values({**built, argument: spec})))
    ]
