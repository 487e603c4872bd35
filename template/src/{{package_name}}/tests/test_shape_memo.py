"""``typechecked``'s remembered verdicts are the plain ``jaxtyped(typechecker=beartype)``'s:
long random call sequences, with more signatures than are remembered, on functions built to
trip a memo (containers, variadics, defaults, results whose shape depends on values, checks
in the body, nested checked calls, impostors of a tensor) raise or return alike."""

from collections import deque
from collections.abc import Callable, Sequence
from typing import Any
from unittest import mock

import torch
from beartype import beartype
from einops import rearrange
from hypothesis import given, settings
from hypothesis import strategies as st
from jaxtyping import Float, Shaped, TypeCheckError, jaxtyped
from torch import Tensor, nn

from ..core import shapes

F = Float[Tensor, " b"]


def fits(value: object, hint: Any) -> bool:
    """jaxtyping's ``isinstance``, in the axis memo of the checked call that runs it."""
    return isinstance(value, hint)


def adversaries(check: Callable) -> dict[str, Callable]:
    """The same functions under one decorator: ``shapes.typechecked`` or the plain check."""

    @check
    def inner(y: Float[Tensor, " n"]) -> Float[Tensor, " n"]:
        return y if fits(y, Float[Tensor, " b"]) else -y  # "b" is not the caller's

    @check
    def stats(x: F, verbose: bool) -> dict[str, F] | None:
        return {"positive": x[x > 0]} if verbose else None

    @check
    def positives(x: F, flag: bool) -> F:  # "{len(x)}" reads the memo's arguments
        return x[x > 0] if flag or not fits(x, Float[Tensor, "{len(x)}"]) else x

    @check
    def variadic(*xs: F, **named: F) -> F:
        x = torch.cat([*xs, *named.values()])
        return x[x > 0]

    @check
    def unpassed(x: F, weight: F = None, scale: float | None = None) -> F:  # pyright: ignore[reportArgumentType]
        return x[x > 0] if weight is None else x * weight

    @check
    def in_body(x: Float[Tensor, "b f"], flag: bool) -> Float[Tensor, " n"]:
        rows = x[x[:, 0] > 0]
        if flag:
            fits(rows, Float[Tensor, "n f"])  # binds n, which the result must then match
        return x[:, 0] if fits(rows, Float[Tensor, "b f"]) else x[:, -1]

    @check
    def nested(x: F, flag: bool) -> F:
        return inner(x[:1] if flag else x)

    @check
    def resized(x: Float[Tensor, " b *rest"], flag: bool) -> F:
        first = rearrange(x, "b ... -> b (...)")[:, 0].clone()
        if flag:  # the plain check then refuses the resized argument
            x.unsqueeze_(-1)
        return first

    @check
    def pair(xs: tuple[F, Float[Tensor, "#b"]], flag: bool) -> F:
        return xs[0] + xs[1] if flag else xs[1]

    @check
    def container(xs: Sequence[F]) -> int:
        return len(xs)

    @check
    def module(kind: type[nn.Module], flag: bool) -> bool:
        return flag

    @check
    def shaped(x: Shaped[Tensor, " b"]) -> Shaped[Tensor, " b"]:
        return x

    found = (inner, stats, positives, variadic, unpassed, in_body, nested, resized, pair)
    return {f.__name__: f for f in (*found, container, module, shaped)}


class Impostor:
    """Says it is a tensor (as ``Mock(spec=Tensor)`` does) and has a shape and a dtype."""

    __class__ = Tensor  # pyright: ignore[reportAssignmentType]
    dtype = torch.float32

    def __init__(self, *shape: int) -> None:
        self.shape = torch.Size(shape)

    def tolist(self) -> list[int]:
        return list(self.shape)


def arguments(name: str, size: int, signs: int, flag: bool, variant: int) -> tuple:
    """Fresh arguments for one call (a body may resize them): ``signs`` sets which entries are
    negative, ``variant`` picks a dtype, a container, a keyword or a broken shape."""
    x = torch.tensor([-1.0 if signs >> i & 1 else 1.0 + i for i in range(size)])
    x = x.double() if variant == 3 else x
    other = [x, x[:1], rearrange(x, "b -> b 1"), None][variant]
    if name == "inner":
        return (other,), {}
    if name == "variadic":
        return (x, *[other][: variant % 2]), {"y": x} if variant == 2 else {}
    if name == "unpassed":
        return (x,), [{}, {"weight": x}, {"scale": 1.0}, {"weight": x[:1], "scale": 2}][variant]
    if name == "in_body":
        rows = torch.stack([x, -x.flip(0)], dim=1)
        return (rows if variant < 3 else rows.T.contiguous(), flag), {}
    if name == "pair":
        return ((x, other if variant < 3 else x), flag), {}
    if name == "container":
        items = [x] if variant % 2 else [rearrange(x, "b -> b 1")]
        return ([deque(items), items, (x, x), (rearrange(x, "b -> b 1"),)][variant],), {}
    if name == "module":
        return ([nn.Linear, int, nn.Module, Impostor][variant], flag), {}
    if name == "shaped":
        return ([x, Impostor(size), Impostor(size, 1), x.int()][variant],), {}
    return (other if name == "resized" and variant == 2 else x, flag), {}


def outcome(function: Callable, args: tuple, kwargs: dict) -> object:
    """What a caller sees: a type-check error, another error's type, or the result's value."""
    try:
        result = function(*args, **kwargs)
    except TypeCheckError:
        return "type-check error"
    except Exception as error:  # noqa: BLE001 - the same error on both sides is the point
        return type(error).__name__
    if isinstance(result, dict):
        return {key: outcome(lambda v=v: v, (), {}) for key, v in result.items()}
    return (result.dtype, result.tolist()) if isinstance(result, Tensor) else result


REMEMBERED = adversaries(shapes.typechecked)
PLAIN = adversaries(jaxtyped(typechecker=beartype))
SPEC = (st.integers(1, 3), st.integers(0, 7), st.booleans(), st.integers(0, 3))
CALLS = st.lists(st.sampled_from(sorted(PLAIN)), min_size=1, max_size=3, unique=True).flatmap(
    lambda names: st.lists(st.tuples(st.sampled_from(names), *SPEC), min_size=15, max_size=50)
)


@settings(max_examples=40, deadline=None)
@given(CALLS)
def test_remembered_verdicts_are_the_plain_verdicts(calls: list[tuple]) -> None:
    for function in REMEMBERED.values():
        function.shape_check.passed.clear()  # pyright: ignore[reportFunctionMemberAccess]
    with mock.patch.object(shapes, "_REMEMBERED_SIGNATURES", 4):  # forgets, then learns again
        for name, *spec in calls:
            seen = outcome(REMEMBERED[name], *arguments(name, *spec))
            assert seen == outcome(PLAIN[name], *arguments(name, *spec)), (name, spec)
