"""The column-advantages bug in the rendered project's real PPO run: advantages reach the
clipped surrogate as ``(N, 1)`` against ``(N,)`` log-probabilities. With checks on it must
raise at the annotation; with checks off the command line's BroadcastGuardCallback must still
raise; with both off it trains silently.

Usage: ``python bench/ppo_column_advantages.py PACKAGE CONFIG ROOT_DIR SEED``. Prints one JSON
line.
"""

import importlib
import json
import sys
from pathlib import Path

from einops import rearrange


def main() -> None:
    package, config, root, seed = sys.argv[1], sys.argv[2], Path(sys.argv[3]), sys.argv[4]
    ppo_module = importlib.import_module(f"{package}.ppo.module")
    shapes = importlib.import_module(f"{package}.core.shapes")
    cli = importlib.import_module(f"{package}.ppo.__main__")
    correct_loss = ppo_module.clipped_surrogate_loss

    def column_advantages(log_prob, old_log_prob, advantages, clip_coef):
        column = rearrange(advantages, "batch -> batch 1")
        return correct_loss(log_prob, old_log_prob, column, clip_coef)

    ppo_module.clipped_surrogate_loss = column_advantages
    args = ["fit", "--config", config, f"--seed_everything={seed}"]
    checked_error = _error(cli, [*args, f"--trainer.default_root_dir={root / 'checked'}"])
    with shapes.checks_disabled():
        guard_error = _error(cli, [*args, f"--trainer.default_root_dir={root / 'guarded'}"])
        cli.PPOCLI.guarded_steps = 0  # the guard off too
        cli.main([*args, f"--trainer.default_root_dir={root / 'unchecked'}"])
    (summary_path,) = (root / "unchecked").rglob("summary.json")
    summary = json.loads(summary_path.read_text())
    print(
        json.dumps(
            {"checked_error": checked_error, "guard_error": guard_error, "unchecked": summary}
        )
    )


def _error(cli, args: list[str]) -> str | None:
    """The first lines of the error a run raises (None if it trains to the end)."""
    try:
        cli.main(args)
    except Exception as raised:
        wanted = ("Type-check error", "The problem arose", "Actual value", "Tensor.", "  at ")
        lines = [line for line in str(raised).splitlines() if line.startswith(wanted)]
        return f"{type(raised).__name__}: " + " | ".join(lines or str(raised).splitlines()[:2])
    return None


if __name__ == "__main__":
    main()
