"""An environment id gymnasium does not know is refused before training, in one line that
names the id and the closest registered ids; the real command line exits non-zero with
that line last."""

import re
from pathlib import Path

import pytest

from ...ppo.__main__ import main
from ..helpers.command_line import run_example
from ..helpers.paths import CONFIGS

CONFIG = CONFIGS / "ppo.yaml"

# env id: the pattern of the one line that refuses it
ROWS = {
    "CartPol-v1": r"env_id 'CartPol-v1' is not a registered gymnasium environment; "
    r"did you mean CartPole-v1, CartPole-v0",
    "CartPole-v9": r"env_id 'CartPole-v9' is not a registered .*did you mean CartPole-v1",
    "Nothing-v0": r"env_id 'Nothing-v0' is not a registered gymnasium environment; see ",
    "no_such_module:Env-v0": r"env_id 'no_such_module:Env-v0': cannot import 'no_such_module'",
}


def _args(root: Path, env_id: str) -> list[str]:
    return [
        "fit",
        "--config",
        str(CONFIG),
        f"--trainer.default_root_dir={root}",
        "--model.env_id",
        env_id,
    ]


@pytest.mark.cli
@pytest.mark.parametrize("env_id", ROWS)
def test_unknown_env_id_is_refused_in_one_line(tmp_path: Path, env_id: str) -> None:
    with pytest.raises(ValueError) as refused:
        main(_args(tmp_path / "run", env_id))
    assert "\n" not in str(refused.value)
    assert re.search(ROWS[env_id], str(refused.value)), refused.value
    assert not (tmp_path / "run").exists()


@pytest.mark.slow
def test_command_line_exits_nonzero_naming_the_env_id_last(tmp_path: Path) -> None:
    returncode, lines = run_example("ppo", _args(tmp_path / "run", "CartPol-v1"), tmp_path)
    assert returncode != 0
    assert re.search("ValueError: " + ROWS["CartPol-v1"], lines[-1]), "\n".join(lines[-30:])
    assert not (tmp_path / "run").exists()
