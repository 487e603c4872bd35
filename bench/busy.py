"""Each example's default config idle, beside busy processes, and idle with one thread forced.

A user's machine is never idle. For each example (``python -m PACKAGE.EXAMPLE fit --config
configs/EXAMPLE.yaml``, a fresh root under a temporary folder, no progress bar) the
conditions take turns in every repeat:
- ``idle``: the example alone, ``OMP_NUM_THREADS`` and ``OMP_WAIT_POLICY`` removed from its
  environment, so that it runs with the threads it chooses itself;
- ``loaded``: the same, beside ``--busy N`` busy processes, Python loops that spin until a
  deadline (``--busy-seconds``), started before the run and killed after it, whatever
  happens;
- ``forced``: idle with ``OMP_NUM_THREADS=1``;
- ``idle_all`` and ``loaded_all``: idle and loaded with ``--model.torch_threads`` set to
  every core this process may use, torch's own default, against which the default was chosen;
  in the first ``--every-core-repeats`` repeats only, as a loaded one can take minutes.
Each run's time is its ``summary.json``'s ``train_seconds``. Printed per example: the
median of each condition, the median over repeats of each repeat's loaded/idle ratio
(target at most 1.5 beside one busy process on 2 cores) and of its idle/forced ratio
(target at most 1.15: the example's own threads are not slower than one).

Usage: ``python bench/busy.py PROJECT_DIR PACKAGE [--busy N] [--repeats R]
[--examples regression sequence ppo] [--epochs E] [--env-steps S]`` (``nox -s bench --
busy``); ``--epochs`` and ``--env-steps`` shorten the shipped configs for a trial run.
"""

import argparse
import contextlib
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import harness

EXAMPLES = ("regression", "sequence", "ppo")
CONDITIONS = ("idle", "loaded", "forced", "idle_all", "loaded_all")
CORES = harness.cores()
LOADED_TARGET, FORCED_TARGET = 1.5, 1.15
SPIN = """\
import sys, time
end = time.monotonic() + float(sys.argv[1])
while time.monotonic() < end:
    pass
"""
"""A busy process: one core's worth of pure Python work, which stops by itself at a deadline
should the bench be killed before it can stop it."""


@contextlib.contextmanager
def busy(count: int, seconds: float) -> Iterator[None]:
    """``count`` busy processes for the body of the ``with``; killed when it ends. A process
    that reached its deadline before then fails the bench: that run was not loaded."""
    spinning = []
    try:
        for _ in range(count):
            spinning.append(subprocess.Popen([sys.executable, "-c", SPIN, str(seconds)]))
        yield
        if any(process.poll() is not None for process in spinning):
            raise SystemExit("a busy process stopped before the run did: raise --busy-seconds")
    finally:
        for process in spinning:
            process.kill()
            process.wait()


def measure(
    project: Path,
    package: str,
    example: str,
    condition: str,
    root: Path,
    arguments: argparse.Namespace,
) -> dict:
    """One run of ``example`` under ``condition``: its training seconds, and its threads as
    its ``summary.json`` records them (None where it does not)."""
    env = harness.environment(
        project,
        OMP_WAIT_POLICY=None,
        OMP_NUM_THREADS="1" if condition == "forced" else None,
    )
    loaded = arguments.busy if condition.startswith("loaded") else 0
    options = shortened(example, arguments)
    if condition.endswith("_all"):
        options.append(f"--model.torch_threads={CORES}")
    with busy(loaded, arguments.busy_seconds):
        summary = harness.fit(project, package, example, root, *options, env=env)
    return {"seconds": summary["train_seconds"], "threads": summary.get("torch_threads")}


def shortened(example: str, arguments: argparse.Namespace) -> list[str]:
    options = ["--trainer.enable_progress_bar=false"]
    if example == "ppo" and arguments.env_steps:
        options.append(f"--model.total_env_steps={arguments.env_steps}")
    elif example != "ppo" and arguments.epochs:
        options.append(f"--trainer.max_epochs={arguments.epochs}")
    return options


def default_threads(project: Path) -> int:
    """The intra-op threads torch takes in a child with no ``OMP_NUM_THREADS``: what an
    example that chooses none runs with idle and loaded."""
    env = harness.environment(project, OMP_NUM_THREADS=None, OMP_WAIT_POLICY=None)
    return harness.worker(["-c", "import torch; print(torch.get_num_threads())"], env=env)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("project", type=Path)
    parser.add_argument("package")
    parser.add_argument("--busy", type=int, default=1, help="busy processes (default 1)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument(
        "--every-core-repeats",
        type=int,
        default=2,
        help="repeats of the every-core conditions, the first ones (default 2: they are slow)",
    )
    parser.add_argument(
        "--conditions", nargs="+", choices=CONDITIONS, default=CONDITIONS, help="default: all"
    )
    parser.add_argument("--examples", nargs="+", choices=EXAMPLES, help="default: all rendered")
    parser.add_argument("--epochs", type=int, help="regression and sequence: max_epochs")
    parser.add_argument("--env-steps", type=int, help="ppo: total_env_steps")
    parser.add_argument(
        "--busy-seconds",
        type=float,
        default=600.0,
        help="a busy process's deadline, the longest a run may take",
    )
    arguments = parser.parse_args()
    if arguments.busy < 1 or arguments.repeats < 1:
        parser.error("--busy and --repeats take a count of at least 1")
    result = harness.Result("busy")
    project = arguments.project.resolve()
    examples = arguments.examples or [
        name for name in EXAMPLES if (project / "configs" / f"{name}.yaml").exists()
    ]
    conditions = [c for c in CONDITIONS if c in arguments.conditions]
    runs: dict[str, dict[str, list[dict]]] = {
        example: {condition: [] for condition in conditions} for example in examples
    }
    with tempfile.TemporaryDirectory(prefix="busy-") as scratch:
        for repeat in range(arguments.repeats):
            for example in examples:
                for condition in harness.rotated(conditions, repeat):
                    if condition.endswith("_all") and repeat >= arguments.every_core_repeats:
                        continue
                    root = Path(scratch) / f"{example}-{repeat}-{condition}"
                    run = measure(
                        project,
                        arguments.package,
                        example,
                        condition,
                        root,
                        arguments,
                    )
                    runs[example][condition].append(run)
                shown = ", ".join(
                    f"{condition} {runs[example][condition][-1]['seconds']:.2f} s"
                    for condition in conditions
                    if len(runs[example][condition]) > repeat
                )
                print(f"  {example} repeat {repeat}: {shown}", flush=True)
    figures = []
    beside = f"beside {arguments.busy} busy process{'es' if arguments.busy > 1 else ''}"
    every = f"--model.torch_threads={CORES} (every core)"
    label = {
        "idle": "idle",
        "loaded": beside,
        "forced": "OMP_NUM_THREADS=1",
        "idle_all": f"idle, {every}",
        "loaded_all": f"{beside}, {every}",
    }
    # The loaded target is stated for one busy process (on 2 cores); others are shown bare.
    ratios = [
        ("loaded", "idle", LOADED_TARGET if arguments.busy == 1 else None),
        ("idle", "forced", FORCED_TARGET),
        ("idle_all", "idle", None),
        ("loaded_all", "idle_all", None),
        ("loaded_all", "loaded", None),
    ]
    for example, measured in runs.items():
        seconds = {c: [run["seconds"] for run in measured[c]] for c in conditions}
        shown = []
        for condition in conditions:
            median = statistics.median(seconds[condition])
            figures.append(harness.figure(f"{example}: {label[condition]}", median, "s"))
            shown.append(f"{label[condition]} {median:.2f} s")
        for top, bottom, target in ratios:
            if top in seconds and bottom in seconds:
                pairs = min(len(seconds[top]), len(seconds[bottom]))  # every core: fewer
                ratio = harness.paired(seconds[top][:pairs], seconds[bottom][:pairs])
                name = f"{label[top]} / {label[bottom]}"
                figures.append(harness.figure(f"{example}: {name}", ratio, at_most=target))
                verdict = "" if target is None else "met" if ratio <= target else "MISSED"
                shown.append(f"{name} {ratio:.2f}" + (f" ({verdict}: <= {target})" * bool(verdict)))
        print(f"{example}: median train_seconds; median of paired ratios:", flush=True)
        print("\n".join(f"  {line}" for line in shown), flush=True)
    # Where a summary does not record its threads, say what they could have been.
    unrecorded = {
        "idle": f"not recorded (torch's default: {default_threads(project)})",
        "loaded": "as idle",
        "forced": "not recorded (OMP_NUM_THREADS=1)",
        "idle_all": f"not recorded ({CORES} asked for)",
        "loaded_all": f"not recorded ({CORES} asked for)",
    }
    threads = {}
    for condition in conditions:
        recorded = {run["threads"] for measured in runs.values() for run in measured[condition]}
        threads[condition] = sorted(recorded - {None}) or unrecorded[condition]
    result.write(figures, torch_threads=threads, details=runs)


if __name__ == "__main__":
    main()
