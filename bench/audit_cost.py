"""The audit's costs: each program run plain, inside ``with BroadcastGuard():``, under
``python -m <package>.audit`` (``audit``), and under the audit with ``--behaviour`` and with
``--nonfinite``.

Every variant runs the program in this process as the audit runs it (its ``sys.argv`` and
import path, through the audit's own ``run_program``), after one warm-up run of each, so
imports are not timed; each repeat runs every variant, in rotated order so that machine
noise falls on all. Times are CPU seconds of this process, one torch thread, which a busy
machine disturbs less than wall time. The report is each variant's median and the paired
ratios (the median over repeats of each repeat's ratio): ``--behaviour`` and ``--nonfinite``
against the plain run (targets: at most 3 and 2) and against the audit without the flag;
on the masked-attention program, the guard against the plain run and the audit against
the guard. An audited run that finds
anything ends the bench: the programs are clean.

The programs: the project's own audit test models (``tests/audit``): the untyped GPT and
agent, the single-file PPO, and the nanoGPT-style decoder, causal by its mask buffer and by
``scaled_dot_product_attention(..., is_causal=True)``; and a masked-attention model trained
300 Adam steps. ``--behaviour`` runs where a program's batch and sequence have sizes that
no other axis has, given to it as ``--batch`` and ``--time``.

Usage: ``python bench/audit_cost.py PROJECT_DIR PACKAGE [REPEATS]`` (``nox -s bench -- audit``).
"""

import contextlib
import importlib
import io
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import NamedTuple

import harness
import torch

MASKED_ATTENTION = """\
import torch
import torch.nn.functional as F

torch.manual_seed(0)
B, T, D = 32, 16, 32
embed, attend = torch.nn.Linear(8, D), torch.nn.Linear(D, 3 * D)
head = torch.nn.Sequential(torch.nn.Linear(D, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1))
parameters = [*embed.parameters(), *attend.parameters(), *head.parameters()]
optimizer = torch.optim.Adam(parameters, lr=1e-3)
for step in range(300):
    x, y = torch.randn(B, T, 8), torch.randn(B)
    lengths = torch.randint(1, T + 1, (B,))
    padding = torch.arange(T)[None, :] < lengths[:, None]
    causal = torch.arange(T)[:, None] >= torch.arange(T)[None, :]
    mask = causal & padding[:, None, :]
    q, k, v = attend(embed(x)).chunk(3, dim=-1)
    scores = (q @ k.transpose(1, 2) / D**0.5).masked_fill(~mask, float("-inf"))
    hidden = scores.softmax(-1).nan_to_num() @ v
    pooled = (hidden * padding[..., None]).sum(1) / lengths[:, None]
    loss = F.mse_loss(head(pooled).squeeze(-1), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
"""
"""Each step builds a causal and a padding mask (two-sided broadcasts on index grids, which
the guard tracks), runs masked attention, an MLP and an MSE loss."""


class Program(NamedTuple):
    script: str
    args: list[str]
    sizes: list[str]
    """``--batch B --time T`` for ``--behaviour``: sizes that no other axis of the run has;
    empty where the program has none, and ``--behaviour`` is not run."""
    guard: bool = False
    """Whether to run it inside the guard alone too (the audit costs what the guard costs)."""


SIZES = ["--batch", "7", "--time", "13"]
DECODER_SIZES = ["--batch", "12", "--time", "40"]
"""Outside 1 to 11, the lengths the decoder samples at, and apart from its width 64, its
heads' 16, its vocabulary's 50 and its 64 positions."""
DECODER = [*DECODER_SIZES, "--width", "64", "--steps", "20"]
PROGRAMS = {
    "untyped GPT and agent, 2 steps": Program("untyped_driver.py", [*SIZES, "--envs", "7"], SIZES),
    "single-file PPO, 2 iterations": Program("ppo.py", ["--iterations", "2"], []),
    "masked attention, 300 Adam steps": Program("masked_attention.py", [], [], guard=True),
    "decoder with a mask buffer, 20 AdamW steps": Program(
        "untyped_decoder.py", DECODER, DECODER_SIZES
    ),
    "decoder with SDPA, 20 AdamW steps": Program(
        "untyped_decoder.py", [*DECODER, "--sdpa"], DECODER_SIZES
    ),
}
FILES = ["untyped_driver.py", "untyped_model.py", "untyped_rl.py", "untyped_decoder.py"]
"""The project's test models the programs run (``tests/audit``)."""


def timed(run: Callable[[], int | None], what: str) -> float:
    """CPU seconds of ``run``, its output kept from the screen; a run that fails, or an
    audit that finds something, ends the bench with the run's last lines."""
    shown = io.StringIO()
    with contextlib.redirect_stdout(shown), contextlib.redirect_stderr(shown):
        start = time.process_time()
        status = run()
        seconds = time.process_time() - start
    if status != 0:
        raise SystemExit(f"{what} exited {status}:\n{shown.getvalue()[-3000:]}")
    return seconds


def costs(label: str, variants: dict[str, Callable[[], int | None]], repeats: int) -> tuple:
    """Each variant's CPU seconds over ``repeats`` after a warm-up run, and their figures."""
    names = list(variants)
    for name in names:  # warm-up: imports, allocator, first-call caches
        timed(variants[name], f"{label}: {name}")

    def measure(name: str, repeat: int) -> float:
        return timed(variants[name], f"{label}: {name}")

    times: dict[str, list[float]] = {}
    for repeat, times in harness.turns(names, repeats, measure):
        shown = ", ".join(f"{name} {times[name][-1]:.3f}" for name in names)
        print(f"{label}, repeat {repeat}: CPU seconds {shown}", flush=True)
    figures = [harness.figure(f"{label}: {n}", statistics.median(times[n]), "s") for n in names]
    pairs: list[tuple[str, str, float | None]] = []
    if "BroadcastGuard" in times:
        pairs += [("BroadcastGuard", "plain", None), ("audit", "BroadcastGuard", None)]
    for flag, target in (("audit --behaviour", 3), ("audit --nonfinite", 2)):
        if flag in times:
            pairs += [(flag, "plain", target), (flag, "audit", None)]
    for top, bottom, target in pairs:
        ratio = harness.paired(times[top], times[bottom])
        figures.append(harness.figure(f"{label}: {top} / {bottom}", ratio, at_most=target))
        print(f"  {top} / {bottom}: {ratio:.2f}", flush=True)
    return figures, times


def main() -> None:
    result = harness.Result("audit")
    project, package = Path(sys.argv[1]).resolve(), sys.argv[2]
    repeats = int(sys.argv[3]) if len(sys.argv) > 3 else 7
    torch.set_num_threads(1)
    sys.path.insert(0, str(project / "src"))  # an installed package works as well
    command = importlib.import_module(f"{package}.audit.command")
    guard = importlib.import_module(f"{package}.core.broadcast").BroadcastGuard
    scripts = importlib.import_module(f"{package}.tests.audit.scripts")
    folder = Path(tempfile.mkdtemp())
    for name in FILES:
        shutil.copy(project / "src" / package / "tests" / "audit" / name, folder / name)
    (folder / "ppo.py").write_text(scripts.PPO_SCRIPT)
    (folder / "masked_attention.py").write_text(MASKED_ATTENTION)
    report = ["--report", str(folder / "report.json")]

    def python(program: list[str], around: contextlib.AbstractContextManager) -> int | None:
        with command.as_python_would(program, False):
            return command.run_program(program, False, around)

    figures, details = [], {}
    for label, (script, args, sizes, guarded) in PROGRAMS.items():
        program = [str(folder / script), *args]
        variants = {
            "plain": partial(python, program, contextlib.nullcontext()),
            "BroadcastGuard": lambda program=program: python(program, guard()),
            "audit": partial(command.main, [*report, *program]),
            "audit --behaviour": partial(command.main, ["--behaviour", *sizes, *report, *program]),
            "audit --nonfinite": partial(command.main, ["--nonfinite", *report, *program]),
        }
        if not guarded:
            del variants["BroadcastGuard"]
        if not sizes:
            del variants["audit --behaviour"]
        measured, times = costs(label, variants, repeats)
        figures += measured
        details[label] = {"program": [script, *args], "cpu_seconds": times}
    print(f"CPU seconds of this process, 1 torch thread, median of {repeats} repeats")
    result.write(figures, torch_threads=1, details=details)


if __name__ == "__main__":
    main()
