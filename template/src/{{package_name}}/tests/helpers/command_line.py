"""Running an example's command line in a child process, as a user would: the tests of
refusals need the real exit status and the real last line of output, and a long or
compiled fit keeps its cost and its global state (dynamo's caches) out of pytest's process.
Every test that calls these starts a process, so it is marked ``slow``."""

import json
import os
import subprocess
import sys
from pathlib import Path

from .paths import PACKAGE, SOURCE_ROOT


def child_environment(extra: dict[str, str] | None = None) -> dict[str, str]:
    """This process's environment with this source tree importable (ahead of any
    ``PYTHONPATH`` already set), plus ``extra``: what every child Python of the tests gets."""
    path = os.pathsep.join(filter(None, [str(SOURCE_ROOT), os.environ.get("PYTHONPATH")]))
    return {**os.environ, "PYTHONPATH": path, **(extra or {})}


def run_example(
    example: str, args: list[str], cwd: Path, environment: dict[str, str] | None = None
) -> tuple[int, list[str]]:
    """Exit status and non-empty output lines (stdout and stderr together) of
    ``python -m <package>.<example> ARGS``, with this source tree importable and
    ``environment`` added to this process's."""
    done = subprocess.run(
        [sys.executable, "-m", f"{PACKAGE}.{example}", *args],
        cwd=cwd,
        env=child_environment(environment),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=300,
    )
    return done.returncode, [line for line in done.stdout.splitlines() if line.strip()]


NOTICES = ("tensorboardX", "LeafSpec", "litlogger")
"""Words of the third-party notices that the command lines hide (``cli.quiet_third_parties``)."""


def fit_summary(example: str, config: Path, args: list[str], root: Path) -> dict:
    """``summary.json`` of ``python -m <package>.<example> fit --config CONFIG ARGS`` with its
    output under ``root``; a run that exits non-zero, or prints one of the ``NOTICES``,
    fails with its last lines.

    The run has one intra-op thread (what PPO sets, and DDP gives each process): on a
    machine whose cores are busy, two threads that wait on each other make a small
    network's fit several times slower."""
    command = ["fit", "--config", str(config), f"--trainer.default_root_dir={root}", *args]
    returncode, lines = run_example(example, command, root, {"OMP_NUM_THREADS": "1"})
    assert returncode == 0, "\n".join(lines[-30:])
    noise = [line for line in lines if any(word in line for word in NOTICES)]
    assert not noise, "\n".join(noise)
    (path,) = root.rglob("summary.json")
    return json.loads(path.read_text())
