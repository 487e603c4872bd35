"""``python -m <package>.sweep regression --trials 20 [-- FIT ARGUMENTS]`` (docs/sweeps.md).
Before any trial runs, the example's parser reads the fit arguments with every bound and
choice of the space: a mistyped option path or value stops the sweep at once, in one line.
"""

import argparse
import io
import multiprocessing
import sys
from contextlib import redirect_stderr, redirect_stdout
from importlib import import_module
from importlib.util import find_spec
from pathlib import Path
from typing import NoReturn

import optuna
import yaml

from ..run.errors import UserError, user_errors
from . import report, space, storage, trial
from .worker import open_study, work

PACKAGE = str(__package__).rpartition(".")[0]
EXAMPLES = [name for name in ("regression", "ppo", "sequence") if find_spec(f"{PACKAGE}.{name}")]


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(2, f"error: {message}\n")


def parse(argv: list[str]) -> argparse.Namespace:
    """The sweep's own options, and the fit arguments after ``--`` as ``fit_args``."""
    split = argv.index("--") if "--" in argv else len(argv)
    parser = _Parser(
        prog=f"python -m {PACKAGE}.sweep",
        description="Run or continue an Optuna study of an example's hyperparameters.",
    )
    parser.add_argument("example", choices=EXAMPLES)
    parser.add_argument("--space", type=Path, help="the search space (YAML)")
    parser.add_argument("--trials", type=int, required=True, help="finished trials to reach")
    parser.add_argument("--workers", type=int, default=1, help="worker processes")
    parser.add_argument("--storage", help="an RDB URL or journal:PATH")
    parser.add_argument("--study", help="the study's name (default: the example)")
    parser.add_argument("--config", type=Path, help="the example's config")
    parser.add_argument("--root", type=Path, default=Path("runs/sweep"), help="studies' folder")
    parser.add_argument("--seed", type=int, default=0, help="the samplers' seed")
    options = parser.parse_args(argv[:split])
    if options.trials < 1 or options.workers < 1:
        parser.error("--trials and --workers must be at least 1")
    options.fit_args = argv[split + 1 :]
    return options


def main(argv: list[str] | None = None) -> optuna.Study:
    """Run or continue the sweep that ``argv`` (default: the command line) describes."""
    with user_errors():
        options = parse(sys.argv[1:] if argv is None else argv)
        search = space.load(options.space or Path("configs/sweep") / f"{options.example}.yaml")
        config = options.config or Path("configs") / f"{options.example}.yaml"
        if not config.is_file():
            raise UserError(f"--config {config}: no such file; run from the project's root")
        swept = {f"--{key}" for key in search.distributions}
        clash = [arg for arg in options.fit_args if arg.split("=")[0] in swept]
        if clash:
            raise UserError(f"{clash[0]} after --: the space {search.path} samples that option")
        options.study = options.study or options.example
        options.folder = options.root / options.study
        options.storage = options.storage or f"journal:{options.folder / 'study.journal'}"
        options.fit_args = ["--config", str(config), *options.fit_args]
        fit = import_module(f"{PACKAGE}.{options.example}.__main__").main
        for row in search.edge_rows():
            _print_config(fit, [*options.fit_args, *space.overrides(row)], search)
        # best.yaml is the difference from the config on its own.
        base = yaml.safe_load(_print_config(fit, ["--config", str(config)], search))
        study = open_study(options, search)
        storage.fail_dead_trials(study)
        if storage.finished(study) >= options.trials:
            print(f"study {options.study} has {storage.finished(study)} finished trials already")
        else:
            _start_workers(options, search, fit)
        return report.finish(study, search, base, options.folder)


def _print_config(fit: trial.Main, args: list[str], search: space.SearchSpace) -> str:
    """The config the example's parser makes of ``args`` (``--print_config`` stops before
    anything is built); its refusal, as the space's."""
    printed, errors = io.StringIO(), io.StringIO()
    try:
        with redirect_stdout(printed), redirect_stderr(errors):
            fit(["fit", *args, "--print_config"])
    except SystemExit as stop:
        if stop.code:
            last = (errors.getvalue().strip().splitlines() or ["refused"])[-1]
            raise UserError(
                f"--space {search.path} with the fit arguments: {last.removeprefix('error: ')}"
            ) from None
    return printed.getvalue()


def _start_workers(options: argparse.Namespace, search: space.SearchSpace, fit: trial.Main) -> None:
    """Run :func:`work` here and in ``--workers`` - 1 processes beside this one. On Linux they
    are forked before this process trains anything, with torch and Lightning imported;
    elsewhere (macOS, Windows) forking a process that imported torch is unsafe."""
    if sys.platform.startswith("linux"):
        context = multiprocessing.get_context("fork")
    else:
        context = multiprocessing.get_context("spawn")
    others = [
        context.Process(target=work, args=(options, search, fit, index))
        for index in range(1, options.workers)
    ]
    sys.stdout.flush()  # or each forked worker prints it again
    for process in others:
        process.start()
    try:
        work(options, search, fit, 0)
    finally:
        for process in others:
            process.join()
    for index, process in enumerate(others, start=1):
        if process.exitcode:
            status = process.exitcode
            raise UserError(f"worker {index} stopped with status {status}: its own error is above")


if __name__ == "__main__":
    main()
