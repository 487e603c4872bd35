"""``python -m <package>.audit [options] SCRIPT [ARGS...]`` or ``... -m MODULE [ARGS...]``:
run a program as Python would (its own ``sys.argv``, ``__name__``, working directory and
import path) under the broadcast guard, and report every finding once it has ended.

Exit status: 1 when there are findings, otherwise the program's own (0 when
``--max-seconds`` stopped it); 2 for a usage error, one ``error: ...`` line before anything
runs. Only the main thread of the main process is audited: DataLoader workers, async
environments and DDP children run unguarded.
"""

import argparse
import contextlib
import importlib.util
import os
import runpy
import signal
import sys
import traceback
from pathlib import Path
from types import FrameType, TracebackType
from typing import NoReturn

import torch
from torch.nn.modules.module import register_module_buffer_registration_hook

from ..core.broadcast import BroadcastError, BroadcastGuard, Stretch, mark_buffer
from .findings import Findings

__all__ = ["main"]


class _Parser(argparse.ArgumentParser):
    """argparse with a usage error as the one line ``error: ...`` and exit status 2: the
    program's own arguments follow, so the audit's full usage text would only confuse."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"error: {message}\n")


class _NoModule(Exception):
    """``-m`` named a module that does not exist: a usage error, as with ``python -m``."""


class _OutOfTime(BaseException):
    """Raised in the program by ``--max-seconds``; a BaseException, so that the program's
    own ``except Exception`` does not swallow it (Lightning tears down and re-raises)."""


def _parser() -> _Parser:
    package = __package__ or "audit"
    parser = _Parser(
        prog=f"python -m {package}",
        usage=f"python -m {package} [options] (SCRIPT | -m MODULE) [ARGS ...]",
        description="Run a Python program under the broadcast guard and report every "
        "elementwise operation that stretched all of its operands.",
        allow_abbrev=False,
    )
    parser.add_argument(
        "--report", type=Path, metavar="FILE.json", help="write the findings as a JSON list"
    )
    parser.add_argument(
        "--max-seconds",
        type=float,
        metavar="S",
        help="stop the program after S seconds and report what was seen",
    )
    parser.add_argument(
        "--stop-on-first",
        action="store_true",
        help="raise at the first finding instead of recording it and going on",
    )
    parser.add_argument(
        "--typecheck",
        action="append",
        default=[],
        metavar="PACKAGE",
        help="also check the annotations of PACKAGE's modules imported from now on "
        "(repeatable); every violation is a finding",
    )
    parser.add_argument(
        "-m",
        dest="module",
        action="store_true",
        help="run the library module MODULE as a script, as python -m does",
    )
    parser.add_argument(
        "program",
        nargs=argparse.PARSER,  # the script or module and everything after it, verbatim
        metavar="SCRIPT | MODULE",
        help="the program and its own arguments, which pass through untouched",
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the audit; returns the exit status (``sys.exit(2)`` on a usage error)."""
    parser = _parser()
    options = parser.parse_args(argv)
    program = options.program[1:] if options.program[0] == "--" else options.program
    if not program:
        parser.error("give a SCRIPT or -m MODULE to run")
    target, args = program[0], program[1:]
    if not options.module and not os.path.exists(target):
        parser.error(f"no such script: {target}")
    if options.report is not None:  # where the audit started, wherever the program goes
        options.report = options.report.absolute()
        if not options.report.parent.is_dir():
            parser.error(f"--report: no folder {options.report.parent}")
    if options.max_seconds is not None and options.max_seconds <= 0:
        parser.error("--max-seconds must be positive")
    if options.max_seconds is not None and not hasattr(signal, "setitimer"):
        parser.error("--max-seconds needs POSIX signals (signal.setitimer)")

    findings = Findings()
    saved_argv, saved_path = sys.argv, sys.path[:]
    script = os.path.abspath(target)
    if options.module:
        sys.path[0] = os.getcwd()  # as python -m does
    else:
        sys.path[0] = script if os.path.isdir(script) else os.path.dirname(script)
    try:
        for package in options.typecheck:
            top = package.partition(".")[0]
            if importlib.util.find_spec(top) is None:
                parser.error(f"--typecheck: no package named {top!r}")
        status, stopped = _run(target, args, options, findings)
    except _NoModule:
        parser.error(f"no module named {target!r}")
    finally:
        sys.argv, sys.path[:] = saved_argv, saved_path
    if options.report is not None:
        findings.write(options.report)
    _summarise(findings, options.report, stopped)
    return 1 if len(findings) else status


def _run(
    target: str, args: list[str], options: argparse.Namespace, findings: Findings
) -> tuple[int, bool]:
    """Run the program to its end (``main`` restores ``sys.argv`` and ``sys.path``); returns
    its exit status and whether time ran out."""

    def on_stretch(stretch: Stretch) -> None:
        findings.add_stretch(stretch)
        if options.stop_on_first:
            raise BroadcastError(stretch.message())

    with contextlib.ExitStack() as undo:
        if options.typecheck:
            import jaxtyping

            from . import annotations

            annotations.recording(findings, options.stop_on_first)
            undo.callback(annotations.recording, None)
            hook = jaxtyping.install_import_hook(options.typecheck, annotations.TYPECHECKER)
            undo.callback(hook.uninstall)
        undo.callback(register_module_buffer_registration_hook(_mark_buffer).remove)
        if options.max_seconds is not None:
            previous = signal.signal(signal.SIGALRM, _stop)
            undo.callback(signal.signal, signal.SIGALRM, previous)
            undo.callback(signal.setitimer, signal.ITIMER_REAL, 0)
            signal.setitimer(signal.ITIMER_REAL, options.max_seconds)
        try:
            with BroadcastGuard(on_stretch=on_stretch):
                if options.module:
                    sys.argv = [target, *args]
                    _find_module(target)
                    runpy.run_module(target, run_name="__main__", alter_sys=True)
                else:
                    sys.argv = [os.path.abspath(target), *args]
                    runpy.run_path(sys.argv[0], run_name="__main__")
        except _NoModule:
            raise
        except SystemExit as exit:
            return _exit_status(exit.code), False
        except _OutOfTime:
            return 0, True
        except BaseException as error:  # the program failed: show it as Python would
            sys.stdout.flush()
            traceback.print_exception(type(error), error, _program_frames(error.__traceback__))
            return 1, False
    return 0, False


def _stop(signum: int, frame: FrameType | None) -> None:
    raise _OutOfTime


def _mark_buffer(module: torch.nn.Module, name: str, buffer: torch.Tensor | None) -> None:
    """Marked as they are registered, a module's buffers include ALiBi's slopes made by
    ``torch.Tensor([...])``, which the guard does not see being made."""
    if buffer is not None:
        mark_buffer(buffer)


def _find_module(name: str) -> None:
    """Raise :class:`_NoModule` unless ``name`` exists; like ``python -m``, this imports
    its parent packages (under the guard and the hooks, as part of the program). A package
    that imports a missing dependency is the program's failure, not a usage error: its
    ``ModuleNotFoundError`` goes on to be shown with its traceback."""
    try:
        found = importlib.util.find_spec(name) is not None
    except ModuleNotFoundError as error:
        missing = error.name or ""
        if not (name == missing or name.startswith(f"{missing}.")):
            raise
        found = False
    if not found:
        raise _NoModule(name)


def _exit_status(code: object) -> int:
    """What Python's own exit does with ``sys.exit(code)``."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1


def _program_frames(tb: TracebackType | None) -> TracebackType | None:
    """The traceback from the program's first frame on, without the audit's and runpy's."""
    here = os.path.dirname(__file__)
    while tb is not None and (
        tb.tb_frame.f_code.co_filename.startswith(here)
        or tb.tb_frame.f_code.co_filename in (runpy.__file__, "<frozen runpy>")
    ):
        tb = tb.tb_next
    return tb


def _summarise(findings: Findings, report: Path | None, stopped: bool) -> None:
    sys.stdout.flush()
    lines = []
    if stopped:
        lines.append("audit: --max-seconds reached; the program was stopped")
    count = len(findings)
    lines.append(f"audit: {count} finding{'s' * (count != 1)}" if count else "audit: no finding")
    lines += [finding.summary() for finding in findings]
    if report is not None:
        lines.append(f"audit: report written to {report}")
    print("\n".join(lines), file=sys.stderr, flush=True)
