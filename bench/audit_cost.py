"""Cost of ``python -m <package>.audit``: the same training program run plain, inside
``with BroadcastGuard():`` (the guard on for the whole run) and under the audit.

The program is a small sequence model trained for a fixed number of Adam steps, one torch
thread: each step builds a causal and a padding mask (two-sided broadcasts on index grids,
so provenance tracking is exercised), runs masked attention, an MLP and an MSE loss. All
three variants run it in this process through ``runpy``, after one warm-up run, so imports
are not timed; each repeat runs every variant, in rotated order so that machine noise falls
on all. The report is the median seconds per run, and the paired ratios (the median over
repeats of each repeat's ratio): the guard to the plain run, the audit to the guard.
Finally full runs are timed end to end in child processes (median of 3, alternating),
interpreter start and imports included: ``python SCRIPT`` and the audited one.

Usage: ``python bench/audit_cost.py PROJECT_DIR PACKAGE [REPEATS]`` (``nox -s bench -- audit``).
"""

import contextlib
import importlib
import io
import runpy
import statistics
import sys
import tempfile
import time
from pathlib import Path

import harness

STEPS = 300
PROGRAM = f"""\
import torch
import torch.nn.functional as F

torch.manual_seed(0)
torch.set_num_threads(1)
B, T, D = 32, 16, 32
embed, attend = torch.nn.Linear(8, D), torch.nn.Linear(D, 3 * D)
head = torch.nn.Sequential(torch.nn.Linear(D, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1))
parameters = [*embed.parameters(), *attend.parameters(), *head.parameters()]
optimizer = torch.optim.Adam(parameters, lr=1e-3)
for step in range({STEPS}):
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


def _timed(run) -> float:
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        start = time.perf_counter()
        run()
        return time.perf_counter() - start


def main() -> None:
    result = harness.Result("audit")
    project, package = Path(sys.argv[1]).resolve(), sys.argv[2]
    repeats = int(sys.argv[3]) if len(sys.argv) > 3 else 7
    sys.path.insert(0, str(project / "src"))  # an installed package works as well
    guard = importlib.import_module(f"{package}.core.broadcast").BroadcastGuard
    audit = importlib.import_module(f"{package}.audit.command").main
    folder = Path(tempfile.mkdtemp())
    script = folder / "train.py"
    script.write_text(PROGRAM)
    report = folder / "report.json"

    def plain() -> None:
        runpy.run_path(str(script), run_name="__main__")

    def guarded() -> None:
        with guard():
            plain()

    def audited() -> None:
        assert audit(["--report", str(report), str(script)]) == 0, report.read_text()

    variants = {"plain": plain, "BroadcastGuard": guarded, "audit": audited}
    for run in variants.values():
        _timed(run)  # warm-up: imports, allocator, first-call caches
    names = list(variants)
    times: dict[str, list[float]] = {}
    for repeat, times in harness.turns(names, repeats, lambda name, _: _timed(variants[name])):
        shown = ", ".join(f"{name} {times[name][-1]:.3f}" for name in names)
        print(f"repeat {repeat}: seconds per run: {shown}", flush=True)

    print(f"\n{STEPS} Adam steps of a masked-attention model, CPU, 1 thread, {repeats} repeats")
    figures = []
    for name in names:
        median = statistics.median(times[name])
        print(f"{name:<16}{median:>8.3f} s per run{median / STEPS * 1e3:>9.2f} ms per step")
        figures.append(harness.figure(name, median / STEPS * 1e3, "ms/step"))
    for top, bottom in (("BroadcastGuard", "plain"), ("audit", "BroadcastGuard")):
        ratio = harness.paired(times[top], times[bottom])
        print(f"paired ratio {top} / {bottom}: {ratio:.3f}")
        figures.append(harness.figure(f"{top} / {bottom}", ratio))

    environment = harness.environment(project)
    commands = {
        "python train.py": [str(script)],
        f"python -m {package}.audit train.py": [
            "-m",
            f"{package}.audit",
            "--report",
            str(report),
            str(script),
        ],
    }
    seconds: dict[str, list[float]] = {label: [] for label in commands}
    for _ in range(3):
        for label, command in commands.items():
            start = time.perf_counter()
            harness.run(command, env=environment, what=label)
            seconds[label].append(time.perf_counter() - start)
    print("full runs in a child process, imports included (median of 3):")
    for label, measured in seconds.items():
        print(f"  {label:<40}{statistics.median(measured):>6.2f} s")
        figures.append(
            harness.figure(f"{label}, imports included", statistics.median(measured), "s")
        )
    result.write(figures, torch_threads=1, details={"runs": times, "commands": seconds})


if __name__ == "__main__":
    main()
