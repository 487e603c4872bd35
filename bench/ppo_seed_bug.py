"""The seed's RL bug in the rendered project's real PPO run: advantages reach the clipped
surrogate as ``(N, 1)``. With checks on it must raise; with checks off it trains silently.

Usage: ``python bench/ppo_seed_bug.py PACKAGE CONFIG ROOT_DIR SEED``. Prints one JSON line.
"""

import importlib
import json
import sys
from pathlib import Path

from einops import rearrange


def main() -> None:
    package, config, root, seed = sys.argv[1], sys.argv[2], Path(sys.argv[3]), sys.argv[4]
    ppo_module = importlib.import_module(f"{package}.ppo.module")
    shapes = importlib.import_module(f"{package}.shapes")
    cli = importlib.import_module(f"{package}.ppo.__main__")
    correct_loss = ppo_module.clipped_surrogate_loss

    def column_advantages(log_prob, old_log_prob, advantages, clip_coef):
        column = rearrange(advantages, "batch -> batch 1")
        return correct_loss(log_prob, old_log_prob, column, clip_coef)

    ppo_module.clipped_surrogate_loss = column_advantages
    args = ["fit", "--config", config, f"--seed_everything={seed}"]
    try:
        cli.main([*args, f"--trainer.default_root_dir={root / 'checked'}"])
        error = None
    except Exception as raised:  # the type-check error; anything else is reported too
        wanted = ("Type-check error", "The problem arose", "Actual value")
        lines = [line for line in str(raised).splitlines() if line.startswith(wanted)]
        error = f"{type(raised).__name__}: " + " | ".join(lines or str(raised).splitlines()[:2])
    with shapes.checks_disabled():
        cli.main([*args, f"--trainer.default_root_dir={root / 'unchecked'}"])
    (summary_path,) = (root / "unchecked").rglob("summary.json")
    summary = json.loads(summary_path.read_text())
    print(json.dumps({"checked_error": error, "unchecked": summary}))


if __name__ == "__main__":
    main()
