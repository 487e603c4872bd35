"""Every trainer preset combines with every example's config, and the SLURM script's own
command parses: a preset with a wrong key or value fails here, not on the cluster.

``--print_config`` parses and validates a whole command line, prints it and exits, without
building a model or touching a device, so the GPU presets are checked on any machine.
"""

import importlib
import importlib.util
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from .helpers.paths import CONFIGS, PACKAGE, PROJECT_ROOT, SLURM

PRESETS = sorted((CONFIGS / "trainer").glob("*.yaml"))
SBATCH = SLURM / "train.sbatch"
EXAMPLES = [name for name in ("regression", "ppo") if importlib.util.find_spec(f"{PACKAGE}.{name}")]


def _yaml(path: Path) -> dict:
    return yaml.safe_load(path.read_text())


def _printed_config(capsys: pytest.CaptureFixture[str], example: str, args: list[str]) -> dict:
    main = importlib.import_module(f"{PACKAGE}.{example}.__main__").main
    with pytest.raises(SystemExit) as exited:
        main([*args, "--print_config"])
    assert exited.value.code in (None, 0)
    return yaml.safe_load(capsys.readouterr().out)


def test_every_preset_is_here() -> None:
    assert {path.stem for path in PRESETS} == {"cpu", "gpu", "ddp", "multi_node"}


@pytest.mark.parametrize("example", EXAMPLES)
@pytest.mark.parametrize("preset", PRESETS, ids=lambda path: path.stem)
def test_preset_sets_the_trainer_and_keeps_the_example(
    capsys: pytest.CaptureFixture[str], example: str, preset: Path
) -> None:
    config_path = CONFIGS / f"{example}.yaml"
    printed = _printed_config(
        capsys, example, ["fit", "--config", str(config_path), "--trainer", str(preset)]
    )
    for key, value in _yaml(preset).items():
        assert printed["trainer"][key] == value, key
    example_config = _yaml(config_path)
    assert printed["trainer"]["max_epochs"] == example_config["trainer"]["max_epochs"]
    for key, value in example_config["model"].items():
        assert printed["model"][key] == value, key


@pytest.mark.slow
def test_sbatch_script_is_valid_bash() -> None:
    if shutil.which("bash") is None:
        pytest.skip("bash is not installed")
    done = subprocess.run(["bash", "-n", str(SBATCH)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_sbatch_command_parses_with_slurm_sizes(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    script = SBATCH.read_text().replace("\\\n", " ")
    (command,) = [line for line in script.splitlines() if line.startswith("srun ")]
    slurm = {"$SLURM_NNODES": "3", "$SLURM_NTASKS_PER_NODE": "2"}
    words = [slurm.get(word, word) for word in shlex.split(command) if word != "$@"]
    assert words[:3] == ["srun", "python", "-m"]
    package, example = words[3].split(".")
    assert package == PACKAGE and example in EXAMPLES
    monkeypatch.chdir(PROJECT_ROOT)  # the script runs from the project root
    printed = _printed_config(capsys, example, words[4:])
    assert printed["trainer"]["num_nodes"] == 3
    assert str(printed["trainer"]["devices"]) == "2"  # Lightning reads "2" as two devices
    assert printed["trainer"]["strategy"] == "ddp"
