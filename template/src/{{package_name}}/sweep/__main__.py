"""Command line: ``python -m <package>.sweep regression --trials 20 [-- FIT ARGUMENTS]``
(docs/sweeps.md). Before any trial runs, the example's parser reads the fit arguments with
every bound and every choice of the space, so a mistyped option path or a value of the
wrong type stops the sweep at once, as a one-line ``error:``.
"""

import argparse
import io
import multiprocessing
import sys
from collections import Counter
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path
from typing import Any, NoReturn

import optuna
import yaml
from optuna.trial import TrialState

from ..run.errors import UserError, user_errors
from . import report, space, storage, trial
from .worker import EXAMPLES, PACKAGE, Settings, example_main, work


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(2, f"error: {message}\n")


def parse(argv: list[str]) -> tuple[argparse.Namespace, list[str]]:
    """The sweep's own options, and the fit arguments after ``--``."""
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
    return options, argv[split + 1 :]


def main(argv: list[str] | None = None) -> optuna.Study:
    """Run or continue the sweep that ``argv`` (default: the command line) describes."""
    with user_errors():
        options, passed_on = parse(sys.argv[1:] if argv is None else argv)
        example = options.example
        search = space.load(options.space or Path("configs/sweep") / f"{example}.yaml")
        config = options.config or Path("configs") / f"{example}.yaml"
        if not config.is_file():
            raise UserError(f"--config {config}: no such file; run from the project's root")
        swept = {f"--{parameter.key}" for parameter in search.parameters}
        clash = [arg for arg in passed_on if arg.split("=")[0] in swept]
        if clash:
            raise UserError(f"{clash[0]} after --: the space {search.path} samples that option")
        study_name = options.study or example
        folder = options.root / study_name
        settings = Settings(
            example=example,
            space_path=search.path,
            fit_args=("--config", str(config), *passed_on),
            study=study_name,
            storage=options.storage or f"journal:{folder / 'study.journal'}",
            trials=options.trials,
            seed=options.seed,
            folder=folder,
        )
        fit_main = example_main(example)
        for row in search.edge_rows():
            _print_config(fit_main, [*settings.fit_args, *search.overrides(row)], search)
        # best.yaml is the difference from the config on its own.
        base = yaml.safe_load(_print_config(fit_main, ["--config", str(config)], search))
        study = _open_study(settings, search)
        storage.fail_dead_trials(study)
        if storage.finished(study) >= settings.trials:
            print(f"study {study_name} has {storage.finished(study)} finished trials already")
        else:
            _start_workers(settings, options.workers)
        return _finish(study, search, base, folder)


def _print_config(fit_main: trial.Main, args: list[str], search: space.SearchSpace) -> str:
    """The config the example's parser makes of ``args`` (``--print_config`` stops before
    anything is built); its refusal, as the space's."""
    printed, errors = io.StringIO(), io.StringIO()
    try:
        with redirect_stdout(printed), redirect_stderr(errors):
            fit_main(["fit", *args, "--print_config"])
    except SystemExit as stop:
        if stop.code:
            last = (errors.getvalue().strip().splitlines() or ["refused"])[-1]
            raise UserError(
                f"--space {search.path} with the fit arguments: {last.removeprefix('error: ')}"
            ) from None
    return printed.getvalue()


def _open_study(settings: Settings, search: space.SearchSpace) -> optuna.Study:
    study = optuna.create_study(
        study_name=settings.study,
        storage=storage.open_storage(settings.storage),
        direction=search.direction,
        load_if_exists=True,
    )
    if study.direction.name.lower() != search.direction:
        raise UserError(
            f"--space {search.path}: direction {search.direction}, but study "
            f"{settings.study} in {settings.storage} was made to {study.direction.name.lower()}"
        )
    return study


def _start_workers(settings: Settings, count: int) -> None:
    """Run :func:`work` here and in ``count - 1`` processes beside this one. On Linux they
    are forked before this process trains anything, with torch and Lightning imported;
    elsewhere (macOS, Windows) forking a process that imported torch is unsafe."""
    if sys.platform.startswith("linux"):
        context = multiprocessing.get_context("fork")
    else:
        context = multiprocessing.get_context("spawn")
    others = [context.Process(target=work, args=(settings, index)) for index in range(1, count)]
    for process in others:
        process.start()
    try:
        work(settings, 0)
    finally:
        for process in others:
            process.join()
    failed = [(index, p.exitcode) for index, p in enumerate(others, start=1) if p.exitcode]
    if failed:
        index, status = failed[0]
        raise UserError(f"worker {index} stopped with status {status}: its own error is above")


def _finish(
    study: optuna.Study, search: space.SearchSpace, base: dict[str, Any], folder: Path
) -> optuna.Study:
    folder.mkdir(parents=True, exist_ok=True)
    best = report.write_best(study, search, base, folder)
    plots = report.draw(study, folder)
    counts = Counter(past.state for past in study.get_trials(deepcopy=False))
    shown = ", ".join(
        f"{counts[state]} {state.name.lower()}" for state in TrialState if counts[state]
    )
    print(f"\nstudy {study.study_name}: {shown}")
    if best is not None:
        print(f"best: trial {study.best_trial.number}, {search.key} {study.best_value:.6g}")
        print(f"{best}: lay it over the example's config with a second --config")
    print(f"study folder: {folder}" + (f" ({', '.join(p.name for p in plots)})" if plots else ""))
    return study


if __name__ == "__main__":
    main()
