"""PPO on two CPU processes, and PPO resumed from a checkpoint. The DDP run is a child process
(``python -m <package>.ppo``): DDP's launcher starts the second process by rerunning the
command line. The resumed run is in this process."""

import csv
import json
from pathlib import Path

import pytest
import torch

from ...ppo import PPOModule
from ...ppo.__main__ import main
from ..project import QUIET, refusal, run_example

ROLLOUT = 4 * 32  # env steps of one process's rollout
TINY = ["--model.num_envs=4", "--model.num_steps=32", "--model.update_epochs=2"]
TINY += ["--model.num_minibatches=1", "--model.eval_every_env_steps=0", "--model.eval_episodes=2"]


def _args(root: Path, *extra: str) -> list[str]:
    """A fit on the CLI's defaults (no config file, so an installed package runs it too),
    logged to CSV so that the logged env steps can be read back."""
    folders = [f"--trainer.default_root_dir={root}", f"--trainer.logger.save_dir={root}"]
    trainer = ["--trainer.accelerator=cpu", "--trainer.logger=CSVLogger", *folders, *QUIET]
    return ["fit", "--seed_everything=0", *trainer, *TINY, *extra]


def _rows(path: Path) -> list[dict[str, str]]:
    return list(csv.DictReader(path.read_text().splitlines()))


def _logged(root: Path, name: str) -> dict[int, float]:
    """Env step -> value of a metric the module logged once per rollout."""
    (path,) = root.rglob("metrics.csv")
    return {int(row["step"]): float(row[name]) for row in _rows(path) if row.get(name)}


@pytest.mark.slow
def test_ddp_ranks_collect_different_rollouts_and_count_steps_globally(tmp_path: Path) -> None:
    ddp = ["--trainer.strategy=ddp", "--trainer.devices=2", "--model.total_env_steps=1024"]
    args = _args(tmp_path, *ddp)
    returncode, lines = run_example("ppo", args, tmp_path)
    # A run whose processes ended with different parameters raises at its end.
    assert returncode == 0, "\n".join(lines[-30:])

    (summary_path,) = tmp_path.rglob("summary.json")
    summary = json.loads(summary_path.read_text())
    assert summary["processes"] == 2
    assert summary["env_steps"] == 1024 == 2 * summary["env_steps_per_process"]
    assert sorted(_logged(tmp_path, "learning_rate")) == [256, 512, 768, 1024]

    names = ("episodes.csv", "episodes_rank1.csv")  # rank 0's, rank 1's
    lengths = [[row["length"] for row in _rows(summary_path.parent / name)] for name in names]
    assert lengths[0] and lengths[1] and lengths[0] != lengths[1]


@pytest.mark.cli
def test_resume_restores_optimizer_schedule_env_steps_and_evaluations(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    budget = ["--model.total_env_steps=512", "--model.learning_rate=0.001"]
    budget += ["--model.anneal_lr=true", f"--model.eval_every_env_steps={ROLLOUT}"]
    # Two optimizer steps per rollout: max_steps=4 stops after two of the four rollouts.
    main(_args(tmp_path, *budget, "--trainer.max_steps=4"))
    cli = main(_args(tmp_path, *budget, "--ckpt_path=last"))

    module, (optimizer,) = cli.model, cli.trainer.optimizers
    assert module.rollouts_done == 4 and cli.trainer.global_step == 8
    assert {int(state["step"]) for state in optimizer.state.values()} == {8}  # Adam's count
    assert module.collector is not None and module.collector.first_env_step == 2 * ROLLOUT
    resumed = tmp_path / "lightning_logs" / "version_1"
    lr = _logged(resumed, "learning_rate")
    assert lr == pytest.approx({3 * ROLLOUT: 0.001 * 2 / 4, 4 * ROLLOUT: 0.001 * 1 / 4})
    # The evaluations before the stop come back from the checkpoint (PPOReporting's state).
    summary = json.loads((resumed / "summary.json").read_text())
    assert [steps for steps, _ in summary["evaluations"]] == [ROLLOUT * n for n in (1, 2, 3, 4)]

    # A checkpoint written by two processes is refused in one; it loads without a trainer.
    last = tmp_path / "checkpoints" / "last.ckpt"
    assert PPOModule.load_from_checkpoint(last).rollouts_done == 4
    checkpoint = torch.load(last, weights_only=False)
    checkpoint["ppo"]["processes"] = 2
    from_two = tmp_path / "from_two.ckpt"
    torch.save(checkpoint, from_two)
    line = refusal(capsys, lambda: main(_args(tmp_path, f"--ckpt_path={from_two}")))
    assert line == "error: the checkpoint was written by 2 processes; resume it with as many, not 1"
