"""The decorator's promises: checks remembered per shape signature still catch every new
signature, never skip a return check, and survive ``torch.compile``."""

from typing import Literal, TypeVar
from unittest.mock import Mock

import pytest
import torch
from jaxtyping import TypeCheckError

from ..core.losses import mse_loss
from ..core.nets import MLP, ScalarMLP
from ..core.shapes import Float, Tensor, checks_disabled, compiled, typechecked


def test_each_new_signature_is_checked_after_the_cache_is_warm() -> None:
    batches = [((batch,), (batch, 1)) for batch in (256, 256, 37, 1)]  # full, partial, 1
    lengths = [((4, length), (4, length + 1)) for length in (5, 9)]  # a new sequence length
    for valid, broken in batches + lengths:
        mse_loss(torch.randn(valid), torch.randn(valid))
        with pytest.raises(TypeCheckError, match="target"):
            mse_loss(torch.randn(valid), torch.randn(broken))


def test_a_remembered_signature_with_a_new_result_shape_is_checked_again() -> None:
    """A float is remembered by its type only, so the arguments' signature does not predict
    the result's shape: a new one is checked in full, without running the function twice."""
    calls = []

    @typechecked
    def first_rows(x: Float[Tensor, " batch"], rows: float) -> Float[Tensor, " batch"]:
        return x[: int(rows)]

    @typechecked
    def rows_where(x: Float[Tensor, " batch"], limit: float) -> Float[Tensor, " selected"]:
        calls.append(1)
        return x[x < limit]

    x = torch.arange(6.0)
    assert first_rows(x, 6.0).shape == first_rows(x, 6.0).shape == (6,)
    with pytest.raises(TypeCheckError, match="return"):
        first_rows(x, 2.0)
    rows_where(x, 10.0)
    rows_where(x, 10.0)
    assert rows_where(x, 1.5).shape == (2,)
    assert len(calls) == 3


def test_a_step_counter_is_one_signature(monkeypatch: pytest.MonkeyPatch) -> None:
    @typechecked
    def scaled(x: Float[Tensor, " batch"], step: int) -> Float[Tensor, " batch"]:
        return x / step

    check = scaled.shape_check  # pyright: ignore[reportFunctionMemberAccess]
    full_check = Mock(wraps=check.checked)  # jaxtyping + beartype
    monkeypatch.setattr(check, "checked", full_check)
    x = torch.randn(4)
    for step in range(1, 1001):
        scaled(x, step)
    assert full_check.call_count == 1
    with pytest.raises(TypeCheckError):  # an int is keyed by its type, a shape still counts
        scaled(torch.randn(4, 1), 1001)
    with pytest.raises(TypeCheckError):
        scaled(x, 1.5)  # pyright: ignore[reportArgumentType]


def test_literals_and_typevars_are_checked_per_value() -> None:
    """A ``Literal`` or a ``TypeVar`` that could hide one, as an argument (by position or by
    keyword) or as the result, and an axis such as ``{columns}`` that reads an argument's
    value, are checked every call: a signature keys a value by its type."""

    @typechecked
    def row_sums(x: Float[Tensor, "batch {columns}"], columns: int) -> Float[Tensor, " batch"]:
        return x.sum(dim=-1)

    @typechecked
    def scaled(x: Float[Tensor, " batch"], factor: Literal[1, 2] | None) -> Float[Tensor, " batch"]:
        return x * (factor or 1)

    @typechecked
    def parity(n: int) -> Literal["even", "odd"]:
        return "odd" if n % 2 else "even" if n else "zero"  # pyright: ignore[reportReturnType]

    Small = TypeVar("Small", bound=Literal[1, 2])

    @typechecked
    def same(n: Small) -> Small:
        return n

    x = torch.randn(4)
    for factor in (1, 2, None, 1):
        scaled(x, factor)
        scaled(x, factor=factor)
    assert (parity(1), parity(2), same(1)) == ("odd", "even", 1)
    row_sums(torch.randn(2, 3), 3)
    refused = (lambda: scaled(x, 3), lambda: scaled(x, factor=3), lambda: same(3))  # pyright: ignore[reportArgumentType]
    refused += (lambda: row_sums(torch.randn(2, 3), 4),)
    for call in refused:
        with pytest.raises(TypeCheckError):
            call()
    with pytest.raises(TypeCheckError, match="return"):
        parity(0)


def test_tuple_subclasses_are_remembered_item_by_item() -> None:
    @typechecked
    def rank(shape: tuple[int, int]) -> int:
        return len(shape)

    assert rank((2, 3)) == 2
    with pytest.raises(TypeCheckError):
        rank(torch.Size([2, 3, 4]))  # pyright: ignore[reportArgumentType]


def test_bf16_autocast_keeps_checks_on() -> None:
    net = ScalarMLP(4, (8,))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        prediction = net(torch.randn(5, 4))
        assert prediction.dtype == torch.bfloat16
        mse_loss(prediction, torch.randn(5, dtype=torch.bfloat16))
        with pytest.raises(TypeCheckError):
            mse_loss(prediction, torch.randn(5, 1, dtype=torch.bfloat16))


@pytest.mark.no_broadcast_guard
@pytest.mark.parametrize("make_net", [lambda: ScalarMLP(8, (16, 16)), lambda: MLP(8, 3, (16,))])
def test_typed_network_breaks_no_more_graphs_than_unchecked(make_net) -> None:
    net, x = make_net(), torch.randn(32, 8)
    torch._dynamo.reset()
    checked = torch._dynamo.explain(net)(x)
    torch._dynamo.reset()
    with checks_disabled():
        unchecked = torch._dynamo.explain(net)(x)
    torch._dynamo.reset()
    assert checked.graph_break_count <= unchecked.graph_break_count
    assert checked.graph_count == unchecked.graph_count


def test_compiled_network_checks_shapes_at_its_boundary() -> None:
    torch._dynamo.reset()
    net = ScalarMLP(8, (16,))
    run = compiled(net, backend="aot_eager")
    for batch in (32, 32, 7, 1):
        prediction = run(torch.randn(batch, 8))
        assert prediction.shape == (batch,)
        prediction.sum().backward()
        with pytest.raises(TypeCheckError):
            run(torch.randn(batch, 8, 1))
    with pytest.raises(TypeCheckError):
        run(torch.randn(32, 8, dtype=torch.float64).int())
