"""Every typed callable accepts inputs built from its annotations and rejects each broken one.

The cases come from ``annotation_cases``: nothing here names a function, so a new typed
function is covered by being written. Broken calls are made after a valid call of the same
function, and twice, so that a check cached per shape signature must still reject them.
"""

import inspect
import itertools

import pytest
import torch
from jaxtyping import Float, Int, TypeCheckError, jaxtyped
from torch import Tensor

from . import annotation_cases as ac
from .annotation_reading import satisfied

MODULES = ac.available_modules()
TARGETS = ac.discover(MODULES)
CASES = [ac.Case(t, size, kind) for t in TARGETS for size in ac.SIZES for kind in ac.kinds(t)]
PERTURBED = [broken for case in CASES for broken in ac.perturbations(case)]


def test_discovery_finds_every_typechecked_decorator() -> None:
    written = sum(ac.decorators_in_source(module) for module in MODULES)
    found = "\n".join(target.name for target in TARGETS)
    assert len(TARGETS) == written, (
        f"{written} @typechecked in the source but {len(TARGETS)} found (one nested in a "
        f"function, or on a staticmethod, is out of reach):\n{found}"
    )


def test_every_target_with_a_tensor_argument_has_a_broken_case() -> None:
    broken = {perturbed.case.target.name for perturbed in PERTURBED}
    tensors = {c.target.name for c in CASES if ac.Spec in map(type, ac.arguments(c).values())}
    assert tensors and tensors <= broken


@pytest.mark.parametrize("case", CASES, ids=str)
def test_valid_inputs_pass_by_position_then_by_keyword(case: ac.Case) -> None:
    call, given = ac.bind(case), ac.values(ac.arguments(case))
    bound = inspect.signature(call).bind(**given)  # leading arguments by position
    for result in (call(*bound.args, **bound.kwargs), call(**given)):
        assert satisfied(ac.hinted(case, given, result))


@pytest.mark.parametrize("perturbed", PERTURBED, ids=str)
def test_broken_input_raises_after_a_valid_call(perturbed: ac.Perturbed) -> None:
    """Raises when the valid signature is remembered, and again: a failure is not a pass."""
    call, valid = ac.bind(perturbed.case), ac.arguments(perturbed.case)
    bound = inspect.signature(call).bind(**ac.values(valid))
    call(*bound.args, **bound.kwargs)
    broken = ac.values({**valid, perturbed.argument: perturbed.spec})
    bound = inspect.signature(call).bind(**broken)
    with pytest.raises(TypeCheckError):
        call(*bound.args, **bound.kwargs)
    with pytest.raises(TypeCheckError):
        call(**broken)


class _NeedsAFile:
    def __init__(self, path: str) -> None: ...


def test_a_class_the_rule_cannot_build_fails_naming_the_table() -> None:
    with pytest.raises(TypeError, match="CONSTRUCTORS"):
        ac.build(_NeedsAFile, 3, "")


READ_ANNOTATIONS = {
    "rows": Float[Tensor, " batch *rest"],
    "matrix": Float[Tensor, "batch feature"],
    "action": Int[Tensor, " batch"] | Float[Tensor, "batch action"],
    "scalar": Float[Tensor, ""],
    "anonymous": Float[Tensor, "_ ... 2"],
}
SHAPES = [(), (1,), (2,), (3,), (1, 1), (2, 1), (2, 2), (3, 2), (2, 3), (2, 2, 1)]


@pytest.mark.parametrize("name", READ_ANNOTATIONS)
def test_reading_of_annotations_agrees_with_jaxtyping(name: str) -> None:
    """The verdicts that decide which broken calls must raise are jaxtyping's own."""
    hint = READ_ANNOTATIONS[name]
    for dtype, first, second in itertools.product((torch.float32, torch.int64), SHAPES, SHAPES):
        pair = (torch.zeros(first, dtype=dtype), torch.zeros(second, dtype=dtype))
        with jaxtyped("context"):
            expected = all(isinstance(value, hint) for value in pair)
        assert satisfied([(hint, value) for value in pair]) is expected, (dtype, first, second)
