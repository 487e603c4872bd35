"""The regression example on two "nodes" of this machine, started by ``slurm/train.sbatch``
on a stand-in SLURM allocation and by two ``torchrun`` launches: each matches one process,
and after SLURM's warning signal a run checkpoints, requeues its job and resumes by itself.
"""

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from ...regression.__main__ import main
from ..project import CONFIGS, PACKAGE
from .allocation import Allocation, environment, free_port

BUDGET = ["--trainer.max_epochs=24", "--data.synthetic_samples=2048", "--data.batch_size=128"]
BUDGET += ["--trainer.accelerator=cpu", "--trainer.enable_progress_bar=false"]
BUDGET += ["--trainer.enable_model_summary=false"]


def _summary(root: Path) -> dict:
    (path,) = root.rglob("summary.json")
    return json.loads(path.read_text())


def _tail(path: Path) -> str:
    return path.read_text()[-3000:]


@pytest.fixture(scope="module")
def one_process(tmp_path_factory: pytest.TempPathFactory) -> dict:
    root = tmp_path_factory.mktemp("one_process")
    config = ["--config", str(CONFIGS / "regression.yaml"), "--trainer.devices=1"]
    main(["fit", *config, f"--trainer.default_root_dir={root}", *BUDGET])
    return _summary(root)


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory: pytest.TempPathFactory) -> dict:
    folder = tmp_path_factory.mktemp("uninterrupted")
    args = [f"--trainer.default_root_dir={folder / 'run'}", *BUDGET]
    status = Allocation(folder, job_id=1001).run(args, folder / "output.txt")
    assert status == 0, _tail(folder / "output.txt")
    return _summary(folder / "run")


@pytest.mark.slow
def test_sbatch_trains_on_two_slurm_tasks_like_one_process(
    one_process: dict, uninterrupted: dict
) -> None:
    print(f"\nval_r2: one process {one_process['val_r2']:.5f}, SLURM {uninterrupted['val_r2']:.5f}")
    assert uninterrupted["processes"] == 2
    assert uninterrupted["global_step"] == one_process["global_step"]
    assert abs(uninterrupted["val_r2"] - one_process["val_r2"]) <= 0.02


@pytest.mark.slow
def test_slurm_signal_checkpoints_requeues_and_the_requeued_job_resumes(
    tmp_path: Path, uninterrupted: dict
) -> None:
    allocation = Allocation(tmp_path, job_id=1002)
    root = tmp_path / "run"
    args = [f"--trainer.default_root_dir={root}", *BUDGET]
    job = allocation.start(args, tmp_path / "preempted.txt")
    assert allocation.preempt(job, root) == ["requeue 1002"]
    saved = torch.load(root / "hpc_ckpt_1.ckpt", weights_only=False)
    assert 0 < saved["global_step"] < uninterrupted["global_step"]
    assert not list(root.rglob("summary.json"))

    status = allocation.run(args, tmp_path / "requeued.txt")  # the same job, no --ckpt_path
    assert status == 0, _tail(tmp_path / "requeued.txt")
    resumed = _summary(root)
    difference = abs(resumed["val_r2"] - uninterrupted["val_r2"])
    print(f"\npreempted at step {saved['global_step']}; val_r2 differs by {difference:.2e}")
    assert resumed["resumed_from"] == str(root / "hpc_ckpt_1.ckpt")
    assert resumed["processes"] == 2
    assert resumed["global_step"] == uninterrupted["global_step"]
    # Within the bound asked for, not equal: Lightning restarts a data loader that keeps no
    # state from the epoch's first batch, so the preempted epoch repeats some batches.
    assert difference <= 1e-3


@pytest.mark.slow
def test_torchrun_on_two_nodes_of_loopback_matches_one_process(
    tmp_path: Path, one_process: dict
) -> None:
    port = free_port()
    fit = ["-m", f"{PACKAGE}.regression", "fit", "--config", str(CONFIGS / "regression.yaml")]
    fit += ["--trainer", str(CONFIGS / "trainer" / "multi_node.yaml"), "--trainer.num_nodes=2"]
    fit += ["--trainer.devices=1", f"--trainer.default_root_dir={tmp_path / 'run'}", *BUDGET]
    launches, env, out = [], environment(), subprocess.STDOUT
    for node in (0, 1):
        torchrun = [sys.executable, "-m", "torch.distributed.run", "--nnodes=2"]
        torchrun += ["--nproc-per-node=1", f"--node-rank={node}", "--master-addr=127.0.0.1"]
        with (tmp_path / f"node{node}.txt").open("w") as output:
            command = [*torchrun, f"--master-port={port}", *fit]
            launches.append(subprocess.Popen(command, env=env, stdout=output, stderr=out))
    for node, launch in enumerate(launches):
        assert launch.wait(timeout=240) == 0, _tail(tmp_path / f"node{node}.txt")
    two_nodes = _summary(tmp_path / "run")
    print(f"\nval_r2: one process {one_process['val_r2']:.5f}, torchrun {two_nodes['val_r2']:.5f}")
    assert two_nodes["processes"] == 2
    assert two_nodes["global_step"] == one_process["global_step"]
    assert abs(two_nodes["val_r2"] - one_process["val_r2"]) <= 0.02
