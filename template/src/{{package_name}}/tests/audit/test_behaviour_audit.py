"""``audit --behaviour`` on the untyped models of this folder, in this process: each planted
bug (an inverted causal mask, a padding mask never applied, a mean or a softmax over the
wrong axis) is found at its module and the line of its ``forward``; clean, nothing is found
and the program prints what it prints without the audit; verdicts are written and counted;
its usage errors exit 2."""

import json
import shutil
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from ...audit.command import main

pytestmark = pytest.mark.no_broadcast_guard  # the audit runs its own guard
HERE = Path(__file__).parent
SIZES = ["--batch", "7", "--time", "13"]
KINDS = {"batch-mixing", "not-causal", "mask-ignored"}
RUNS = {
    "gpt": ("untyped_driver.py", [*SIZES, "--envs", "7"]),
    "encoder": ("untyped_encoder.py", SIZES),
    "decoder": ("untyped_decoder.py", SIZES),
    "decoder-sdpa": ("untyped_decoder.py", [*SIZES, "--sdpa"]),
}
"""Each program as users would run it, at the sizes given to ``--batch`` and ``--time``."""
LOOKING_AHEAD = {"encoder": {"attn", "encoder"}}
"""Per run, the modules whose verdict is not causal: an encoder's attention sees every step.
The encoder's batches pad their last step in every row, where a look ahead would be hidden."""
FILES = sorted({script for script, _ in RUNS.values()}) + ["untyped_model.py", "untyped_rl.py"]
BATCH_NORM_CNN = """import torch
from torch import nn

torch.manual_seed(0)
net = nn.Sequential(nn.Conv2d(3, 8, 3), nn.BatchNorm2d(8), nn.ReLU(), nn.Flatten())
net.append(nn.Linear(512, 2))
optimizer = torch.optim.SGD(net.parameters(), lr=0.1)
for step in range(3):
    loss = net(torch.randn(7, 3, 10, 10)).square().mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
print(f"loss {loss.item():.4f}")
"""
"""A convolutional network whose BatchNorm mixes the batch in training, as it should."""


@pytest.fixture(autouse=True)
def forget_program_modules() -> Any:
    """The models a program imports from its folder leave ``sys.modules`` after each test,
    so that the next one imports its own planted copy."""
    yield
    for name in ("untyped_model", "untyped_rl"):
        sys.modules.pop(name, None)


def _audit(folder: Path, run: str, *options: str, plant: tuple[str, str] | None = None) -> tuple:
    """Copy the program of ``RUNS[run]`` into ``folder``, with ``plant`` (old, new) in the
    file that holds ``old``, and audit it: status, report, verdicts, stdout and stderr."""
    for name in FILES:
        shutil.copy(HERE / name, folder / name)
    if plant is not None:
        (path,) = [p for p in folder.glob("*.py") if plant[0] in p.read_text()]
        path.write_text(path.read_text().replace(plant[0], plant[1]))
    script, args = RUNS[run]
    return _audited(folder / script, *options, args=args)


def _audited(script: Path, *options: str, args: Sequence[str] = ()) -> tuple:
    """Audit ``script``: status, report and verdicts (written with ``--behaviour``)."""
    report, verdicts = script.parent / "report.json", script.parent / "verdicts.json"
    files = ["--report", str(report)] + ["--verdicts", str(verdicts)] * ("--behaviour" in options)
    status = main([*options, *files, str(script), *args])
    written = json.loads(verdicts.read_text()) if verdicts.exists() else []
    return status, json.loads(report.read_text()), written


def _written(folder: Path, source: str, *options: str) -> tuple:
    """``source`` written as ``folder/train.py``, audited by :func:`_audited`."""
    (folder / "train.py").write_text(source)
    return _audited(folder / "train.py", *options)


def _forward_line(path: Path, cls: str) -> int:
    """The line of ``def forward`` in class ``cls`` of ``path``."""
    lines = path.read_text().splitlines()
    start = next(i for i, text in enumerate(lines) if text.startswith(f"class {cls}("))
    return next(i for i in range(start, len(lines)) if "def forward(" in lines[i]) + 1


@dataclass(frozen=True)
class Planted:
    run: str
    old: str
    new: str
    options: tuple[str, ...]
    kind: str
    module: str
    cls: str
    file: str
    argument: str | None


PLANTED = {
    "inverted causal mask, causal by --causal": Planted(
        "gpt", ".triu(1)", ".tril(-1)", ("--causal", "Attention"),
        "not-causal", "blocks.0.attn", "Attention", "untyped_model.py", "x",
    ),
    "softmax over the query axis, causal by --causal": Planted(
        "gpt", "softmax(dim=-1)", "softmax(dim=-2)", ("--causal", "Attention"),
        "not-causal", "blocks.0.attn", "Attention", "untyped_model.py", "x",
    ),
    "softmax over the batch axis": Planted(
        "gpt", "softmax(dim=-1)", "softmax(dim=0)", (),
        "batch-mixing", "blocks.0.attn", "Attention", "untyped_model.py", None,
    ),
    "mean over the batch axis": Planted(
        "gpt", "self.attn(self.ln1(x))", "self.attn(self.ln1(x - x.mean(0)))", (),
        "batch-mixing", "blocks.0", "Block", "untyped_model.py", None,
    ),
    "padding mask never applied": Planted(
        "encoder", 'weights = weights.masked_fill(rearrange(padding, "b t -> b 1 1 t"), -inf)',
        "keep = ~padding  # computed, never applied", (),
        "mask-ignored", "attn", "MaskedAttention", "untyped_encoder.py", "padding",
    ),
    "padding mask never passed to the encoder": Planted(
        "encoder", ", src_key_padding_mask=padding)", ")", (),
        "mask-ignored", "", "Classifier", "untyped_encoder.py", "padding",
    ),
    "transposed mask buffer": Planted(
        "decoder", "self.bias[:, :, :T, :T] == 0", "self.bias[:, :, :T, :T].mT == 0", (),
        "not-causal", "h.0.attn", "CausalSelfAttention", "untyped_decoder.py", "x",
    ),
    "time split into heads under SDPA's is_causal": Planted(
        "decoder-sdpa",
        "rearrange(t, split, h=self.heads) for t in self.c_attn(x)",
        "t.reshape(len(x), self.heads, T, -1) for t in self.c_attn(x)", (),
        "not-causal", "h.0.attn", "CausalSelfAttention", "untyped_decoder.py", "x",
    ),
}  # fmt: skip
"""Each bug, planted alone, and the one finding it must give."""


@pytest.mark.parametrize("name", list(PLANTED), ids=list(PLANTED))
def test_each_planted_bug_is_found_at_its_module_and_line(name: str, tmp_path: Path) -> None:
    bug = PLANTED[name]
    status, report, _ = _audit(
        tmp_path, bug.run, "--behaviour", *SIZES, *bug.options, plant=(bug.old, bug.new)
    )
    found = [finding for finding in report if finding["kind"] in KINDS]
    path = tmp_path / bug.file
    expected = {
        "kind": bug.kind, "op": bug.cls, "module": bug.module, "module_class": bug.cls,
        "file": str(path), "line": _forward_line(path, bug.cls), "argument": bug.argument,
    }  # fmt: skip
    assert status == 1 and len(found) == 1, found
    assert {key: found[0].get(key) for key in expected} == expected
    assert found[0]["count"] >= 1 and found[0]["shapes"] and found[0]["result"]
    assert found[0]["source"] == path.read_text().splitlines()[expected["line"] - 1].strip()


@pytest.mark.parametrize("run", list(RUNS))
def test_a_clean_program_has_no_finding_and_prints_the_same(
    run: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _audit(tmp_path, run)[:2] == (0, [])
    plain = capsys.readouterr().out
    status, report, verdicts = _audit(tmp_path, run, "--behaviour", *SIZES)
    assert (status, report, capsys.readouterr().out) == (0, [], plain)
    ahead = {verdict["module"] for verdict in verdicts if not verdict["causal"]}
    assert verdicts and ahead == LOOKING_AHEAD.get(run, set())


def test_batch_norm_in_training_is_not_batch_mixing(tmp_path: Path) -> None:
    assert _written(tmp_path, BATCH_NORM_CNN, "--behaviour", "--batch", "7")[:2] == (0, [])


RECURRENT = """import torch

torch.manual_seed(0)
gru = torch.nn.GRU(4, 8)  # sequence first, given batch-first observations
hidden, _ = gru(torch.randn(7, 13, 4))
print(hidden.shape)
"""


def test_a_torch_module_that_mixes_the_batch_is_found_at_the_users_call(tmp_path: Path) -> None:
    status, (finding,), _ = _written(tmp_path, RECURRENT, "--behaviour", *SIZES)
    assert status == 1
    assert (finding["kind"], finding["module"], finding["module_class"]) == (
        "batch-mixing",
        "",
        "GRU",
    )
    assert (finding["library"], finding["user_file"], finding["user_line"]) == (
        "torch",
        str(tmp_path / "train.py"),
        5,
    )


def test_verdicts_name_each_module_and_the_summary_counts_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, _, verdicts = _audit(tmp_path, "decoder", "--behaviour", *SIZES)
    attention = [v for v in verdicts if v["module_class"] == "CausalSelfAttention"]
    assert [v["module"] for v in attention] == [f"h.{i}.attn" for i in range(4)]
    assert all(v["causal"] is True and v["kind"] == "causality" for v in attention)
    assert {"op", "shapes", "result", "file", "line", "source", "count"} <= set(attention[0])
    assert (
        f"audit: {len(verdicts)} causality verdicts, {len(verdicts)} causal"
        in capsys.readouterr().err
    )


STRETCHING_CRITIC = """import torch


class Critic(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.value = torch.nn.Linear(4, 1)

    def forward(self, observations, returns):
        return ((self.value(observations) - returns) ** 2).mean()  # (16, 1) - (16,)


torch.manual_seed(0)
critic = Critic()
for update in range(3):
    critic(torch.randn(16, 4), torch.randn(16)).backward()
"""
"""A stretch inside a checked module's ``forward``, which the behaviour checks run again."""


def test_the_guards_findings_are_counted_once_with_behaviour(tmp_path: Path) -> None:
    status, report, _ = _written(tmp_path, STRETCHING_CRITIC, "--behaviour", "--batch", "16")
    assert status == 1
    assert [(f["kind"], f["count"]) for f in report] == [("broadcast", 3)]


ANNOTATED = """import torch
from {package}.core.attention import SelfAttention

torch.manual_seed(0)
attention = SelfAttention(6, 2, causal=True)
keep = torch.arange(9)[None, :] < torch.tensor([9, 4, 6, 2, 9])[:, None]
print(attention(torch.randn(5, 9, 6), keep[:, None, None, :]).shape)
"""


def test_an_annotated_module_names_its_axes_whatever_the_sizes(tmp_path: Path) -> None:
    """This project's typed attention, at sizes no option gives: its annotation says which
    axis is the batch and which the time, so it is checked and gets a verdict."""
    source = ANNOTATED.format(package=__name__.split(".")[0])
    status, report, verdicts = _written(tmp_path, source, "--behaviour")
    assert (status, report) == (0, [])
    (verdict,) = [v for v in verdicts if v["module_class"] == "SelfAttention"]
    assert verdict["causal"] is True and verdict["module"] == ""


def test_an_ambiguous_size_is_listed_as_not_checked(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "square.py").write_text("import torch\ntorch.nn.Linear(7, 2)(torch.randn(7, 7))\n")
    assert main(["--behaviour", "--batch", "7", str(tmp_path / "square.py")]) == 0
    error = capsys.readouterr().err
    assert "audit: rows not checked in top module (Linear): two axes of size 7 in input" in error


def test_a_causal_class_that_the_program_never_loads_exits_2_once_it_has_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "train.py").write_text("print('ran')\n")
    assert main(["--behaviour", "--causal", "NoSuchBlock", str(tmp_path / "train.py")]) == 2
    captured = capsys.readouterr()
    assert captured.out == "ran\n"
    assert (
        captured.err.splitlines()[-1]
        == "error: --causal: no class named NoSuchBlock in the program"
    )
