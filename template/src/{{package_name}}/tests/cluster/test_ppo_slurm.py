"""PPO through ``slurm/train.sbatch ppo`` on a stand-in SLURM allocation of 2 nodes x 1 task:
the tasks are seeded apart and share the global env-step budget, and a run stopped by
SLURM's warning signal and requeued finishes that budget instead of starting it again.
"""

import csv
import json
from pathlib import Path

import pytest
import torch

from .allocation import Allocation

ROLLOUT = 2 * 4 * 32  # env steps of one rollout, over both tasks
TOTAL = 40 * ROLLOUT
TINY = ["--trainer.accelerator=cpu", "--model.num_envs=4", "--model.num_steps=32"]
TINY += ["--model.update_epochs=2", f"--model.total_env_steps={TOTAL}"]
TINY += ["--model.eval_every_env_steps=0", "--model.eval_episodes=2"]
TINY += ["--trainer.enable_model_summary=false"]


def _rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as handle:
        return list(csv.DictReader(handle))


@pytest.mark.slow
def test_ppo_through_sbatch_is_requeued_and_finishes_its_global_budget(tmp_path: Path) -> None:
    allocation = Allocation(tmp_path, job_id=2001)
    root = tmp_path / "run"
    logger = ["--trainer.logger=CSVLogger", f"--trainer.logger.save_dir={root}"]
    args = ["ppo", f"--trainer.default_root_dir={root}", *logger, *TINY]
    job = allocation.start(args, tmp_path / "preempted.txt")
    assert allocation.preempt(job, root) == ["requeue 2001"]
    saved = torch.load(root / "hpc_ckpt_1.ckpt", weights_only=False)["ppo"]
    assert saved["processes"] == 2
    assert 0 < saved["env_steps"] < TOTAL

    status = allocation.run(args, tmp_path / "requeued.txt")  # the same job, no --ckpt_path
    assert status == 0, (tmp_path / "requeued.txt").read_text()[-3000:]
    (summary_path,) = root.rglob("summary.json")
    summary = json.loads(summary_path.read_text())
    print(f"\npreempted after {saved['env_steps']} of {TOTAL} env steps; resumed to the end")
    assert summary["resumed_from"] == str(root / "hpc_ckpt_1.ckpt")
    assert summary["processes"] == 2
    assert summary["env_steps"] == TOTAL == 2 * summary["env_steps_per_process"]
    # The requeued run logs once per rollout, from the first rollout after the checkpoint.
    logged = [int(row["step"]) for row in _rows(summary_path.parent / "metrics.csv")]
    assert sorted(set(logged)) == list(range(saved["env_steps"] + ROLLOUT, TOTAL + 1, ROLLOUT))

    first = _rows(summary_path.parent / "episodes.csv")
    second = _rows(summary_path.parent / "episodes_rank1.csv")
    lengths = [[row["length"] for row in rows] for rows in (first, second)]
    assert first and second and lengths[0] != lengths[1]  # the tasks were seeded apart
