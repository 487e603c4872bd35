"""What shapes cannot show, read off each typed module's axis names: **batch independence**
(changing one sample changes no other sample's output), **pad invariance** (where a module
takes a mask, True at real steps, changing the features at masked steps or appending padding
changes no real output) and **causality** (for a module whose ``causal`` attribute is True,
changing step ``t`` changes nothing before it).

Every typed method of an ``nn.Module`` (``annotation_cases.discover``) runs here, in float64
and eval mode, to 1e-6, on a module built by its factory in ``FACTORIES``; one without a
factory fails unless ``OPT_OUT`` says why. Axis sizes are pairwise distinct (``SIZES``), so
that no axis stands in for another.
"""

import importlib
import inspect
from collections.abc import Callable
from functools import partial
from importlib.util import find_spec
from typing import Any

import pytest
import torch
from einops import rearrange
from torch import nn

from .annotation_cases import PACKAGE, available_modules, discover, members
from .annotation_reading import axes, is_array

SIZES = {"batch": 5, "time": 7, "feature": 6, "action": 2}
LENGTHS = torch.tensor([7, 3, 5, 1, 6])  # each sequence's real steps; one is never padded
TOLERANCE = 1e-6


def _space(name: str, *args: Any) -> Any:
    return getattr(importlib.import_module("gymnasium.spaces"), name)(*args)


FACTORIES: dict[str, Callable[[Any], nn.Module]] = {
    "core.nets.MLP": lambda cls: cls(6, 4, (8,), "tanh"),
    "core.nets.ScalarMLP": lambda cls: cls(6, (8,), "tanh"),
    "core.attention.SelfAttention": lambda cls: cls(6, 2),
    "core.attention.SelfAttention/causal": lambda cls: cls(6, 2, causal=True),
    "core.standardise.Standardise": lambda cls: cls(6, [0.5] * 6, [2.0] * 6),
    "regression.module.RegressionModule": lambda cls: cls(6, (8,)),
    "ppo.agent.ActorCritic": lambda cls: cls(6, _space("Discrete", 2), (8,)),
    "ppo.agent.ActorCritic/box": lambda cls: cls(6, _space("Box", -1.0, 1.0, (2,)), (8,)),
    "sequence.module.EncoderBlock": lambda cls: cls(6, 2),
    "sequence.module.SequenceEncoder": lambda cls: cls(6, 4, 8, 2, 1),
    "sequence.module.SequenceClassifier": lambda cls: cls(
        6, ["a", "b", "c", "d"], width=8, heads=2, layers=1
    ),
}
"""One line per typed module (or several: ``/causal``), at ``SIZES``, given its class (imported
by name, so that a project without that example still has this file)."""
OPT_OUT: dict[str, str] = {}
"""``module.Class`` -> why batch independence and the rest cannot apply to it."""
CASES = sorted(
    (built, target.function.__name__)
    for target in discover(available_modules())
    if isinstance(target.owner, type) and issubclass(target.owner, nn.Module)
    for name in [f"{target.owner.__module__.partition('.')[2]}.{target.owner.__qualname__}"]
    if name not in OPT_OUT
    for built in [key for key in FACTORIES if key.partition("/")[0] == name] or [name]
)


def _is_step_mask(hint: Any) -> bool:
    named = [name for _, name in axes(hint)] if is_array(hint) else []
    return named == ["batch", "time"] and "bool" in hint.dtypes


MASKED_FUNCTIONS = sorted(
    (target.name, target.typed)
    for target in discover(available_modules())
    if target.owner is None and inspect.isfunction(target.typed)
    for parameters in [inspect.signature(target.function).parameters.values()]
    if any(_is_step_mask(parameter.annotation) for parameter in parameters)
)
"""Typed functions (a masked loss or reduction) that take a ``batch time`` mask of real steps:
where it says padding, nothing may count."""


def _mask(rank: int, steps: int) -> torch.Tensor:
    """True at the real steps of each sequence, on the last axis; 1 on the axes between."""
    keep = rearrange(torch.arange(steps), "t -> 1 t") < rearrange(LENGTHS, "b -> b 1")
    return rearrange(keep, "b t -> b " + "1 " * (rank - 2) + "t")


def _arguments(function: Callable[..., Any], steps: int, member: int) -> dict[str, Any]:
    """Valid arguments from the annotations: float64 noise, masks of ``LENGTHS`` real steps,
    ints below the ``action`` size; ``member`` picks among a union's array types. Axes are of
    their ``SIZES``, ``time`` and ``key`` of ``steps``, ``#`` ones at full size (a mask's shape
    is :func:`_mask`'s own), one ``SIZES`` does not name of 3."""
    generator = torch.Generator().manual_seed(0)
    built: dict[str, Any] = {}
    for name, parameter in inspect.signature(function).parameters.items():
        arrays = [hint for hint in members(parameter.annotation) if is_array(hint)]
        if name == "self" or not arrays:
            continue
        hint = arrays[min(member, len(arrays) - 1)]
        shape = tuple(
            value if kind == "fixed" else steps if value in ("time", "key") else SIZES.get(value, 3)
            for kind, value in axes(hint)
        )
        if "bool" in hint.dtypes:
            built[name] = _mask(len(shape), steps)
        elif any(dtype.startswith("int") for dtype in hint.dtypes):
            built[name] = torch.randint(0, SIZES["action"], shape, generator=generator)
        else:
            built[name] = torch.randn(shape, generator=generator, dtype=torch.float64)
    return built


def _outputs(call: Callable[..., Any], arguments: dict[str, Any]) -> list[torch.Tensor]:
    torch.manual_seed(0)  # a sampling method draws the same noise for every call
    with torch.no_grad():
        result = call(**arguments)
    return list(result) if isinstance(result, tuple) else [result]


def _build(built: str) -> nn.Module:
    module_name, _, class_name = built.partition("/")[0].rpartition(".")
    kind = getattr(importlib.import_module(f"{PACKAGE}.{module_name}"), class_name)
    return FACTORIES[built](kind).double().eval()


def _call(built: str, method: str) -> tuple[nn.Module, dict, list]:
    """The module built, arguments that fit the first union member that runs, and outputs."""
    if built not in FACTORIES:
        pytest.fail(f"{built} has typed methods but no factory in FACTORIES (or OPT_OUT)")
    module = _build(built)
    function = getattr(type(module), method).__wrapped__
    errors = []
    for member in range(3):
        arguments = _arguments(function, SIZES["time"], member)
        try:
            return module, arguments, _outputs(getattr(module, method), arguments)
        except (TypeError, RuntimeError, ValueError) as error:  # another union member
            errors.append(error)
    raise errors[0]


def _moved(call: Callable[..., Any], arguments: dict, changed: dict, part: Callable):
    """Each output whose ``part`` the change from ``arguments`` moved by more than
    ``TOLERANCE`` (or to NaN): its index, and by how much."""
    pairs = zip(_outputs(call, arguments), _outputs(call, changed), strict=True)
    moved = [float((part(old) - part(new)).abs().max()) for old, new in pairs]
    return [(index, by) for index, by in enumerate(moved) if not by <= TOLERANCE]


def batch_independence(module: nn.Module, method: str, arguments: dict[str, Any]) -> list[str]:
    """Each output row but the last, after the last sample of every float input changed."""
    changed = {name: value.clone() for name, value in arguments.items()}
    for value in changed.values():
        if value.is_floating_point():
            value[-1] += 1.0
    return [
        f"output {index}: the last sample moved another's by {by:.2e}"
        for index, by in _moved(getattr(module, method), arguments, changed, lambda out: out[:-1])
    ]


def _at_kept(output: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
    """The output at real steps where it has a time axis after batch, else all of it."""
    steps = keep.shape[1]
    if output.ndim >= 2 and output.shape[1] in (steps, steps + 2):
        return output[:, :steps][keep]
    return output


def _is_steps(value: torch.Tensor, steps: int) -> bool:
    return value.is_floating_point() and value.ndim == 3 and value.shape[1] == steps


def pad_invariance(built: str, method: str) -> list[str]:
    """Real outputs, after the features at padded steps changed or two padded steps appended."""
    module, arguments, _ = _call(built, method)
    function = getattr(type(module), method).__wrapped__
    return _pad_invariance(getattr(module, method), function, arguments)


def _pad_invariance(
    call: Callable[..., Any], function: Any, arguments: dict[str, Any]
) -> list[str]:
    """``pad_invariance`` for any ``call``; ``function``, its unwrapped definition, has the
    annotations that the longer, padded arguments are built from."""
    masks = [value for value in arguments.values() if value.dtype == torch.bool]
    if not masks:
        return []
    steps = SIZES["time"]
    keep = rearrange(masks[0], "b ... t -> b (...) t")[:, 0]
    padded = rearrange(~keep, "b t -> b t 1")
    noisy = {
        name: torch.where(padded, value + 10.0, value) if _is_steps(value, steps) else value
        for name, value in arguments.items()
    }
    longer = _arguments(function, steps + 2, 0)
    for name, value in arguments.items():  # the same steps, then two more of padding
        if value.dtype != torch.bool and value.ndim >= 2 and value.shape[1] == steps:
            longer[name][:, :steps] = value
    return [
        f"{label} moved real output {index} by {by:.2e}"
        for label, changed in (("padded features", noisy), ("appended padding", longer))
        for index, by in _moved(call, arguments, changed, partial(_at_kept, keep=keep))
    ]


def causality(module: nn.Module, method: str, arguments: dict[str, Any]) -> list[str]:
    """Outputs before step ``t`` after step ``t`` of every sequence input changed."""
    t = SIZES["time"] // 2
    changed = {name: value.clone() for name, value in arguments.items()}
    for value in changed.values():
        if value.is_floating_point() and value.ndim == 3:
            value[:, t] += 1.0
    return [
        f"output {index}: step {t} reached step {t - 1} or before"
        for index, _ in _moved(getattr(module, method), arguments, changed, lambda out: out[:, :t])
    ]


@pytest.mark.parametrize(("built", "method"), CASES)
def test_no_sample_reads_another(built: str, method: str) -> None:
    module, arguments, _ = _call(built, method)
    assert not batch_independence(module, method, arguments)


@pytest.mark.parametrize(("built", "method"), CASES)
def test_padding_changes_no_real_output(built: str, method: str) -> None:
    assert not pad_invariance(built, method)


def masked_function_pad_invariance(typed: Callable[..., Any]) -> list[str]:
    """A typed function's outputs, after its data at padded steps changed or padding grew."""
    function = typed.__wrapped__
    return _pad_invariance(typed, function, _arguments(function, SIZES["time"], 0))


@pytest.mark.parametrize(("name", "typed"), MASKED_FUNCTIONS, ids=[n for n, _ in MASKED_FUNCTIONS])
def test_a_masked_function_counts_no_padding(name: str, typed: Callable[..., Any]) -> None:
    assert not masked_function_pad_invariance(typed)


CAUSAL = [c for c in CASES if c[0] in FACTORIES and getattr(_build(c[0]), "causal", 0) is True]
"""The cases whose built module declares itself causal: its ``causal`` attribute is True."""


@pytest.mark.parametrize(("built", "method"), CAUSAL)
def test_a_causal_module_hides_the_future(built: str, method: str) -> None:
    module, arguments, _ = _call(built, method)
    assert not causality(module, method, arguments)


REQUIRED = {
    "core.nets.ScalarMLP": "core.nets",
    "regression.module.RegressionModule": "regression",
    "ppo.agent.ActorCritic": "ppo",
    "sequence.module.SequenceClassifier": "sequence",
}
"""The modules that may not opt out, each checked wherever its package is generated."""


def test_the_required_modules_are_all_checked() -> None:
    present = {name for name, pkg in REQUIRED.items() if find_spec(f"{PACKAGE}.{pkg}")}
    checked = {built.partition("/")[0] for built, _ in CASES}
    assert present <= checked, f"not checked: {present - checked}"
    assert CAUSAL, "no module declares itself causal: the causality check would run on none"
    assert not present & set(OPT_OUT)
