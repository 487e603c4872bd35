"""What a sweep leaves in its study's folder besides the runs, and its last lines.

``best.yaml`` is the best trial's run as a fragment to lay over the example's config: every
setting in which the trial's saved ``config.yaml`` differs from the config alone (the sampled
values and the fit arguments after ``--``). The plots use Optuna's matplotlib backend, which
needs no browser.
"""

import os
import warnings
from collections import Counter
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import optuna
import yaml
from optuna.trial import TrialState

from .space import SearchSpace


def finish(
    study: optuna.Study, space: SearchSpace, base: dict[str, Any], folder: Path
) -> optuna.Study:
    """Write ``best.yaml`` and the plots; say what the study holds."""
    folder.mkdir(parents=True, exist_ok=True)
    counts = Counter(past.state for past in study.get_trials(deepcopy=False))
    if counts[TrialState.COMPLETE]:
        best = study.best_trial
        log_dir = Path(best.user_attrs["log_dir"])
        config = yaml.safe_load((log_dir / "config.yaml").read_text())
        # Never where the trial wrote: a rerun writes where its own config says.
        root = {"default_root_dir": config["trainer"]["default_root_dir"]}
        base = {**base, "trainer": {**base["trainer"], **root}}  # the caller's stays as it was
        text = (
            f"# Trial {best.number} of study {study.study_name}: {space.key} {best.value:.6g}\n"
            f"# fit --config <the example's config> --config best.yaml runs it again.\n"
            f"# Its logs: {log_dir}\n"
        ) + yaml.safe_dump(_difference(config, base), sort_keys=False)
        _write(folder / "best.yaml", lambda path: path.write_text(text))
    plots = _draw(study, folder, counts[TrialState.COMPLETE])
    shown = (f"{counts[state]} {state.name.lower()}" for state in TrialState if counts[state])
    print(f"\nstudy {study.study_name}: {', '.join(shown)}")
    if counts[TrialState.COMPLETE]:
        print(f"best: trial {study.best_trial.number}, {space.key} {study.best_value:.6g}")
        print(f"{folder / 'best.yaml'}: lay it over the example's config with a second --config")
    print(f"study folder: {folder}" + (f" ({', '.join(plots)})" if plots else ""))
    return study


def _draw(study: optuna.Study, folder: Path, completed: int) -> list[str]:
    """Draw ``history.png`` and, from two completed trials on, ``importances.png``."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        from matplotlib import pyplot
        from matplotlib.figure import Figure
        from optuna.visualization import matplotlib as plots
    except ImportError:
        print("history.png and importances.png need matplotlib: install the plot extra")
        return []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        drawn = {"history.png": plots.plot_optimization_history(study)}
        if completed >= 2:
            # Optuna 5's default, named: Optuna 4's was fANOVA.
            evaluator = optuna.importance.PedAnovaImportanceEvaluator()
            drawn["importances.png"] = plots.plot_param_importances(study, evaluator=evaluator)
    for name, axes in drawn.items():
        figure = axes.figure
        assert isinstance(figure, Figure)
        figure.tight_layout()
        _write(folder / name, partial(figure.savefig, dpi=120))
        pyplot.close(figure)  # type: ignore[arg-type]
    return list(drawn)


def _write(path: Path, write: Callable[[Path], object]) -> None:
    """Write to a temporary name and move into place: several sweeps of one study may end
    at once."""
    temporary = path.with_name(f".{path.name}.{os.getpid()}{path.suffix}")
    write(temporary)
    os.replace(temporary, path)


def _difference(config: dict[str, Any], base: dict[str, Any]) -> dict[str, Any]:
    """The leaves of ``config`` that ``base`` lacks or holds with another value, nested."""
    fragment: dict[str, Any] = {}
    for key, value in config.items():
        theirs = base.get(key)
        if isinstance(value, dict) and isinstance(theirs, dict):
            if inner := _difference(value, theirs):
                fragment[key] = inner
        elif key not in base or value != theirs:
            fragment[key] = value
    return fragment
