"""The SLURM script's own command parses with every example's config, and its first
argument picks the example: a mistake fails here, not on the cluster (so does a script that
is not valid bash)."""

import os
import shlex
import subprocess
from pathlib import Path

import pytest
import yaml

from ..project import CONFIGS, PACKAGE, PROJECT_ROOT, example_main
from ..test_run_files import EXAMPLES
from .allocation import SLURM

SBATCH = SLURM / "train.sbatch"
MISSING = [name for name in ("regression", "ppo", "sequence") if name not in EXAMPLES]


@pytest.mark.cli
@pytest.mark.parametrize("example", EXAMPLES)
def test_sbatch_command_parses_with_slurm_sizes(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, example: str
) -> None:
    script = SBATCH.read_text().replace("\\\n", " ")
    (command,) = [line for line in script.splitlines() if line.startswith("srun ")]
    slurm = {"$SLURM_NNODES": "3", "$SLURM_NTASKS_PER_NODE": "2"}
    words = [
        slurm.get(word, word).replace("$example", example)
        for word in shlex.split(command)
        if word != "$@"
    ]
    assert words[:3] == ["srun", "python", "-m"]
    assert words[3] == f"{PACKAGE}.{example}"
    monkeypatch.chdir(PROJECT_ROOT)  # the script runs from the project root
    with pytest.raises(SystemExit) as exited:
        example_main(example)([*words[4:], "--print_config"])
    assert exited.value.code in (None, 0)
    printed = yaml.safe_load(capsys.readouterr().out)
    assert printed["trainer"]["num_nodes"] == 3
    assert str(printed["trainer"]["devices"]) == "2"  # Lightning reads "2" as two devices
    assert printed["trainer"]["strategy"] == "ddp"
    # The requeue on SLURM's warning signal is the script's to add (preemption.py).
    added = [callback["class_path"] for callback in printed["trainer"]["callbacks"] or []]
    assert added == [f"{PACKAGE}.preemption.SlurmRequeue"]
    example_model = yaml.safe_load((CONFIGS / f"{example}.yaml").read_text())["model"]
    assert {key: printed["model"][key] for key in example_model} == example_model


def _sbatch_with_echo_srun(
    tmp_path: Path, args: list[str], **variables: str | None
) -> subprocess.CompletedProcess:
    """Run the script with an ``srun`` that prints the command it was given, and on stderr
    its ``OMP_NUM_THREADS``; ``variables`` set (None: unset) in the script's environment."""
    srun = tmp_path / "srun"
    srun.write_text('#!/bin/bash\necho "OMP_NUM_THREADS=$OMP_NUM_THREADS" >&2\necho "$@"\n')
    srun.chmod(0o755)
    env = os.environ | {
        "PATH": f"{tmp_path}{os.pathsep}{os.environ['PATH']}",
        "SLURM_SUBMIT_DIR": str(PROJECT_ROOT),
        "SLURM_NNODES": "2",
        "SLURM_NTASKS_PER_NODE": "1",
    }
    env = {name: value for name, value in (env | variables).items() if value is not None}
    return subprocess.run(["bash", str(SBATCH), *args], env=env, capture_output=True, text=True)


@pytest.mark.slow
@pytest.mark.parametrize(("exported", "used"), [(None, "8"), ("3", "3")])
def test_each_task_computes_with_its_cpus_unless_threads_are_exported(
    tmp_path: Path, exported: str | None, used: str
) -> None:
    done = _sbatch_with_echo_srun(tmp_path, [], SLURM_CPUS_PER_TASK="8", OMP_NUM_THREADS=exported)
    assert done.returncode == 0, done.stderr
    assert f"OMP_NUM_THREADS={used}" in done.stderr.splitlines()


@pytest.mark.slow
@pytest.mark.parametrize("first", [None, *EXAMPLES])
def test_sbatch_first_argument_picks_the_example(tmp_path: Path, first: str | None) -> None:
    done = _sbatch_with_echo_srun(tmp_path, [*([first] if first else []), "--seed_everything", "7"])
    assert done.returncode == 0, done.stderr
    words = done.stdout.split()
    example = first or EXAMPLES[0]
    assert words[:5] == ["python", "-m", f"{PACKAGE}.{example}", "fit", "--config"]
    assert words[5] == f"configs/{example}.yaml"
    assert words[-2:] == ["--seed_everything", "7"]


@pytest.mark.slow
@pytest.mark.parametrize("absent", MISSING)
def test_sbatch_refuses_an_example_the_project_lacks(tmp_path: Path, absent: str) -> None:
    done = _sbatch_with_echo_srun(tmp_path, [absent])
    assert done.returncode == 2
    assert done.stderr.splitlines()[-1] == (
        f"error: this project has no {absent} example (no configs/{absent}.yaml)"
    )
    assert not done.stdout
