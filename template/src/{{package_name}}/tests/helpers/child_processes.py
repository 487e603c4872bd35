"""Which tests start another process, so that the ``slow`` marker is exactly those tests.

A child process (a command line, DDP's second rank, an async env worker) is a new
interpreter that imports torch and Lightning again, which is most of the full suite's time
and what ``-m "not slow"`` leaves out. ``watch`` counts every start through the doors a
process leaves by: ``subprocess.Popen`` (also behind ``os.popen`` and Lightning's DDP
launcher), ``multiprocessing``'s ``Process.start`` (also behind ``torch.multiprocessing``
and gymnasium's async vector env), and ``os.fork``, ``os.system`` and ``os.posix_spawn``.
The conftest compares each test's count with its marker. Counting costs nothing in a test
that starts no process.
"""

import multiprocessing.process
import os
import subprocess
from collections.abc import Callable
from typing import Any

import pytest

_started = 0


def _counted(original: Callable[..., Any]) -> Callable[..., Any]:
    def start(*args: Any, **kwargs: Any) -> Any:
        global _started
        _started += 1
        return original(*args, **kwargs)

    return start


def watch(patcher: pytest.MonkeyPatch) -> None:
    """Count process starts until ``patcher`` is undone."""
    patcher.setattr(subprocess.Popen, "__init__", _counted(subprocess.Popen.__init__))
    process = multiprocessing.process.BaseProcess
    patcher.setattr(process, "start", _counted(process.start))
    for name in ("fork", "system", "posix_spawn", "posix_spawnp"):
        if hasattr(os, name):  # Windows has neither fork nor posix_spawn
            patcher.setattr(os, name, _counted(getattr(os, name)))


def reset() -> None:
    global _started
    _started = 0


def mismatch(marked_slow: bool) -> str | None:
    """Why the test's ``slow`` marker is wrong for the starts counted since ``reset``."""
    if _started and not marked_slow:
        return f"started {_started} child process(es): mark it @pytest.mark.slow"
    if marked_slow and not _started:
        return "is marked slow but started no child process: slow means one that does"
    return None
