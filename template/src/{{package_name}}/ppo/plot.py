"""Draw a run's learning curve: ``python -m <package>.ppo.plot RUN_LOG_DIR``.

Reads ``episodes.csv`` (written at the end of ``fit``) and writes ``learning_curve.png``
beside it: every training episode's return and the mean of the last 20, against env steps.
Needs matplotlib (``pip install -e ".[plot]"``); training does not.
"""

import csv
import sys
from pathlib import Path
from statistics import fmean

from ..run.errors import UserError, user_errors


def plot_learning_curve(log_dir: Path, window: int = 20) -> Path:
    source = log_dir / "episodes.csv"
    if not source.is_file():
        raise UserError(f"{source}: no such file; is {log_dir} a PPO run's log dir?")
    import matplotlib.pyplot as plt

    plt.switch_backend("Agg")  # files only, no window
    with source.open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    steps = [int(row["env_step"]) for row in rows]
    returns = [float(row["return"]) for row in rows]
    rolling = [fmean(returns[max(0, i + 1 - window) : i + 1]) for i in range(len(returns))]
    figure, axes = plt.subplots(figsize=(7, 4))
    axes.plot(steps, returns, ".", markersize=2, alpha=0.4, label="episode return")
    axes.plot(steps, rolling, label=f"mean of last {window}")
    axes.set(xlabel="environment steps", ylabel="episodic return")
    axes.legend(loc="lower right")
    axes.grid(alpha=0.3)
    figure.tight_layout()
    target = log_dir / "learning_curve.png"
    figure.savefig(target, dpi=120)
    plt.close(figure)
    return target


if __name__ == "__main__":
    with user_errors():
        if len(sys.argv) != 2:
            raise UserError(f"usage: python -m {__package__}.plot RUN_LOG_DIR")
        print(plot_learning_curve(Path(sys.argv[1])))
