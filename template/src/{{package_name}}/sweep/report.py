"""What a sweep leaves in its study's folder besides the runs: ``best.yaml`` and the plots.

``best.yaml`` is the best trial's run as a fragment to lay over the example's config: every
setting in which the trial's saved ``config.yaml`` differs from the config alone (the sampled
values and the fit arguments after ``--``). The plots use Optuna's matplotlib backend, which
writes a file with no browser. Each file is written to a temporary name and moved into
place: several sweeps of one study may end at once.
"""

import os
import warnings
from pathlib import Path
from typing import Any

import optuna
import yaml

from .space import SearchSpace


def write_best(
    study: optuna.Study, space: SearchSpace, base: dict[str, Any], folder: Path
) -> Path | None:
    """Write ``best.yaml``; None when no trial has completed yet."""
    if not study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,)):
        return None
    best = study.best_trial
    log_dir = Path(best.user_attrs["log_dir"])
    fragment = _difference(yaml.safe_load((log_dir / "config.yaml").read_text()), base)
    header = (
        f"# Trial {best.number} of study {study.study_name}: {space.key} {best.value:.6g}\n"
        f"# fit --config <the example's config> --config best.yaml runs it again.\n"
        f"# Its logs: {log_dir}\n"
    )
    temporary = folder / f".best.yaml.{os.getpid()}.tmp"
    temporary.write_text(header + yaml.safe_dump(fragment, sort_keys=False))
    os.replace(temporary, folder / "best.yaml")
    return folder / "best.yaml"


def draw(study: optuna.Study, folder: Path) -> list[Path]:
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
    completed = study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        drawn = {"history.png": plots.plot_optimization_history(study)}
        if len(completed) >= 2:
            # Optuna 5's default, named: Optuna 4's was fANOVA.
            evaluator = optuna.importance.PedAnovaImportanceEvaluator()
            drawn["importances.png"] = plots.plot_param_importances(study, evaluator=evaluator)
    for name, axes in drawn.items():
        figure = axes.figure
        assert isinstance(figure, Figure)
        figure.tight_layout()
        temporary = folder / f".{name}.{os.getpid()}.png"
        figure.savefig(temporary, dpi=120)
        os.replace(temporary, folder / name)
        pyplot.close(figure)  # type: ignore[arg-type]
    return [folder / name for name in drawn]


def _difference(
    config: dict[str, Any], base: dict[str, Any], path: tuple[str, ...] = ()
) -> dict[str, Any]:
    """The leaves of ``config`` that ``base`` lacks or holds with another value, nested;
    never where the trial wrote (a rerun writes where its own config says)."""
    fragment: dict[str, Any] = {}
    for key, value in config.items():
        here = (*path, key)
        if here == ("trainer", "default_root_dir"):
            continue
        theirs = base.get(key)
        if isinstance(value, dict) and isinstance(theirs, dict):
            inner = _difference(value, theirs, here)
            if inner:
                fragment[key] = inner
        elif key not in base or value != theirs:
            fragment[key] = value
    return fragment
