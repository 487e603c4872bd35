"""Every trainer preset combines with every example's config: a preset with a wrong key or
value fails here, not on the cluster.

``--print_config`` parses and validates a whole command line, prints it and exits, without
building a model or touching a device, so the GPU presets are checked on any machine.
"""

import importlib
import importlib.util
from pathlib import Path

import pytest
import yaml

from .helpers.paths import CONFIGS, PACKAGE

PRESETS = sorted((CONFIGS / "trainer").glob("*.yaml"))
EXAMPLES = [name for name in ("regression", "ppo") if importlib.util.find_spec(f"{PACKAGE}.{name}")]


def load_yaml(path: Path) -> dict:
    return yaml.safe_load(path.read_text())


def printed_config(capsys: pytest.CaptureFixture[str], example: str, args: list[str]) -> dict:
    main = importlib.import_module(f"{PACKAGE}.{example}.__main__").main
    with pytest.raises(SystemExit) as exited:
        main([*args, "--print_config"])
    assert exited.value.code in (None, 0)
    return yaml.safe_load(capsys.readouterr().out)


def test_every_preset_is_here() -> None:
    assert {"cpu", "gpu", "ddp"} <= {path.stem for path in PRESETS}


@pytest.mark.cli
@pytest.mark.parametrize("example", EXAMPLES)
@pytest.mark.parametrize("preset", PRESETS, ids=lambda path: path.stem)
def test_preset_sets_the_trainer_and_keeps_the_example(
    capsys: pytest.CaptureFixture[str], example: str, preset: Path
) -> None:
    config_path = CONFIGS / f"{example}.yaml"
    printed = printed_config(
        capsys, example, ["fit", "--config", str(config_path), "--trainer", str(preset)]
    )
    for key, value in load_yaml(preset).items():
        assert printed["trainer"][key] == value, key
    example_config = load_yaml(config_path)
    assert printed["trainer"]["max_epochs"] == example_config["trainer"]["max_epochs"]
    for key, value in example_config["model"].items():
        assert printed["model"][key] == value, key
