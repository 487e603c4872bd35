"""The annotate command on the untyped model, agent and driver of this folder: two recorded
runs at different sizes give annotations that a held-out run at new sizes passes (decorated,
and under ``audit --typecheck``), that refuse shape bugs planted at function boundaries, that
a second write leaves as they are, and that touch only signatures, imports and decorators.
Each refusal is one line and exit status 2, with nothing written."""

import ast
import difflib
import json
import runpy
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from jaxtyping import TypeCheckError

from ...audit.annotate import record
from ...audit.annotate.__main__ import main
from ..project import child_environment, refusal, run_example

HERE = Path(__file__).parent
SOURCES = ("untyped_model.py", "untyped_rl.py")
RECORDED = (["--batch", "2", "--time", "5", "--width", "16", "--envs", "3"],
            ["--batch", "3", "--time", "7", "--width", "24", "--envs", "5"])  # fmt: skip
HELD_OUT = ["--batch", "4", "--time", "6", "--width", "32", "--envs", "9"]


def _signature_lines(text: str) -> set[int]:
    """The lines of a file's imports, and of its functions' decorators and signatures."""
    lines: set[int] = set()
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.FunctionDef):
            first = min([node.lineno] + [d.lineno for d in node.decorator_list])
            lines.update(range(first, node.body[0].lineno))
        elif isinstance(node, ast.Import | ast.ImportFrom):
            lines.update(range(node.lineno, (node.end_lineno or node.lineno) + 1))
    return lines


def _assert_only_signatures_changed(old: str, new: str) -> None:
    a, b = old.splitlines(), new.splitlines()
    allowed_a, allowed_b = _signature_lines(old), _signature_lines(new)
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b).get_opcodes():
        if tag != "equal":
            assert set(range(i1 + 1, i2 + 1)) <= allowed_a, a[i1:i2]
            assert set(range(j1 + 1, j2 + 1)) <= allowed_b, b[j1:j2]
    assert "TYPE_CHECKING" not in new
    for node in ast.walk(ast.parse(new)):  # no annotation quoted as a string
        for hint in (getattr(node, "annotation", None), getattr(node, "returns", None)):
            assert not isinstance(hint, ast.Constant), ast.dump(hint)


def _run(script: str, args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, script, *args]
    return subprocess.run(command, cwd=cwd, env=child_environment(), capture_output=True, text=True)


@pytest.mark.slow
def test_annotations_from_two_runs_pass_new_sizes_and_refuse_planted_bugs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in (*SOURCES, "untyped_driver.py"):
        shutil.copy(HERE / name, tmp_path / name)
    original = {name: (tmp_path / name).read_text() for name in SOURCES}
    status, lines = run_example("audit.annotate", ["untyped_driver.py", *RECORDED[0]], tmp_path)
    assert status == 0 and lines[0].startswith("trained"), lines
    status, lines = run_example("audit.annotate", ["-m", "untyped_driver", *RECORDED[1]], tmp_path)
    assert status == 0 and "annotate: 2 runs recorded in annotate.json" in lines, lines
    assert {name: (tmp_path / name).read_text() for name in SOURCES} == original
    assert "+def value_loss(values: Float[Tensor" in (tmp_path / "annotate.diff").read_text()

    monkeypatch.chdir(tmp_path)
    assert main(["--write"]) == 0
    typecheck = ["--typecheck", "untyped_model", "--typecheck", "untyped_rl"]
    status, lines = run_example("audit", [*typecheck, "untyped_driver.py", *HELD_OUT], tmp_path)
    assert status == 0 and "audit: no finding" in lines, lines
    assert main(["--write", "--decorate"]) == 0
    annotated = {name: (tmp_path / name).read_text() for name in SOURCES}
    for name in SOURCES:
        _assert_only_signatures_changed(original[name], annotated[name])
    done = _run("untyped_driver.py", HELD_OUT, tmp_path)
    assert done.returncode == 0, done.stderr

    gpt, rl = (runpy.run_path(str(tmp_path / name)) for name in SOURCES)
    model, agent = gpt["TinyGPT"](11, 16, 4, 1, 16), rl["Agent"](4, 2)
    idx, obs = torch.randint(11, (2, 5)), torch.randn(3, 4)
    with pytest.raises(TypeCheckError):  # the critic's (N, 1) column
        rl["value_loss"](agent.get_value(obs), torch.randn(3))
    with pytest.raises(TypeCheckError):  # targets one step short
        model(idx, idx[:, 1:])
    with pytest.raises(TypeCheckError):  # an observation of the wrong width
        agent.get_action_and_value(torch.randn(3, 5))
    with pytest.raises(TypeCheckError):  # a batch of actions for another batch
        agent.get_action_and_value(obs, torch.zeros(4, dtype=torch.long))

    assert main(["--write", "--decorate"]) == 0  # again, from the same runs: no change
    assert {name: (tmp_path / name).read_text() for name in SOURCES} == annotated


def test_each_refusal_is_one_line_and_writes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "train.py").write_text("print('ran')\n")
    assert "--source" in refusal(capsys, lambda: main(["--source", "nowhere", "train.py"]))
    for text in ("{not json", '{"format": "something else"}'):
        (tmp_path / "annotate.json").write_text(text)
        assert "not an annotate record" in refusal(capsys, lambda: main(["train.py"]))
        assert (tmp_path / "annotate.json").read_text() == text

    kept = record.new_record()
    source = tmp_path / "double.py"
    entry = {"file": str(source), "qualname": "double", "params": ["x"], "torchscript": False}
    kept["functions"][f"{source}::double"] = {**entry, "calls": []}
    (tmp_path / "annotate.json").write_text(json.dumps(kept))
    for text, reason in (
        ("def double(x:\n", "no longer parses"),
        ("def triple(x): ...\n", "double"),
    ):
        source.write_text(text)
        assert reason in refusal(capsys, lambda: main(["--write"]))
        assert source.read_text() == text and not (tmp_path / "annotate.diff").exists()


def test_a_failing_program_keeps_its_calls_and_its_status_and_changes_no_source(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    script = "import torch\n\ndef double(x):\n    return 2 * x\n\ndouble(torch.ones(3))\n1 / 0\n"
    (tmp_path / "fails.py").write_text(script)
    assert main(["fails.py"]) == 1
    (function,) = json.loads((tmp_path / "annotate.json").read_text())["functions"].values()
    assert function["qualname"] == "double" and function["calls"][0]["result"]["tensor"] == [3]
    assert (tmp_path / "fails.py").read_text() == script
    assert not (tmp_path / "annotate.diff").exists()


def test_the_users_annotations_are_kept_and_bare_tensors_replaced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    script = """from typing import Optional

import torch
from jaxtyping import Float
from torch import Tensor


def scale(x: Tensor, factor: float, mask: Optional[Tensor] = None) -> "Tensor":
    return x * factor if mask is None else x * mask


def keep(y: Float[Tensor, "n"]) -> Float[Tensor, "n"]:
    return y


for rows in (2, 4):
    scale(torch.ones(rows, 3), 2.0)
    scale(torch.ones(rows, 3), 2.0, torch.ones(rows, 3))
    keep(torch.ones(rows))
"""
    (tmp_path / "scale.py").write_text(script)
    assert main(["--write", "scale.py"]) == 0
    annotated = (tmp_path / "scale.py").read_text()
    typed = 'Float[Tensor, "batch 3"]'
    assert f"x: {typed}, factor: float, mask: {typed} | None = None) -> {typed}:" in annotated
    assert 'def keep(y: Float[Tensor, "n"]) -> Float[Tensor, "n"]:' in annotated
    assert main(["--write"]) == 0 and (tmp_path / "scale.py").read_text() == annotated


NAMED_BY_CALLS = """import torch
from torch import nn


class DoubleConv(nn.Module):
    def __init__(self, channels_in, channels_out):
        super().__init__()
        self.convs = nn.Sequential(
            nn.Conv2d(channels_in, channels_out, 3, padding=1), nn.BatchNorm2d(channels_out),
            nn.ReLU(), nn.Conv2d(channels_out, channels_out, 3, padding=1), nn.ReLU(),
        )

    def forward(self, x):
        return self.convs(x)


class Down(nn.Module):
    def __init__(self, channels_in, channels_out):
        super().__init__()
        self.pool_conv = nn.Sequential(nn.MaxPool2d(2), DoubleConv(channels_in, channels_out))

    def forward(self, x):
        return self.pool_conv(x)


class UNetish(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.inc, self.down = DoubleConv(3, width), Down(width, 2 * width)
        self.up = nn.ConvTranspose2d(2 * width, width, 2, stride=2)
        self.out = nn.Conv2d(2 * width, 1, 1)

    def forward(self, images):
        x1 = self.inc(images)
        return self.out(torch.cat([x1, self.up(self.down(x1))], dim=1))


def precompute_freqs_cis(dim, end, theta=10000.0):
    freqs = 1.0 / (theta ** (torch.arange(0, dim, 2)[: (dim // 2)].float() / dim))
    angles = torch.outer(torch.arange(end), freqs)
    return torch.polar(torch.ones_like(angles), angles)


def get_batch(split):
    data = train if split == "train" else val
    ix = torch.randint(len(data) - block_size, (batch_size,))
    return torch.stack([data[i : i + block_size] for i in ix])


train, val = torch.randint(50, (500,)), torch.randint(50, (100,))
for batch_size, height, width, channels, end in [(2, 16, 24, 4, 32), (3, 32, 40, 5, 48)]:
    UNetish(channels)(torch.randn(batch_size, 3, height, width))
    precompute_freqs_cis(2 * channels, end)
    block_size = height
    get_batch("train")
"""
"""A U-Net's blocks, RoPE's frequencies from two integers, and nanoGPT's batches from a
split's name and globals: none of them names an axis in its code."""


def test_convolutions_and_integer_arguments_name_axes_and_get_batch_keeps_batch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "blocks.py").write_text(NAMED_BY_CALLS)
    assert main(["blocks.py"]) == 0
    diff = (tmp_path / "annotate.diff").read_text()
    layout, result = "batch channel height width", "batch channel_result height width"
    assert f'def forward(self, x: Float[Tensor, "{layout}"]) -> Float[Tensor, "{result}"]:' in diff
    assert 'def forward(self, images: Float[Tensor, "batch 3 height width"])' in diff
    assert "x_axis" not in diff and "images_axis" not in diff
    rope = (
        'def precompute_freqs_cis(dim, end, theta=10000.0) -> Complex[Tensor, "end result_axis1"]:'
    )
    assert rope in diff and 'def get_batch(split) -> Int[Tensor, "batch result_axis1"]:' in diff
