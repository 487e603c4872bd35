"""Bad PPO input is refused before training, in one line: ``error: <what is wrong>``, exit
status 2, no traceback (the real command line's status: ``test_run_files.py``). Each row of
``ROWS`` is one mistake and the pattern of that line. A shape error during training keeps its
traceback: ``test_ppo.py::test_column_advantages_raise_inside_training``."""

import re
from pathlib import Path

import gymnasium as gym
import pytest
from gymnasium.envs.registration import EnvSpec

from ...ppo.__main__ import main
from ..project import CONFIGS, refusal

CONFIG = CONFIGS / "ppo.yaml"
TINY = ["--model.num_envs=2", "--model.num_steps=16", "--model.num_minibatches=2"]

UNREGISTERED = " is not a registered gymnasium environment; "
# env_id: what follows "error: env_id '<env_id>'" on the last line
ENV_IDS = {
    "CartPol-v1": UNREGISTERED + "did you mean CartPole-v1, CartPole-v0",  # misspelt
    "CartPole-v9": " is not a registered .*did you mean CartPole-v1",  # an unknown version
    "Nothing-v0": UNREGISTERED + "see ",
    "no_such_module:Env-v0": ": cannot import 'no_such_module'",
    "NeedsMissingPackage-v0": ": missing_package is not installed, run `pip install",
    "FrozenLake-v1": r": observations must be flat Box vectors, got Discrete\(16\)$",
}
# row: (options after the config, the pattern of the last line)
ROWS: dict[str, tuple[list[str], str]] = {
    env: ([f"--model.env_id={env}"], f"env_id '{env}'{rest}") for env, rest in ENV_IDS.items()
}
ROWS |= {
    "no_environments": (["--model.num_envs=0"], r"Parser .*num_envs.*int >= 1: 0 is out of range$"),
    "uneven_minibatches": (
        [*TINY, "--model.num_minibatches=3"],
        r"num_envs \* num_steps = 32 does not split into num_minibatches = 3 equal minibatches$",
    ),
    "budget_below_one_rollout": (
        [*TINY, "--model.total_env_steps=20"],
        r"total_env_steps = 20 is less than one rollout \(num_envs \* num_steps = 32\)$",
    ),
    "more_than_one_epoch": (
        [*TINY, "--model.total_env_steps=64", "--trainer.max_epochs=2"],
        r"PPOModule runs its whole budget .* in one epoch; set --trainer\.max_epochs=1, not 2$",
    ),
    "wrong_type": (
        ["--model.num_envs=lots"],
        r"Parser key \"model\.num_envs\": Not of type int >= 1: invalid literal for int\(\)",
    ),
    "unknown_key": (["--model.num_emvs=2"], r"unrecognized arguments: --model\.num_emvs=2$"),
    # argparse would take a unique prefix for the whole option and train with num_envs=2.
    "abbreviated_key": (["--model.num_env=2"], r"unrecognized arguments: --model\.num_env=2$"),
}


def _needs_missing_package(**kwargs: object) -> gym.Env:
    raise gym.error.DependencyNotInstalled(
        'missing_package is not installed, run `pip install "gymnasium[missing]"`'
    )


@pytest.fixture(autouse=True)
def env_of_a_missing_package(monkeypatch: pytest.MonkeyPatch) -> None:
    """A registered id whose package is not installed, as LunarLander is without Box2D."""
    spec = EnvSpec("NeedsMissingPackage-v0", entry_point=_needs_missing_package)
    monkeypatch.setitem(gym.registry, spec.id, spec)


@pytest.mark.cli
@pytest.mark.parametrize("row", ROWS)
def test_bad_input_is_refused_in_one_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, row: str
) -> None:
    options, pattern = ROWS[row]
    run = ["fit", "--config", str(CONFIG), f"--trainer.default_root_dir={tmp_path / 'run'}"]
    line = refusal(capsys, lambda: main([*run, *options]))
    assert re.search("^error: " + pattern, line), line
    assert not list(tmp_path.rglob("*.ckpt"))  # nothing trained
