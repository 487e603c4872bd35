"""``ppo.enjoy`` replays a checkpoint, by default with the run's own evaluation seed and
episode count (``trained``'s are not the defaults, so they must come from the file): its
greedy figures are the run's final ``eval_return_mean`` and ``eval_return_min`` exactly."""

import json
import re
from pathlib import Path

import pytest
import torch

from ...ppo import enjoy
from ...ppo.enjoy import main
from ..project import refusal, refused_line, run_example
from .conftest import EVAL_EPISODES, EVAL_SEED, checkpoint


def test_replay_defaults_to_the_runs_final_evaluation(trained: Path, tmp_path: Path) -> None:
    summary = json.loads((trained / "summary.json").read_text())
    output = tmp_path / "replay.json"
    report = main(["--ckpt_path", checkpoint(trained), "--output", str(output)])
    assert (report["seed"], report["episodes"]) == (EVAL_SEED, EVAL_EPISODES)
    assert report["deterministic_return_mean"] == summary["eval_return_mean"]
    assert report["deterministic_return_min"] == summary["eval_return_min"]
    assert json.loads(output.read_text()) == report
    sampled = report["sampled_returns"]
    assert len(sampled) == EVAL_EPISODES and report["sampled_return_min"] == min(sampled)
    report = main(["--ckpt_path", checkpoint(trained), "--seed", "5", "--episodes", "2"])
    assert (report["seed"], report["episodes"]) == (5, 2)
    assert len(report["deterministic_returns"]) == 2


# row: (the arguments, with {ckpt}, {root} and {dir} filled in; the pattern of the last line)
ROWS: dict[str, tuple[str, str]] = {
    "missing_checkpoint": ("--ckpt_path={dir}/no.ckpt", r".*/no\.ckpt: no such checkpoint file$"),
    "truncated_checkpoint": (
        "--ckpt_path={dir}/half.ckpt",
        r".*/half\.ckpt: not a readable checkpoint, the file is truncated or corrupt",
    ),
    "other_models_checkpoint": (
        "--ckpt_path={dir}/regression.ckpt",
        r".*/regression\.ckpt: not a checkpoint of PPOModule: its hyperparameters weight_decay",
    ),
    "no_episodes": ("--ckpt_path={ckpt} --episodes=0", r"--episodes must be at least 1, got 0$"),
    "output_under_a_file": (
        "--ckpt_path={ckpt} --output={root}/summary.json/replay.json",
        r"--output .*summary\.json: cannot write there: .*summary\.json is a file$",
    ),
    "negative_seed": (
        "--ckpt_path={ckpt} --seed=-1",
        r"--seed must be in \[0, 2\*\*32\), as environments take it; got -1$",
    ),
    "output_is_a_folder": (
        "--ckpt_path={ckpt} --output={dir}",
        r"--output .*: a folder; name a file to write$",
    ),
    "no_checkpoint_named": ("--episodes=2", r"the following arguments are required: ckpt_path$"),
    "wrong_type": ("--ckpt_path={ckpt} --seed=lots", r'Parser key "seed": .*Given value: lots$'),
}


def _args(row: str, trained: Path, folder: Path) -> list[str]:
    """The row's arguments; a truncated checkpoint and a regression-like one go to ``folder``."""
    whole = Path(checkpoint(trained)).read_bytes()
    (folder / "half.ckpt").write_bytes(whole[: len(whole) // 2])
    hyperparameters = {"learning_rate": 1e-3, "weight_decay": 0.0}
    regression = {"state_dict": {"net.weight": torch.zeros(2)}, "hyper_parameters": hyperparameters}
    torch.save(regression, folder / "regression.ckpt")
    paths = {"ckpt": checkpoint(trained), "root": str(trained), "dir": str(folder)}
    return ROWS[row][0].format(**paths).split()


@pytest.mark.parametrize("row", ROWS)
def test_bad_input_is_refused_in_one_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, trained: Path, row: str
) -> None:
    line = refusal(capsys, lambda: main(_args(row, trained, tmp_path)))
    assert re.search("^error: " + ROWS[row][1], line), line


@pytest.mark.slow
def test_command_line_exits_2_with_the_error_last(tmp_path: Path, trained: Path) -> None:
    args = _args("other_models_checkpoint", trained, tmp_path)
    returncode, lines = run_example("ppo.enjoy", args, tmp_path)
    assert returncode == 2, "\n".join(lines[-30:])
    assert re.search("^error: " + ROWS["other_models_checkpoint"][1], refused_line(lines))


def test_video_in_a_project_without_videos_is_refused_with_the_update_that_adds_them(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, trained: Path
) -> None:
    monkeypatch.setattr(enjoy, "VIDEO", f"{enjoy.__package__}.no_video_here")  # as if absent
    line = refusal(capsys, lambda: main(["--ckpt_path", checkpoint(trained), "--video", "r.mp4"]))
    assert line == (
        "error: --video: this project was generated without PPO videos; "
        "copier update --defaults --data include_video=true adds them"
    )
