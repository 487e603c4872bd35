"""Command line: ``python -m <package>.ppo.enjoy --ckpt_path FILE``: replay a trained policy,
greedily (as the run's evaluations did) and with sampled actions; by default the episodes of the
run's evaluations, so the greedy figures equal its last evaluation's. The file is read with
``torch.load(weights_only=True)``: it holds tensors and plain values, never code to run."""

import importlib.util
import json
from pathlib import Path
from typing import Any

import torch

from ..run.checkpoints import check_fits, check_hyperparameters, read
from ..run.cli import OneLineErrorParser, check_writable
from ..run.errors import UserError, user_errors
from ..run.threads import chosen
from .evaluate import evaluate
from .module import PPOModule

VIDEO = f"{__package__}.video"
"""The module that writes ``--video``, in a project generated with PPO videos."""


def enjoy(
    ckpt_path: str,
    episodes: int | None = None,
    seed: int | None = None,
    video: str | None = None,
    output: str | None = None,
) -> dict[str, Any]:
    """Replay the policy of a PPO checkpoint and report its returns.

    Args:
        ckpt_path: A checkpoint written by ``ppo fit`` (``checkpoints/last.ckpt``, say).
        episodes: Episodes for each policy; default: the run's ``eval_episodes``.
        seed: Seed of the episodes' environments; default: the run's ``eval_seed``.
        video: Write an MP4 of the greedy policy's first episode here (PPO videos only).
        output: Write the figures here as JSON.
    """
    if episodes is not None and episodes < 1:
        raise UserError(f"--episodes must be at least 1, got {episodes}")
    if seed is not None and not 0 <= seed < 2**32:
        raise UserError(f"--seed must be in [0, 2**32), as environments take it; got {seed}")
    recorder = None
    if video is not None:
        if importlib.util.find_spec(VIDEO) is None:
            raise UserError(
                "--video: this project was generated without PPO videos; "
                "copier update --defaults --data include_video=true adds them"
            )
        recorder = importlib.import_module(VIDEO)
        recorder.check(video)
    for option, path in (("--video", video), ("--output", output)):
        if path is not None:
            if Path(path).is_dir():
                raise UserError(f"{option} {path}: a folder; name a file to write")
            check_writable(Path(path).parent, option)
    module = load(ckpt_path)
    hp = module.hparams
    episodes = episodes or int(hp.eval_episodes)
    seed = int(hp.eval_seed) if seed is None else seed
    torch.set_num_threads(chosen(hp.torch_threads))  # training's rule: hparam, else environment
    greedy = evaluate(module.agent, hp.env_id, episodes, seed)
    torch.manual_seed(seed)
    sampled = evaluate(module.agent, hp.env_id, episodes, seed, deterministic=False)
    print(f"{hp.env_id}: {episodes} episodes, seed {seed}")
    report: dict[str, Any] = {"ckpt_path": str(ckpt_path), "env_id": hp.env_id}
    report |= {"episodes": episodes, "seed": seed}
    for policy, returns in (("deterministic", greedy), ("sampled", sampled)):
        mean, low = sum(returns) / episodes, min(returns)
        report |= {f"{policy}_return_mean": mean, f"{policy}_return_min": low}
        print(f"{policy} policy: return mean {mean:.2f}, min {low:.2f}")
    report |= {"deterministic_returns": greedy, "sampled_returns": sampled}
    if recorder is not None and video is not None:
        frames = recorder.record(module, seed, video)
        report["video"], report["video_frames"] = video, frames
        print(f"video of the first deterministic episode ({frames} frames): {video}")
    if output is not None:
        Path(output).write_text(json.dumps(report, indent=2) + "\n")
        print(f"figures: {output}")
    return report


def load(ckpt_path: str | Path) -> PPOModule:
    """The PPOModule a checkpoint was saved from, rebuilt from its own hyperparameters, or a
    UserError that says why the file is not one (missing, corrupt, another model's)."""
    checkpoint = read(ckpt_path)
    if "hyper_parameters" not in checkpoint:
        raise UserError(f"{ckpt_path}: not a checkpoint of PPOModule: it has no hyperparameters")
    check_hyperparameters(checkpoint, PPOModule, ckpt_path)
    saved = checkpoint["hyper_parameters"].items()
    kept = {key: value for key, value in saved if not key.startswith("_") and key != "compile"}
    module = PPOModule(**kept, compile=False)  # compiling would only slow a replay down
    check_fits(checkpoint, module, ckpt_path)
    module.load_state_dict(checkpoint["state_dict"])
    return module.eval()


def main(args: list[str] | None = None) -> dict[str, Any]:
    """Parse ``args`` (default: the command line) and replay the checkpoint."""
    with user_errors():
        parser = OneLineErrorParser(
            prog=f"python -m {__package__}.enjoy", description="Replay a PPO checkpoint's policy."
        )
        parser.add_function_arguments(enjoy, as_positional=False)
        return enjoy(**parser.parse_args(args).as_dict())


if __name__ == "__main__":
    main()
