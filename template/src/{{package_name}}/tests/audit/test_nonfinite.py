"""``audit --nonfinite`` on this folder's untyped model and on small scripts: a fully masked
row's NaN is found at the softmax and a ``log(0)`` that reaches the loss at the log, each in
its module and at its line; a gradient that turns non-finite is found at its forward op; the
``-inf`` of a mask that a softmax absorbs is no finding; the program cannot swallow the stop,
and the op's inputs load with ``weights_only=True``."""

import json
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch

from ...audit.command import main

pytestmark = pytest.mark.no_broadcast_guard  # the audit runs a guard of its own
HERE = Path(__file__).parent
PLANTED = {
    "a fully masked row": (
        "future = torch.ones(T, T, dtype=torch.bool).triu(1)",
        "future = torch.ones(T, T, dtype=torch.bool).triu(0)",  # the diagonal too: row 0 is empty
        "return weights.softmax(dim=-1) @ v",
    ),
    "log(0) reaching the loss": (
        "return Output(logits, F.cross_entropy(*flat))",
        "return Output(logits, F.nll_loss(flat[0].relu().log(), flat[1]))",
        "return Output(logits, F.nll_loss(flat[0].relu().log(), flat[1]))",
    ),
}
"""Each bug: the line of ``untyped_model.py`` it replaces, its own, and the line it is found at."""


@pytest.fixture(autouse=True)
def _fresh_imports() -> Iterator[None]:
    """The driver imports the model by name from its folder: each test's copy, not a cached one."""
    names = ("untyped_model", "untyped_rl")
    for name in names:
        sys.modules.pop(name, None)
    yield
    for name in names:
        sys.modules.pop(name, None)


def _audit(folder: Path, script: str = "untyped_driver.py") -> tuple[int, list[dict[str, Any]]]:
    status = main(["--nonfinite", "--report", str(folder / "r.json"), str(folder / script)])
    return status, json.loads((folder / "r.json").read_text())


def _untyped(folder: Path, bug: str | None = None) -> int:
    """The untyped model and driver in ``folder``, with ``bug`` planted; where it is found."""
    for name in ("untyped_model.py", "untyped_rl.py", "untyped_driver.py"):
        shutil.copy(HERE / name, folder / name)
    if bug is None:
        return 0
    clean, planted, found = PLANTED[bug]
    model = folder / "untyped_model.py"
    assert clean in (text := model.read_text())
    text = text.replace(clean, planted)
    model.write_text(text)
    return [line.strip() for line in text.splitlines()].index(found) + 1


@pytest.mark.parametrize(
    ("bug", "op", "module", "module_class"),
    [
        ("a fully masked row", "Tensor.softmax", "blocks.0.attn", "Attention"),
        ("log(0) reaching the loss", "Tensor.log", "", "TinyGPT"),
    ],
)
def test_a_planted_bug_is_found_at_its_op_module_and_line_and_stops_the_program(
    bug: str,
    op: str,
    module: str,
    module_class: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    line = _untyped(tmp_path, bug)
    status, report = _audit(tmp_path)
    assert status == 1 and "trained" not in capsys.readouterr().out
    (finding,) = report
    assert finding["kind"] == "nonfinite" and finding["op"] == op
    assert (finding["module"], finding["module_class"]) == (module, module_class)
    assert (finding["file"], finding["line"]) == (str(tmp_path / "untyped_model.py"), line)
    assert finding["nonfinite"] > 0 and finding["count"] == 1
    inputs = torch.load(finding["saved"], weights_only=True)
    assert [list(t.shape) for t in inputs] == finding["shapes"] and inputs


def test_the_clean_model_masked_with_minus_infinity_is_no_finding_and_prints_the_same(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _untyped(tmp_path)
    assert main([str(tmp_path / "untyped_driver.py")]) == 0
    plain = capsys.readouterr().out
    assert _audit(tmp_path) == (0, []) and capsys.readouterr().out == plain
    assert not (tmp_path / "r.nonfinite.pt").exists()


GRADIENT = """import torch
from torch import nn


class Pool(nn.Module):
    def forward(self, x):
        return x.pow(2).sum(-1).sqrt()


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(5, 4, padding_idx=0)
        self.pool = Pool()

    def forward(self, idx):
        return self.pool(self.embed(idx)).sum()


causal = torch.full((3, 3), float("-inf")).triu(1)  # made by a factory: no culprit
scores = (torch.randn(3, 3) + causal).softmax(-1)
try:
    Net()(torch.tensor([[1, 2, 0]])).backward()
except Exception:
    print("swallowed")
print("finished")
"""
"""A padding row of zeros: its norm is 0 and the norm's gradient is infinite there."""


def test_a_gradient_turned_non_finite_is_found_at_its_forward_op_and_not_swallowed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "train.py").write_text(GRADIENT)
    status, report = _audit(tmp_path, "train.py")
    assert status == 1 and capsys.readouterr().out == ""
    (finding,) = report
    assert finding["op"] == "Tensor.sqrt (backward)" and finding["line"] == 7
    assert (finding["module"], finding["module_class"], finding["nonfinite"]) == ("pool", "Pool", 1)
    assert finding["saved"] == str(tmp_path / "r.nonfinite.pt")
