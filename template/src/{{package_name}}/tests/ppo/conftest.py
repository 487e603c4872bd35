"""A PPO checkpoint trained once, tiny, in this process, for the tests that replay it."""

from pathlib import Path

import pytest

from ...ppo.__main__ import main as fit

EVAL_SEED, EVAL_EPISODES = 123, 3


@pytest.fixture(scope="package")
def trained(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The run root of a finished tiny run: ``summary.json`` and ``checkpoints/last.ckpt``."""
    root = tmp_path_factory.mktemp("trained")
    budget = ["--model.num_envs=2", "--model.num_steps=32", "--model.total_env_steps=128"]
    tiny = ["--model.num_minibatches=2", "--model.update_epochs=1", "--model.hidden_sizes=[8]"]
    evaluation = [f"--model.eval_seed={EVAL_SEED}", f"--model.eval_episodes={EVAL_EPISODES}"]
    quiet = ["--trainer.logger=false", "--trainer.enable_progress_bar=false"]
    fit(["fit", f"--trainer.default_root_dir={root}", *budget, *tiny, *evaluation, *quiet])
    return root


def checkpoint(root: Path) -> str:
    return str(root / "checkpoints" / "last.ckpt")
