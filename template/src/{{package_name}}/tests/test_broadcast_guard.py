"""BroadcastGuard: every way of stretching both operands raises at the caller's line; every
one-sided broadcast, outer product, optimizer step, index grid and mask passes."""

import ast
import sys
from collections.abc import Callable
from pathlib import Path

import einx
import lightning as L
import pytest
import torch
import torch.nn.functional as F
from einops import rearrange
from torch import Tensor
from torch.distributions import Categorical, Normal
from torch.utils.data import DataLoader, TensorDataset

from ..core import broadcast
from ..core.broadcast import BroadcastError, BroadcastGuard, Stretch
from ..run.guards import BroadcastGuardCallback
from .project import quiet_trainer

N, T, C = 5, 6, 3
COLUMN, ROW, FLAT = torch.randn(N, 1), torch.randn(1, N), torch.randn(N)
MATRIX, BIAS = torch.randn(N, 3), torch.randn(3)
CATEGORICAL = Categorical(logits=MATRIX)


def _squared_error(pred, target):  # untyped: no annotation can see the broadcast inside it
    return ((pred - target) ** 2).mean()


STRETCHING: dict[str, tuple[Callable[[], object], str, str]] = {
    "operator -": (lambda: COLUMN - FLAT, "sub", "(5, 1) and (5,)"),
    "operator * with a row": (lambda: COLUMN * ROW, "mul", "(5, 1) and (1, 5)"),
    "operator in place": (lambda: FLAT.clone().__iadd__(COLUMN), "add_", "(5,) and (5, 1)"),
    "comparison": (lambda: COLUMN > FLAT, "gt", "(5, 1) and (5,)"),
    "torch.add": (lambda: torch.add(COLUMN, FLAT), "torch.add", "(5, 1) and (5,)"),
    "torch.subtract": (lambda: torch.subtract(COLUMN, FLAT), "torch.subtract", "(5, 1) and (5,)"),
    "torch.divide": (lambda: torch.divide(FLAT, COLUMN), "torch.divide", "(5,) and (5, 1)"),
    "torch.where": (lambda: torch.where(FLAT > 0, COLUMN, 0.0), "torch.where", "(5,) and (5, 1)"),
    "F.mse_loss": (lambda: F.mse_loss(FLAT, COLUMN), "mse_loss", "(5,) and (5, 1)"),
    "nn.L1Loss": (lambda: torch.nn.L1Loss()(COLUMN, FLAT), "l1_loss", "(5, 1) and (5,)"),
    "Normal.log_prob": (lambda: Normal(COLUMN, 1.0).log_prob(FLAT), "sub", "(5,) and (5, 1)"),
    "Categorical.log_prob of a column": (
        lambda: CATEGORICAL.log_prob(torch.zeros(N, 1, dtype=torch.long)),
        "broadcast_tensors",
        "(5, 1, 1) and (5, 3)",
    ),
    "Normal params": (lambda: Normal(COLUMN, FLAT.exp()), "broadcast_tensors", "(5, 1) and (5,)"),
}


@pytest.mark.parametrize("case", list(STRETCHING), ids=list(STRETCHING))
def test_stretching_both_operands_names_op_shapes_and_caller_line(case: str) -> None:
    operation, op_name, shapes = STRETCHING[case]
    with pytest.raises(BroadcastError) as caught, BroadcastGuard():
        operation()
    message = str(caught.value)
    assert op_name in message and shapes in message and "-> (5, 5" in message
    assert f"{__file__}:{operation.__code__.co_firstlineno}:" in message


@pytest.mark.no_broadcast_guard
def test_untyped_helper_is_caught_at_its_own_line_and_on_stretch_lets_it_go_on() -> None:
    seen: list[Stretch] = []
    with BroadcastGuard(on_stretch=seen.append):
        losses = [_squared_error(COLUMN, FLAT) for _ in range(2)]
    assert [loss.ndim for loss in losses] == [0, 0]
    line = _squared_error.__code__.co_firstlineno + 1
    source = "return ((pred - target) ** 2).mean()"
    assert seen == [Stretch("Tensor.sub", ((5, 1), (5,)), (5, 5), __file__, line, source)] * 2
    with pytest.raises(BroadcastError) as caught, BroadcastGuard():
        _squared_error(COLUMN, FLAT)
    assert str(caught.value) == seen[0].message()
    assert f"{Path(__file__)}:{line}: {source}" in str(caught.value)


def test_incompatible_shapes_keep_torchs_own_error(broadcast_guard: BroadcastGuard) -> None:
    with pytest.raises(RuntimeError, match="must match"):
        torch.add(torch.randn(3, 2), torch.randn(4, 1))


def _row(x: Tensor) -> Tensor:
    return rearrange(x, "t -> 1 t")


def _column(x: Tensor) -> Tensor:
    return rearrange(x, "t -> t 1")


def _padding_mask() -> Tensor:
    return _row(torch.arange(T)) < _column(torch.tensor([6, 3, 5, 2]))


# One-sided broadcasts, and the guard's one exception: stretches that build an index grid
# or a mask (more of those, in plain torch, in ``PLAIN_TORCH``).
PASSING: dict[str, Callable[[], object]] = {
    "bias": lambda: MATRIX + BIAS,
    "python scalar": lambda: 2.0 - MATRIX,
    "0-d tensor": lambda: MATRIX * torch.tensor(3.0),
    "attention mask": lambda: torch.randn(2, 4, N, N) + torch.randn(1, 1, N, N),
    "einsum outer product": lambda: torch.einsum("i,j->ij", FLAT, FLAT),
    "torch.outer": lambda: torch.outer(FLAT, FLAT),
    "batched matmul": lambda: torch.randn(2, 1, N, 3) @ torch.randn(4, 3, 2),
    "batch size 1": lambda: torch.randn(1, 1) - torch.randn(1),
    "matching loss": lambda: F.binary_cross_entropy_with_logits(FLAT, torch.rand(N)),
    "explicit expand": lambda: COLUMN.expand(N, N) * ROW.expand(N, N),
    "where with a column condition": lambda: torch.where(COLUMN > 0, MATRIX, 0.0),
    "Normal.log_prob": lambda: Normal(COLUMN, 1.0).log_prob(MATRIX),
    "Categorical sample_shape": lambda: CATEGORICAL.log_prob(CATEGORICAL.sample((7,))),
    "padding mask": _padding_mask,
    "relative positions": lambda: _row(torch.arange(T)) - _column(torch.arange(T)),
    "one-hot": lambda: _column(torch.randint(0, C, (N,))) == torch.arange(C),
    "position ids": lambda: _column(torch.tensor([3, 0, 7])) + torch.arange(T),
}


@pytest.mark.parametrize("case", list(PASSING), ids=list(PASSING))
def test_one_sided_broadcasts_grids_and_masks_pass(
    case: str, broadcast_guard: BroadcastGuard
) -> None:
    PASSING[case]()


@pytest.mark.parametrize("optimizer", [torch.optim.Adam, torch.optim.AdamW, torch.optim.SGD])
def test_optimizer_steps_pass(
    optimizer: Callable[..., torch.optim.Optimizer], broadcast_guard: BroadcastGuard
) -> None:
    net = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Linear(4, 1))
    opt = optimizer(net.parameters(), lr=0.1)
    for _ in range(2):
        loss = rearrange(net(MATRIX), "batch 1 -> batch").square().mean()
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(net.parameters(), 0.5)
        opt.step()


class _Scores(L.LightningModule):
    """Registers float slopes and a causal mask in ``__init__``, before ``fit`` arms the
    guard, and builds a distance bias and a padded causal mask from them in each step; from
    step 2 on, its loss also stretches both operands."""

    slopes: Tensor
    causal: Tensor

    def __init__(self) -> None:
        super().__init__()
        self.net = torch.nn.Linear(3, 4 * 4)
        self.register_buffer("slopes", torch.rand(4, 1))
        self.register_buffer("causal", torch.ones(4, 4, dtype=torch.bool).tril())

    def training_step(self, batch: list[Tensor], batch_idx: int) -> Tensor:
        x, y = batch
        bias = self.slopes * torch.arange(4)  # a float buffer, a constant, times a grid
        keep = rearrange(x[:, 0] > -3, "batch -> batch 1 1") & self.causal
        scores = rearrange(self.net(x), "batch (q k) -> batch q k", q=4) + bias
        loss = scores.masked_fill(~keep, 0.0).pow(2).mean()
        if batch_idx >= 2:  # (batch, 1) against (batch,)
            loss = loss + ((scores[:, 0, 0:1] - y) ** 2).mean()
        return loss

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=0.1)


def _fit(steps: int) -> BroadcastGuardCallback:
    callback = BroadcastGuardCallback(steps=steps)
    data = DataLoader(TensorDataset(torch.randn(32, 3), torch.randn(32)), batch_size=4)
    trainer = quiet_trainer(max_steps=6, callbacks=[callback], enable_checkpointing=False)
    trainer.fit(_Scores(), data)
    return callback


@pytest.mark.no_broadcast_guard
def test_callback_guards_only_its_steps_and_knows_the_modules_buffers() -> None:
    """The stretch of step 2 raises only while guarded; the buffers, made before the guard
    armed, pass as a constant and a grid; no torch function mode is left behind."""
    with pytest.raises(BroadcastError, match=r"sub stretched .*\(4, 1\) and \(4,\)"):
        _fit(steps=3)
    assert not torch.overrides._get_current_function_mode_stack()
    assert _fit(steps=2).guarded == 2
    assert not torch.overrides._get_current_function_mode_stack()


def test_broadcast_module_imports_only_torch_and_the_standard_library() -> None:
    """``core/broadcast.py`` is meant to be copied into plain PyTorch code as it is."""
    nodes = list(ast.walk(ast.parse(Path(str(broadcast.__file__)).read_text())))
    imported = [a.name for node in nodes if isinstance(node, ast.Import) for a in node.names]
    imported += ["." * n.level + (n.module or "") for n in nodes if isinstance(n, ast.ImportFrom)]
    allowed = {"torch", *sys.stdlib_module_names}
    assert imported and all(name.split(".")[0] in allowed for name in imported), imported


def _filled_zeros_buffer() -> Tensor:
    """CleanRL's storage: allocated with ``zeros``, filled step by step, then used."""
    advantages = torch.zeros(3, N)
    for step in range(3):
        advantages[step] = torch.randn(N)
    return _column(advantages[0]) * torch.randn(N).exp()


def _grid_overwritten_through_a_view() -> Tensor:
    positions = rearrange(torch.arange(2 * N).float(), "(two n) -> two n", two=2)
    positions[0].copy_(torch.randn(N))
    return rearrange(positions, "two n -> two n 1") - torch.randn(N)


FLAGS = torch.rand(N, 2) > 0.9  # terminated and truncated: two columns of one buffer
STILL_BUGS: dict[str, Callable[[], Tensor]] = {
    "accuracy, argmax kept as a column": lambda: MATRIX.argmax(-1, keepdim=True) == FLAT.long(),
    "accuracy on literals": lambda: torch.tensor([[1.0], [0.0]]) == torch.tensor([1.0, 0.0]),
    "regression loss": lambda: ((torch.randn(N, 1) - torch.randn(N)) ** 2).mean(),
    "PPO advantages": lambda: -(torch.randn(N, 1) * torch.randn(N).exp()).mean(),
    "filled zeros buffer": _filled_zeros_buffer,
    "grid overwritten through a view": _grid_overwritten_through_a_view,
    "noise drawn into zeros": lambda: _column(torch.zeros(N).normal_()) - torch.randn(N),
    # y = sin(x) + noise, with x (N, 1) from a grid and noise (N,): data.
    "sin(linspace) + noise": lambda: torch.sin(_column(torch.linspace(-1, 1, N))) + torch.randn(N),
    "ones as weights": lambda: (torch.ones(N) * _column(torch.randn(N)) ** 2).mean(),
    "literal slopes * data": lambda: _column(torch.tensor([0.5, 0.25])) * torch.randn(N),
    "ints & ints": lambda: _column(torch.randint(0, 4, (N,))) & torch.randint(0, 4, (N,)),
    "terminated (N, 1) | truncated (N,)": lambda: (COLUMN > 0) | (FLAT > 0),  # masks of data
    "done flags from columns of one buffer": lambda: FLAGS[:, 0:1] | FLAGS[:, 1],
    "float mask * data": lambda: rearrange(_padding_mask().float(), "b t -> b t 1") * FLAT,
}


@pytest.mark.parametrize("case", list(STILL_BUGS), ids=list(STILL_BUGS))
def test_data_stretches_still_raise(case: str) -> None:
    with pytest.raises(BroadcastError, match="stretched every operand"), BroadcastGuard():
        STILL_BUGS[case]()


def test_provenance_is_forgotten_with_the_tensor() -> None:
    with BroadcastGuard():
        grids = [torch.arange(T) for _ in range(100)]
        tracked = len(broadcast._TRACKED)
        del grids
        assert len(broadcast._TRACKED) <= tracked - 100


# Attention patterns of widely used code, as they write them (plain torch indexes with None,
# which this project's own code does not, so that source is a string here): ALiBi's per-head
# slopes times a relative-distance grid, rotary embeddings, masks by broadcast comparison,
# and masks combined: with each other, a data mask with itself, a constant's tril with data.
PLAIN_TORCH = """
heads, steps = 4, 6
start = 2 ** (-8 / heads)
slopes = torch.tensor([start ** (index + 1) for index in range(heads)])
positions = torch.arange(steps)
distance = -(positions[None, :] - positions[:, None]).abs()
alibi = slopes[:, None, None] * distance[None, :, :]
from_arange = (2 ** (-8 * torch.arange(1, heads + 1) / heads))[:, None, None] * distance[None]
bloom = slopes[:, None, None] * positions + torch.full((steps, steps), float("-inf")).triu(1)
inverse = 1.0 / (10000 ** (torch.arange(0, 8, 2) / 8))
angles = positions[:, None] * inverse[None, :]
rotary = torch.cat([angles.cos(), angles.cos()], dim=-1)
rotated = torch.randn(2, heads, steps, 8) * rotary
lengths = torch.randint(1, steps + 1, (3,))
padding = positions[None, :] < lengths[:, None]
queries = lengths[:, None] > positions[None, :]
causal = positions[:, None] >= positions[None, :]
keep = padding[:, None, None, :] & causal[None, None, :, :]
cross = queries[:, :, None] & padding[:, None, :]
real = torch.rand(3, steps) > 0.3
pairwise = real[:, :, None] & real[:, None, :]
seen = torch.ones(steps, steps, dtype=torch.bool).tril() | (torch.rand(3, 1, steps) > 0.5)
"""


def test_attention_patterns_of_widely_used_code_pass() -> None:
    with BroadcastGuard():
        exec(compile(PLAIN_TORCH, "<plain torch>", "exec"), {"torch": torch})
        x = torch.randn(3, T)  # einx names every axis: an outer sum of data passes
        _ = einx.add("b i, b j -> b i j", x, x)  # pyright: ignore[reportPrivateImportUsage]
    generated = compile("x[:, :, None] + x[:, None, :]", "<string>", "exec")
    with pytest.raises(BroadcastError), BroadcastGuard():  # generated by the user, not a library
        exec(generated, {"x": x})
    traced = torch.fx.symbolic_trace(lambda a, b: a - b)  # torch's generated code is checked
    with pytest.raises(BroadcastError), BroadcastGuard():
        traced(torch.randn(4, 1), torch.randn(4))


@pytest.mark.no_broadcast_guard  # about tensors made outside any guard
def test_marking_excuses_a_grid_or_a_float_buffer_made_before_the_guard() -> None:
    """Provenance is seen only while a guard is on (the audit starts its guard first), so a
    grid or a module's float buffer made before it counts as data until marked."""
    positions, slopes = torch.arange(N), _column(torch.tensor([0.5, 0.25]))
    with pytest.raises(BroadcastError), BroadcastGuard():
        _ = _row(positions) - _column(positions)
    with pytest.raises(BroadcastError), BroadcastGuard():
        _ = slopes * torch.arange(N)
    assert broadcast.mark_grid(positions) is positions
    with BroadcastGuard():
        _ = _row(positions) - _column(positions)
        _ = broadcast.mark_constant(slopes) * torch.arange(N)
