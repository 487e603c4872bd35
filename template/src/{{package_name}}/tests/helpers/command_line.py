"""Running an example's command line in a child process, as a user would: the tests of
refusals need the real exit status and the real last line of output."""

import os
import subprocess
import sys
from pathlib import Path

from .paths import PACKAGE, SOURCE_ROOT


def run_example(example: str, args: list[str], cwd: Path) -> tuple[int, list[str]]:
    """Exit status and non-empty output lines (stdout and stderr together) of
    ``python -m <package>.<example> ARGS``, with this source tree importable."""
    path = os.pathsep.join(filter(None, [str(SOURCE_ROOT), os.environ.get("PYTHONPATH")]))
    done = subprocess.run(
        [sys.executable, "-m", f"{PACKAGE}.{example}", *args],
        cwd=cwd,
        env=os.environ | {"PYTHONPATH": path},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=300,
    )
    return done.returncode, [line for line in done.stdout.splitlines() if line.strip()]
