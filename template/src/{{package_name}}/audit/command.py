"""``python -m <package>.audit [options] (SCRIPT | -m MODULE) [ARGS...]``: run a program as
Python would, under the audit's checks, and report every finding when it ends (docs/audit.md)."""

import argparse
import contextlib
import importlib.util
import os
import runpy
import signal
import sys
import traceback
from collections.abc import Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from types import FrameType
from typing import NoReturn

import torch
from torch.nn.modules.module import register_module_buffer_registration_hook

from ..core.broadcast import BroadcastError, BroadcastGuard, Stretch, mark_buffer
from .behaviour import Behaviour
from .findings import Findings
from .nonfinite import NonFiniteCheck, NonFiniteFound


class _Parser(argparse.ArgumentParser):
    """A usage error is one line ``error: ...``, exit status 2: the full usage would confuse."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"error: {message}\n")


class _OutOfTime(BaseException):
    """``--max-seconds``: the program's ``except Exception`` cannot swallow it."""


def main(argv: list[str] | None = None) -> int:
    """Run the audit; returns the exit status (``sys.exit(2)`` on a usage error)."""
    prog, about = f"python -m {__package__}", "Run a Python program and report what it got wrong."
    usage = f"{prog} [options] (SCRIPT | -m MODULE) [ARGS ...]"
    parser = _Parser(prog=prog, usage=usage, description=about, allow_abbrev=False)
    add = parser.add_argument
    add("--report", type=Path, metavar="FILE.json", help="write the findings as a JSON list")
    add("--max-seconds", type=float, metavar="S", help="stop the program after S seconds")
    add("--stop-on-first", action="store_true", help="raise at the first finding")
    typecheck = "also check the annotations of PACKAGE (repeatable); each violation is a finding"
    add("--typecheck", action="append", default=[], metavar="PACKAGE", help=typecheck)
    add("--nonfinite", action="store_true", help="stop at the first NaN or infinity, report it")
    add("-m", dest="module", action="store_true", help="run MODULE as python -m does")
    add("--behaviour", action="store_true", help="also check rows, causality and masks")
    add("--batch", type=int, metavar="B", help="the run's batch size (--behaviour)")
    add("--time", type=int, metavar="T", help="the run's sequence length (--behaviour)")
    add("--causal", action="append", default=[], metavar="CLASS", help="CLASS must be causal")
    add("--verdicts", type=Path, metavar="FILE.json", help="write the causality verdicts")
    # The script or module and everything after it, verbatim: the program's own arguments.
    add("program", nargs=argparse.PARSER, metavar="SCRIPT | MODULE")
    options = parser.parse_args(argv)
    program = options.program[1:] if options.program[0] == "--" else options.program
    if not program:
        parser.error("give a SCRIPT or -m MODULE to run")
    target = program[0]
    if not options.module and not os.path.exists(target):
        parser.error(f"no such script: {target}")
    for flag in ("report", "verdicts"):  # where the audit started, wherever the program goes
        if (path := vars(options)[flag]) is not None:
            vars(options)[flag] = path = path.absolute()
            if not path.parent.is_dir():
                parser.error(f"--{flag}: no folder {path.parent}")
    given = [f"--{o}" for o in ("batch", "time", "causal", "verdicts") if vars(options)[o]]
    if given and not options.behaviour:
        parser.error(f"{', '.join(given)} without --behaviour")
    for flag in ("batch", "time", "max_seconds"):
        if (value := vars(options)[flag]) is not None and value <= 0:
            parser.error(f"--{flag.replace('_', '-')} must be positive")
    if options.batch is not None and options.batch == options.time:
        parser.error("--batch and --time must differ, so that each names one axis")
    if options.max_seconds is not None and not hasattr(signal, "setitimer"):
        parser.error("--max-seconds needs POSIX signals (signal.setitimer)")

    findings, stopped, status = Findings(), False, 0
    behaviour = Behaviour(findings, options.batch, options.time, options.causal)

    def on_stretch(stretch: Stretch) -> None:
        if not behaviour.evaluating:  # a check's own stretch is no finding
            findings.add_stretch(stretch)
            if options.stop_on_first:
                raise BroadcastError(stretch.message())

    with as_python_would(program, options.module):
        for package in options.typecheck:
            if importlib.util.find_spec(top := package.partition(".")[0]) is None:
                parser.error(f"--typecheck: no package named {top!r}")
        with contextlib.ExitStack() as undo:
            if options.typecheck:
                import jaxtyping

                from . import annotations

                annotations.RECORDING.append((findings, options.stop_on_first))
                undo.callback(annotations.RECORDING.clear)
                hook = jaxtyping.install_import_hook(options.typecheck, annotations.TYPECHECKER)
                undo.callback(hook.uninstall)
            undo.callback(register_module_buffer_registration_hook(_mark_buffer).remove)
            hooks = behaviour.hooks() if options.behaviour else []
            if options.max_seconds is not None:
                undo.callback(signal.signal, signal.SIGALRM, signal.signal(signal.SIGALRM, _stop))
                undo.callback(signal.setitimer, signal.ITIMER_REAL, 0)
                signal.setitimer(signal.ITIMER_REAL, options.max_seconds)
            if options.nonfinite:  # beneath the guard: its checks are not guarded
                check = NonFiniteCheck(findings, options.report or Path("audit.json").absolute())
                hooks += [*check.modules.hooks(), check]
            for hook in hooks:
                undo.enter_context(hook)
            try:
                status = run_program(program, options.module, BroadcastGuard(on_stretch=on_stretch))
            except (_OutOfTime, NonFiniteFound) as stop:  # a finding, for NonFiniteFound
                stopped = isinstance(stop, _OutOfTime)
        if status is None:
            parser.error(f"no module named {target!r}")

    if options.report is not None:
        findings.write(options.report)
    if options.verdicts is not None:
        behaviour.verdicts.write(options.verdicts)
    sys.stdout.flush()
    lines = ["audit: --max-seconds reached; the program was stopped"] if stopped else []
    count = len(findings)
    lines.append(f"audit: {count} finding{'s' * (count != 1)}" if count else "audit: no finding")
    lines += [finding.summary() for finding in findings.values()]
    lines += behaviour.summary() if options.behaviour else []
    if options.report is not None:
        lines.append(f"audit: report written to {options.report}")
    known, loaded = set(), [torch.nn.Module] * bool(options.causal)  # the classes it loaded
    while loaded := [sub for cls in loaded for sub in cls.__subclasses__()]:
        known |= {name for cls in loaded for name in (cls.__name__, cls.__qualname__)}
    if unknown := sorted(set(options.causal) - known):
        lines.append(f"error: --causal: no class named {', '.join(unknown)} in the program")
    print("\n".join(lines), file=sys.stderr, flush=True)
    return 1 if count else 2 if unknown else status


@contextlib.contextmanager
def as_python_would(program: list[str], module: bool) -> Iterator[None]:
    """``sys.argv`` and ``sys.path[0]`` as ``python SCRIPT`` or ``python -m MODULE`` sets them."""
    script = os.path.abspath(program[0])
    saved_argv, saved_path = sys.argv, sys.path[:]
    sys.argv = [program[0] if module else script, *program[1:]]
    folder = script if os.path.isdir(script) else os.path.dirname(script)
    sys.path[0] = os.getcwd() if module else folder  # as python -m does
    try:
        yield
    finally:
        sys.argv, sys.path[:] = saved_argv, saved_path


def run_program(program: list[str], module: bool, around: AbstractContextManager) -> int | None:
    """Runs ``program`` inside ``around``: its exit status as Python gives it; None if no module."""
    try:
        with around:
            if not module:
                runpy.run_path(os.path.abspath(program[0]), run_name="__main__")
            elif _module_exists(program[0]):  # imports its parents, as python -m does
                runpy.run_module(program[0], run_name="__main__", alter_sys=True)
            else:
                return None
    except SystemExit as exit:  # what Python's own exit makes of sys.exit(code)
        code = 0 if exit.code is None else exit.code
        if not isinstance(code, int):
            print(code, file=sys.stderr)
        return code if isinstance(code, int) else 1
    except (_OutOfTime, NonFiniteFound):
        raise
    except BaseException as error:  # the program failed: show it as Python would
        sys.stdout.flush()
        machinery = (os.path.dirname(__file__), runpy.__file__, "<frozen runpy>")
        tb = error.__traceback__
        while tb is not None and tb.tb_frame.f_code.co_filename.startswith(machinery):
            tb = tb.tb_next  # from the program's first frame on
        traceback.print_exception(type(error), error, tb)
        return 1
    return 0


def _stop(signum: int, frame: FrameType | None) -> None:
    raise _OutOfTime


def _mark_buffer(module: torch.nn.Module, name: str, buffer: torch.Tensor | None) -> None:
    """Marked as registered: ALiBi's slopes from ``torch.Tensor([...])`` are not seen made."""
    if buffer is not None:
        mark_buffer(buffer)


def _module_exists(name: str) -> bool:
    """A package that imports a missing dependency is the program's failure: it raises."""
    try:
        return importlib.util.find_spec(name) is not None
    except ModuleNotFoundError as error:  # the target's own package
        if name == error.name or name.startswith(f"{error.name}."):
            return False
        raise
